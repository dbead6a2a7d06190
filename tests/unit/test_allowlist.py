"""The per-RPC allow-list of service identities (quire_common.allowlist):
every internal RPC is listed, only real identities call, docs/security.md
shows the table as the code has it; and how a certificate's names are judged
(quire_common.security.read_peer_identity)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from quire_client.devcerts import Authority, CertBundle, load_authority, write_dev_certs
from quire_common.allowlist import ALLOWED_CALLERS, SERVICE_IDENTITIES, allowed_callers, markdown_table
from quire_common.security import read_peer_identity
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.placement.v1 import placement_pb2
from quire_proto.registry.v1 import registry_pb2

DOCS = Path(__file__).resolve().parents[2] / "docs"


def internal_methods() -> set[str]:
    methods = set()
    for module in (registry_pb2, placement_pb2, bookie_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            methods.update(f"/{service.full_name}/{method.name}" for method in service.methods)
    return methods


def test_every_internal_rpc_is_listed_and_nothing_else() -> None:
    assert set(ALLOWED_CALLERS) == internal_methods()


def test_callers_are_identities_quire_issues_and_unknown_methods_have_none() -> None:
    for method, callers in ALLOWED_CALLERS.items():
        assert callers and callers <= SERVICE_IDENTITIES, method
    assert allowed_callers("/quire.registry.v1.RegistryService/NoSuchMethod") == frozenset()


def test_security_md_shows_the_table_the_code_enforces() -> None:
    assert markdown_table() in (DOCS / "security.md").read_text()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CertBundle:
    return write_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def service_ca(bundle: CertBundle) -> Authority:
    return load_authority(bundle.ca, bundle.directory / "ca-key.pem")


def judged(bundle: CertBundle, cert: bytes):  # type: ignore[no-untyped-def]
    return read_peer_identity(cert, x509.load_pem_x509_certificates(bundle.ca.read_bytes()))


def test_the_service_ca_issues_services_and_the_client_ca_clients(bundle: CertBundle) -> None:
    for name in ("gateway", "registry", "placement", "bookie", "operator"):
        identity = judged(bundle, bundle.cert(name).read_bytes())
        assert identity.service == name and identity.common_name == f"quire-service:{name}"
    client = judged(bundle, bundle.cert("client-admin").read_bytes())
    assert client.service is None and client.common_name == "client-admin" and not client.ambiguous
    client_ca = load_authority(bundle.client_ca, bundle.directory / "client-ca-key.pem")
    posing = judged(bundle, client_ca.issue("quire-service:gateway")[0])
    assert posing.service is None and "did not issue" in posing.why_not_service


def test_several_or_disagreeing_names_are_refused_whatever_comes_first(
    bundle: CertBundle, service_ca: Authority
) -> None:
    for cert, why in [
        (service_ca.issue("quire-service:gateway", uris=("quire-service:bookie",))[0], "several service names"),
        (service_ca.issue("quire-service:bookie", uris=("quire-service:gateway",))[0], "several service names"),
        (service_ca.issue("client-admin", uris=("quire-service:gateway",))[0], "names disagree"),
        (service_ca.issue("quire-service:gateway", uris=("spiffe://quire/x",))[0], "names disagree"),
        (service_ca.issue("x", hosts=("quire-service:registry",))[0], "names disagree"),
        (service_ca.issue("quire-service:gateway", more_common_names=("client-admin",))[0], "several common names"),
        (service_ca.issue("client-admin", more_common_names=("quire-service:gateway",))[0], "several common names"),
    ]:
        identity = judged(bundle, cert)
        assert identity.service is None and why in identity.ambiguous
    repeated = judged(bundle, service_ca.issue("quire-service:gateway", uris=("quire-service:gateway",))[0])
    assert repeated.service == "gateway" and not repeated.ambiguous


def tls_env(monkeypatch: pytest.MonkeyPatch, bundle: CertBundle, service: str) -> None:
    monkeypatch.delenv("QUIRE_INSECURE_PLAINTEXT_DEV", raising=False)
    for name, value in bundle.service_env(service).items():
        monkeypatch.setenv(name, value)


def test_the_settings_name_a_bad_client_ca_or_allow_list_switch(
    monkeypatch: pytest.MonkeyPatch, bundle: CertBundle
) -> None:
    from quire_common.config import ConfigError
    from quire_common.security import TlsSettings

    tls_env(monkeypatch, bundle, "gateway")
    settings = TlsSettings.from_env()
    assert settings.client_ca_path == bundle.client_ca and settings.allowlist_enabled
    monkeypatch.setenv("QUIRE_TLS_CLIENT_CA", str(bundle.directory / "missing.pem"))
    with pytest.raises(ConfigError, match=r"QUIRE_TLS_CLIENT_CA=.*no such file"):
        TlsSettings.from_env()
    tls_env(monkeypatch, bundle, "registry")
    monkeypatch.delenv("QUIRE_TLS_CLIENT_CA")
    monkeypatch.setenv("QUIRE_RPC_ALLOWLIST_ENABLED", "perhaps")
    with pytest.raises(ConfigError, match="QUIRE_RPC_ALLOWLIST_ENABLED"):
        TlsSettings.from_env()
    monkeypatch.setenv("QUIRE_RPC_ALLOWLIST_ENABLED", "false")
    assert not TlsSettings.from_env().allowlist_enabled
