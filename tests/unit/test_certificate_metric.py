"""quire_tls_certificate_not_after_seconds: each process reports when the
certificate it serves with, and its CA, expire; a renewed file shows at the
next scrape; plaintext mode reports nothing."""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator

import pytest
from cryptography import x509

from quire_client.devcerts import Authority, write_dev_certs
from quire_common import security


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    security.tls_settings.cache_clear()
    yield
    security.tls_settings.cache_clear()


def not_after(path) -> float:  # type: ignore[no-untyped-def]
    return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc.timestamp()


def observed() -> dict[str, float]:
    return {o.attributes["certificate"]: o.value for o in security._observe_certificates(None)}  # type: ignore[arg-type]


def test_the_service_certificate_and_ca_expiry_are_reported(tmp_path, monkeypatch, fresh_settings):
    bundle = write_dev_certs(tmp_path / "certs")
    monkeypatch.delenv("QUIRE_INSECURE_PLAINTEXT_DEV", raising=False)
    for name, value in bundle.service_env("registry").items():
        monkeypatch.setenv(name, value)
    assert observed() == {"service": not_after(bundle.cert("registry")), "ca": not_after(bundle.ca)}

    # A renewal replaces the file: the next observation reads the new one.
    expiry = datetime.datetime(2031, 5, 1, tzinfo=datetime.UTC)
    certificate, _ = Authority.create().issue("registry", not_after=expiry)
    bundle.cert("registry").write_bytes(certificate)
    stat = bundle.cert("registry").stat()
    os.utime(bundle.cert("registry"), ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert observed()["service"] == expiry.timestamp()


def test_the_gateway_also_reports_its_client_ca(tmp_path, monkeypatch, fresh_settings):
    bundle = write_dev_certs(tmp_path / "certs")
    monkeypatch.delenv("QUIRE_INSECURE_PLAINTEXT_DEV", raising=False)
    for name, value in bundle.service_env("gateway").items():
        monkeypatch.setenv(name, value)
    assert observed()["client_ca"] == not_after(bundle.client_ca)


def test_plaintext_mode_reports_no_certificate(monkeypatch, fresh_settings):
    monkeypatch.setenv("QUIRE_INSECURE_PLAINTEXT_DEV", "true")
    assert observed() == {}
