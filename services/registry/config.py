"""Registry settings (QUIRE_REGISTRY_*, QUIRE_ETCD_*, QUIRE_CLUSTER)."""

from __future__ import annotations

from dataclasses import dataclass

from quire_common.config import env_float, env_int, env_list, env_str


@dataclass(frozen=True)
class RegistryConfig:
    address: str
    http_port: int  # 0: no admin HTTP endpoint
    etcd_endpoints: list[str]
    cluster: str
    bookie_ttl_seconds: int
    etcd_timeout_seconds: float

    @classmethod
    def from_env(cls) -> RegistryConfig:
        return cls(
            address=env_str("QUIRE_REGISTRY_ADDRESS", "127.0.0.1:7001"),
            http_port=env_int("QUIRE_REGISTRY_HTTP_PORT", 8001, minimum=0, maximum=65535),
            etcd_endpoints=env_list("QUIRE_ETCD_ENDPOINTS", ["127.0.0.1:2379"]),
            cluster=env_str("QUIRE_CLUSTER", "local"),
            bookie_ttl_seconds=env_int("QUIRE_BOOKIE_TTL_SECONDS", 10, minimum=2, maximum=300),
            etcd_timeout_seconds=env_float("QUIRE_ETCD_TIMEOUT_SECONDS", 5.0, minimum=0.1),
        )
