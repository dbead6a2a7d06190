"""The registry's configuration: its settings (quire_registry.settings)
checked and turned into what the registry's code takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from quire_common.config import ConfigError
from quire_registry.settings import RegistryEnv
from quire_registry.store import EtcdAccess


def _read(name: str, path: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}={path!r}: {exc.strerror or exc}") from None


def etcd_access(env: RegistryEnv) -> EtcdAccess:
    """QUIRE_ETCD_CA / _CERT / _KEY / _SERVER_NAME, QUIRE_ETCD_USER and
    QUIRE_ETCD_PASSWORD_FILE (a file, so the password stays out of the
    environment and process listings)."""
    ca = _read("QUIRE_ETCD_CA", env.etcd_ca)
    cert = _read("QUIRE_ETCD_CERT", env.etcd_cert)
    key = _read("QUIRE_ETCD_KEY", env.etcd_key)
    if (cert is None) != (key is None):
        raise ConfigError("QUIRE_ETCD_CERT and QUIRE_ETCD_KEY go together")
    if cert is not None and ca is None:
        raise ConfigError("QUIRE_ETCD_CERT needs QUIRE_ETCD_CA (a client certificate is only sent over TLS)")
    password = _read("QUIRE_ETCD_PASSWORD_FILE", env.etcd_password_file)
    if env.etcd_user and password is None:
        raise ConfigError("QUIRE_ETCD_USER needs QUIRE_ETCD_PASSWORD_FILE")
    return EtcdAccess(
        ca=ca,
        cert=cert,
        key=key,
        server_name=env.etcd_server_name or None,
        user=env.etcd_user,
        password=password.decode().strip() if password is not None else "",
    )


def etcd_endpoints(env: RegistryEnv) -> list[str]:
    """QUIRE_ETCD_ENDPOINTS: comma-separated host:port pairs (no scheme)."""
    endpoints = list(env.etcd_endpoints)
    if not endpoints:
        raise ConfigError("QUIRE_ETCD_ENDPOINTS names no endpoint (give host:port pairs separated by commas)")
    for endpoint in endpoints:
        host, sep, port = endpoint.rpartition(":")
        if not sep or not host or "/" in endpoint or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"QUIRE_ETCD_ENDPOINTS: {endpoint!r} is not host:port (comma-separated, no scheme, "
                "for example 127.0.0.1:2379)"
            )
    return endpoints


@dataclass(frozen=True)
class RegistryConfig:
    address: str
    http_port: int  # 0: no admin HTTP endpoint
    etcd_endpoints: list[str]
    cluster: str
    bookie_ttl_seconds: int
    etcd_timeout_seconds: float
    etcd_access: EtcdAccess = field(default_factory=EtcdAccess)
    # Fault-suite positive control only: a write whose answer was lost is not
    # recognised as committed, nor a repeated CreateLedger request_id.
    unsafe_no_commit_check: bool = False
    # During an upgrade from 0.1 only: ledger records keep the plaintext password
    # beside its secrets, for gateways that still read it.
    keep_ledger_passwords: bool = False

    @classmethod
    def from_settings(cls, env: RegistryEnv) -> RegistryConfig:
        return cls(
            address=env.address,
            http_port=env.http_port,
            etcd_endpoints=etcd_endpoints(env),
            cluster=env.cluster,
            bookie_ttl_seconds=env.bookie_ttl_seconds,
            etcd_timeout_seconds=env.etcd_timeout_seconds,
            etcd_access=etcd_access(env),
            unsafe_no_commit_check=env.fault_unsafe_no_commit_check,
            keep_ledger_passwords=env.keep_ledger_passwords,
        )
