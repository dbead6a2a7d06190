"""The registry's settings (QUIRE_REGISTRY_*, QUIRE_ETCD_*, QUIRE_CLUSTER),
declared once: read at start, rendered into docs/configuration.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from quire_common.config import setting
from quire_common.settings import SECURITY, CommonEnv, bookie_ttl_setting

REGISTRY = "registry"
SECTION = "Registry"


@dataclass(frozen=True)
class RegistryEnv:
    cluster: str = setting(
        "QUIRE_CLUSTER",
        "local",
        "cluster name; etcd keys live under `/quire/<cluster>/`",
        services=REGISTRY,
        section=SECTION,
    )
    etcd_endpoints: tuple[str, ...] = setting(
        "QUIRE_ETCD_ENDPOINTS",
        ("127.0.0.1:2379",),
        "comma-separated etcd endpoints, each `host:port` (no scheme); anything else, or a list naming none, "
        "stops the start. A name (a Kubernetes Service) is resolved to its IPv4 addresses at each connection "
        "attempt (the etcd client dials addresses); a name that does not resolve is retried like an unreachable "
        "etcd",
        services=REGISTRY,
        section=SECTION,
    )
    etcd_timeout_seconds: float = setting(
        "QUIRE_ETCD_TIMEOUT_SECONDS",
        5.0,
        "deadline of each etcd call",
        services=REGISTRY,
        section=SECTION,
        unit="seconds",
        minimum=0.1,
    )
    address: str = setting(
        "QUIRE_REGISTRY_ADDRESS", "127.0.0.1:7001", "listen address", services=REGISTRY, section=SECTION
    )
    http_port: int = setting(
        "QUIRE_REGISTRY_HTTP_PORT",
        8001,
        "admin HTTP port (`/status`, `/metrics`); 0 turns it off",
        services=REGISTRY,
        section=SECTION,
        minimum=0,
        maximum=65535,
    )
    bookie_ttl_seconds: int = bookie_ttl_setting()
    keep_ledger_passwords: bool = setting(
        "QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS",
        False,
        "during an upgrade from 0.1 only: ledger records in etcd keep the plaintext password beside its salted "
        "hash and derived keys, for gateways still on 0.1 (docs/upgrade.md); logs a warning. Off, the next "
        "write of a record drops it",
        services=REGISTRY,
        section=SECTION,
    )
    fault_unsafe_no_commit_check: bool = setting(
        "QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK",
        False,
        "fault injection (tests only): a metadata write whose answer was lost is not recognised as committed, "
        "nor a repeated CreateLedger `request_id` (the RTY rows' positive control); logs a loud warning",
        services=REGISTRY,
        section=SECTION,
    )
    etcd_ca: str = setting("QUIRE_ETCD_CA", "", "PEM CA: connect to etcd over TLS", services=REGISTRY, section=SECURITY)
    etcd_cert: str = setting(
        "QUIRE_ETCD_CERT",
        "",
        "client certificate for etcd's `--client-cert-auth` (with `QUIRE_ETCD_KEY`; needs `QUIRE_ETCD_CA`)",
        services=REGISTRY,
        section=SECURITY,
    )
    etcd_key: str = setting("QUIRE_ETCD_KEY", "", "the key of `QUIRE_ETCD_CERT`", services=REGISTRY, section=SECURITY)
    etcd_server_name: str = setting(
        "QUIRE_ETCD_SERVER_NAME",
        "",
        "name checked against etcd's certificate (needed with several endpoints given as addresses)",
        services=REGISTRY,
        section=SECURITY,
        default_doc="the first name in `QUIRE_ETCD_ENDPOINTS`",
    )
    etcd_user: str = setting(
        "QUIRE_ETCD_USER",
        "",
        "etcd user; its role should grant readwrite on `/quire/<cluster>/` only (`quire cluster up --tls` and "
        "the production overlay use `quire-registry`, made by `quire etcd lock-down`). Required when etcd has "
        "authentication on: without it the registry exits 2",
        services=REGISTRY,
        section=SECURITY,
    )
    etcd_password_file: str = setting(
        "QUIRE_ETCD_PASSWORD_FILE",
        "",
        "file holding that user's password (kept out of the environment)",
        services=REGISTRY,
        section=SECURITY,
    )
    common: CommonEnv = dataclasses.field(default_factory=CommonEnv)
