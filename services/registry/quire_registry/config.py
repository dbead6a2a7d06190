"""Registry settings (QUIRE_REGISTRY_*, QUIRE_ETCD_*, QUIRE_CLUSTER)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from quire_common.config import ConfigError, env_bool, env_float, env_int, env_list, env_str
from quire_registry.store import EtcdAccess


def _read(name: str) -> bytes | None:
    path = env_str(name, "")
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}={path!r}: {exc.strerror or exc}") from None


def etcd_access_from_env() -> EtcdAccess:
    """QUIRE_ETCD_CA / _CERT / _KEY / _SERVER_NAME, QUIRE_ETCD_USER and
    QUIRE_ETCD_PASSWORD_FILE (a file, so the password stays out of the
    environment and process listings)."""
    ca, cert, key = _read("QUIRE_ETCD_CA"), _read("QUIRE_ETCD_CERT"), _read("QUIRE_ETCD_KEY")
    if (cert is None) != (key is None):
        raise ConfigError("QUIRE_ETCD_CERT and QUIRE_ETCD_KEY go together")
    if cert is not None and ca is None:
        raise ConfigError("QUIRE_ETCD_CERT needs QUIRE_ETCD_CA (a client certificate is only sent over TLS)")
    user = env_str("QUIRE_ETCD_USER", "")
    password = _read("QUIRE_ETCD_PASSWORD_FILE")
    if user and password is None:
        raise ConfigError("QUIRE_ETCD_USER needs QUIRE_ETCD_PASSWORD_FILE")
    return EtcdAccess(
        ca=ca,
        cert=cert,
        key=key,
        server_name=env_str("QUIRE_ETCD_SERVER_NAME", "") or None,
        user=user,
        password=password.decode().strip() if password is not None else "",
    )


def etcd_endpoints_from_env() -> list[str]:
    """QUIRE_ETCD_ENDPOINTS: comma-separated host:port pairs (no scheme)."""
    endpoints = env_list("QUIRE_ETCD_ENDPOINTS", ["127.0.0.1:2379"])
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
    def from_env(cls) -> RegistryConfig:
        return cls(
            address=env_str("QUIRE_REGISTRY_ADDRESS", "127.0.0.1:7001"),
            http_port=env_int("QUIRE_REGISTRY_HTTP_PORT", 8001, minimum=0, maximum=65535),
            etcd_endpoints=etcd_endpoints_from_env(),
            cluster=env_str("QUIRE_CLUSTER", "local"),
            bookie_ttl_seconds=env_int("QUIRE_BOOKIE_TTL_SECONDS", 10, minimum=2, maximum=300),
            etcd_timeout_seconds=env_float("QUIRE_ETCD_TIMEOUT_SECONDS", 5.0, minimum=0.1),
            etcd_access=etcd_access_from_env(),
            unsafe_no_commit_check=env_bool("QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK", False),
            keep_ledger_passwords=env_bool("QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS", False),
        )
