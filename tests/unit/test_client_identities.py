"""Client identities at the gateway: docs/security.md shows the role mappings
`quire dev certs` and the production overlay ship, no mapping names a service
identity, and a certificate is a client's only when the client CA issued it
and it carries no service name (quire_common.security.read_peer_identity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography import x509

from quire_client.devcerts import CLIENT_IDENTITIES, CertBundle, load_authority, write_dev_certs
from quire_common.auth import load_cert_roles, roles_table
from quire_common.config import ConfigError
from quire_common.security import read_peer_identity

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ROLES = ROOT / "deploy" / "kubernetes" / "overlays" / "production" / "client-roles.json"


def test_security_md_shows_the_mappings_the_code_ships() -> None:
    security = (ROOT / "docs" / "security.md").read_text()
    assert roles_table(CLIENT_IDENTITIES) in security
    assert roles_table(json.loads(PRODUCTION_ROLES.read_text())) in security


def test_no_shipped_mapping_names_a_service_and_each_loads() -> None:
    for mapping_file in (PRODUCTION_ROLES,):
        assert load_cert_roles(str(mapping_file))
    assert not [name for name in CLIENT_IDENTITIES if name.startswith("quire-service:")]


def test_a_mapping_that_names_a_service_identity_is_refused(tmp_path: Path) -> None:
    mapping = tmp_path / "roles.json"
    mapping.write_text(json.dumps({"quire-service:operator": {"*": ["reader"]}, "app": {"7": ["writer"]}}))
    with pytest.raises(ConfigError) as refused:
        load_cert_roles(str(mapping))
    assert "QUIRE_AUTH_CLIENT_CERT_ROLES" in str(refused.value) and "'quire-service:operator'" in str(refused.value)
    # The positive control's setting lets it through.
    assert "quire-service:operator" in load_cert_roles(str(mapping), service_names_allowed=True)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CertBundle:
    return write_dev_certs(tmp_path_factory.mktemp("certs"))


def test_only_the_client_ca_vouches_for_clients(bundle: CertBundle) -> None:
    services = x509.load_pem_x509_certificates(bundle.ca.read_bytes())
    clients = x509.load_pem_x509_certificates(bundle.client_ca.read_bytes())
    service_ca = load_authority(bundle.ca, bundle.directory / "ca-key.pem")
    client_ca = load_authority(bundle.client_ca, bundle.directory / "client-ca-key.pem")

    def judged(cert: bytes):  # type: ignore[no-untyped-def]
        return read_peer_identity(cert, services, clients)

    application = judged(bundle.cert("client-operator").read_bytes())
    assert application.client_issued and application.service_name is None and application.service is None
    forged = judged(client_ca.issue("quire-service:operator", hosts=())[0])
    assert forged.client_issued and forged.service_name == "quire-service:operator" and forged.service is None
    in_a_san = judged(client_ca.issue("quire-service:gateway", hosts=("quire-service:gateway",))[0])
    assert in_a_san.service_name == "quire-service:gateway"
    service = judged(bundle.cert("operator").read_bytes())
    assert not service.client_issued and service.service == "operator"
    named_like_a_client = judged(service_ca.issue("client-admin", hosts=())[0])
    assert not named_like_a_client.client_issued and named_like_a_client.service_name is None
