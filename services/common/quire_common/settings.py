"""The settings every service shares (TLS, authentication, the gRPC server,
the admin endpoint, telemetry, logs), and the catalog of every QUIRE_* name.

Each service's own settings object (quire_registry.settings, quire_bookie.
settings, quire_placement.settings, quire_gateway.settings) holds a
`CommonEnv` beside its own fields; it is read once at start by
quire_common.service.run_service and passed to the service's main.

A service refuses to start when the environment holds a variable under one
of its own prefixes (the gateway's QUIRE_GATEWAY_ and QUIRE_AUDITOR_, ...)
that no Quire service reads, naming it and the closest real setting. Other
QUIRE_* variables are left alone: one environment often serves several
services and tools. The catalog is derived from the declarations.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quire_common.config import ConfigError, declared_settings, load_settings, setting

SECURITY = "Security (docs/security.md)"
EVERY_SERVICE = "Every service, or several"
ALL = "all"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# Each service's settings object, by the name run_service is given.
SERVICE_SETTINGS = {
    "registry": "quire_registry.settings:RegistryEnv",
    "bookie": "quire_bookie.settings:BookieEnv",
    "placement": "quire_placement.settings:PlacementEnv",
    "gateway": "quire_gateway.settings:GatewayEnv",
}

# The prefixes each service owns: an unknown name under one of them is a mistake.
OWN_PREFIXES = {
    "gateway": ("QUIRE_GATEWAY_", "QUIRE_AUDITOR_"),
    "bookie": ("QUIRE_BOOKIE_",),
    "registry": ("QUIRE_REGISTRY_", "QUIRE_ETCD_"),
    "placement": ("QUIRE_PLACEMENT_",),
}


# Settings more than one service reads, declared here once.
def registry_target_setting() -> Any:
    return setting(
        "QUIRE_REGISTRY_TARGET",
        "127.0.0.1:7001",
        "where the registry is",
        services="bookie, placement, gateway",
        section=EVERY_SERVICE,
    )


def resolver_enabled_setting() -> Any:
    return setting(
        "QUIRE_RESOLVER_ENABLED",
        True,
        "resolve BookieIds through their registered BookieServiceInfo; `false` parses `host:port` ids only "
        "(legacy clusters)",
        services="placement, gateway",
        section=EVERY_SERVICE,
    )


def bookie_ttl_setting() -> Any:
    return setting(
        "QUIRE_BOOKIE_TTL_SECONDS",
        10,
        "lease TTL of a bookie registration (the bookie heartbeats every third of it)",
        services="registry, bookie",
        section=EVERY_SERVICE,
        unit="seconds",
        minimum=2,
        maximum=300,
    )


@dataclass(frozen=True)
class TlsEnv:
    plaintext_dev: bool = setting(
        "QUIRE_INSECURE_PLAINTEXT_DEV",
        False,
        "`true`: no TLS and (by default) no authentication anywhere, with a warning in the log; for development "
        "only. `quire cluster up` / `make run` and the test suite set it unless TLS is asked for",
        services=ALL,
        section=SECURITY,
    )
    cert: str = setting(
        "QUIRE_TLS_CERT",
        "",
        "PEM certificate chain of this service; its name `quire-service:<name>` (common name, and any URI SAN "
        "must agree) is the service identity",
        services=ALL,
        section=SECURITY,
        default_doc="— (required unless plaintext dev)",
    )
    key: str = setting(
        "QUIRE_TLS_KEY",
        "",
        "PEM private key",
        services=ALL,
        section=SECURITY,
        default_doc="— (required unless plaintext dev)",
    )
    ca: str = setting(
        "QUIRE_TLS_CA",
        "",
        "PEM bundle of the service CA: verifies the servers a process dials and the peers an internal service "
        "accepts, and is the only issuer whose certificates are service identities",
        services=ALL,
        section=SECURITY,
        default_doc="— (required unless plaintext dev)",
    )
    client_ca: str = setting(
        "QUIRE_TLS_CLIENT_CA",
        "",
        "PEM bundle of the client CA: the gateway's listener also accepts its certificates (mapped to roles), "
        "never as a service identity; internal services ignore it",
        services="gateway",
        section=SECURITY,
        default_doc="— (client certificates then come from `QUIRE_TLS_CA`)",
    )
    server_name: str = setting(
        "QUIRE_TLS_SERVER_NAME",
        "",
        "name checked against servers' certificates (`grpc.ssl_target_name_override`), when certificates do not "
        "name the addresses used",
        services=ALL,
        section=SECURITY,
        default_doc="the target's host",
    )
    allowlist_enabled: bool = setting(
        "QUIRE_RPC_ALLOWLIST_ENABLED",
        True,
        "`false`: any service identity may call any internal RPC, as before the per-RPC allow-list "
        "(docs/security.md); the allow-list's positive control, not for production",
        services="registry, placement, bookie",
        section=SECURITY,
    )


@dataclass(frozen=True)
class AuthEnv:
    enabled: bool | None = setting(
        "QUIRE_AUTH_ENABLED",
        None,
        "authenticate and authorize every LedgerService / BlobService call",
        services="gateway",
        section=SECURITY,
        default_doc="on with TLS, off in plaintext dev",
    )
    jwt_key_file: str = setting(
        "QUIRE_AUTH_JWT_KEY_FILE",
        "",
        "HS256 shared secret (≥ 32 bytes) or RS256/ES256 PEM public key for bearer tokens; read at start",
        services="gateway, admin HTTP of all",
        section=SECURITY,
    )
    jwt_algorithm: str = setting(
        "QUIRE_AUTH_JWT_ALGORITHM",
        "HS256",
        "the one algorithm accepted (`none` never)",
        services="gateway, admin HTTP of all",
        section=SECURITY,
        choices=("HS256", "RS256", "ES256"),
    )
    jwt_audience: str = setting(
        "QUIRE_AUTH_JWT_AUDIENCE",
        "",
        "when set, tokens must carry this `aud`",
        services="gateway, admin HTTP of all",
        section=SECURITY,
    )
    client_cert_roles: str = setting(
        "QUIRE_AUTH_CLIENT_CERT_ROLES",
        "",
        'JSON file `{"<certificate common name>": {"<scope>" or "*": ["reader" \\| "writer" \\| "admin", '
        "...]}}`; read at start",
        services="gateway",
        section=SECURITY,
    )


@dataclass(frozen=True)
class ServerEnv:
    """What quire_common.server.create_server reads."""

    health_probe_port: int = setting(
        "QUIRE_HEALTH_PROBE_PORT",
        0,
        "a second, plaintext port that answers only `grpc.health.v1` (every other call there is refused "
        "UNAUTHENTICATED): for Kubernetes' native gRPC probes, which cannot speak TLS; `0`: none",
        services=ALL,
        section=SECURITY,
        minimum=0,
        maximum=65535,
    )
    event_loop: str = setting(
        "QUIRE_EVENT_LOOP",
        "uvloop",
        "the asyncio event loop every service runs on: `uvloop` (libuv; less CPU per message, "
        "docs/decisions.md) or `asyncio` (the standard library's)",
        services=ALL,
        section=EVERY_SERVICE,
        choices=("uvloop", "asyncio"),
    )
    gc_young_threshold: int = setting(
        "QUIRE_GC_YOUNG_THRESHOLD",
        10_000,
        "objects the garbage collector lets the young generation grow by before it walks it (Python's default "
        "is 700); a loaded gateway's entries in flight survive every walk, so fewer walks cost less CPU per "
        "entry (docs/decisions.md)",
        services=ALL,
        section=EVERY_SERVICE,
        minimum=100,
        maximum=1_000_000,
    )
    reflection_enabled: bool = setting(
        "QUIRE_REFLECTION_ENABLED",
        True,
        "serve gRPC server reflection (`grpc.reflection.v1` and `v1alpha`)",
        services=ALL,
        section=SECURITY,
    )
    fault_injection_rules: str = setting(
        "QUIRE_FAULT_INJECTION_RULES",
        "",
        "fault injection (tests only): JSON rules rejecting, dropping or delaying chosen RPCs (docs/faults.md); "
        "logs a loud warning",
        services=ALL,
        section=EVERY_SERVICE,
    )


@dataclass(frozen=True)
class AdminEnv:
    """What quire_common.admin_http reads besides the service's port."""

    enabled: bool = setting(
        "QUIRE_ADMIN_HTTP_ENABLED",
        True,
        "serve the admin HTTP endpoint at all (its port variable `0` also turns it off)",
        services=ALL,
        section=SECURITY,
    )
    metrics_enabled: bool = setting(
        "QUIRE_METRICS_ENABLED", True, "serve `/metrics` on the admin endpoint", services=ALL, section=SECURITY
    )


@dataclass(frozen=True)
class TelemetryEnv:
    directory: str = setting(
        "QUIRE_TELEMETRY_DIR",
        "",
        "write spans, metric points and samples as rotated JSON lines to "
        "`<dir>/<service>-<pid>-<kind>.<n>.jsonl` (docs/telemetry.md); unset (and no OTLP endpoint), no gRPC "
        "tracing interceptors are installed",
        services=ALL,
        section=EVERY_SERVICE,
    )
    file_max_bytes: int = setting(
        "QUIRE_TELEMETRY_FILE_MAX_BYTES",
        64 << 20,
        "a telemetry file is rotated at this size",
        services=ALL,
        section=EVERY_SERVICE,
        unit="bytes",
        minimum=4096,
    )
    max_total_bytes: int = setting(
        "QUIRE_TELEMETRY_MAX_TOTAL_BYTES",
        512 << 20,
        "the oldest rotated telemetry files of a kind are deleted beyond this total",
        services=ALL,
        section=EVERY_SERVICE,
        unit="bytes",
        minimum=4096,
    )
    metrics_interval_seconds: float = setting(
        "QUIRE_TELEMETRY_METRICS_INTERVAL_SECONDS",
        10.0,
        "how often metric points are exported (to files and OTLP)",
        services=ALL,
        section=EVERY_SERVICE,
        unit="seconds",
        minimum=0.1,
    )
    prometheus: bool = setting(
        "QUIRE_METRICS_PROMETHEUS",
        True,
        "keep a Prometheus reader, for `/metrics` on the admin endpoint",
        services=ALL,
        section=EVERY_SERVICE,
    )


@dataclass(frozen=True)
class LogEnv:
    level: str = setting(
        "QUIRE_LOG_LEVEL",
        "INFO",
        "log level (`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`, any case); logs are JSON lines on stderr "
        "with trace and span ids",
        services=ALL,
        section=EVERY_SERVICE,
    )

    def __post_init__(self) -> None:
        if self.level.upper() not in LOG_LEVELS:
            raise ConfigError(f"QUIRE_LOG_LEVEL={self.level!r} is not one of {', '.join(LOG_LEVELS)}")


@dataclass(frozen=True)
class CommonEnv:
    """What every service reads beside its own settings."""

    logs: LogEnv = dataclasses.field(default_factory=LogEnv)
    telemetry: TelemetryEnv = dataclasses.field(default_factory=TelemetryEnv)
    tls: TlsEnv = dataclasses.field(default_factory=TlsEnv)
    auth: AuthEnv = dataclasses.field(default_factory=AuthEnv)
    server: ServerEnv = dataclasses.field(default_factory=ServerEnv)
    admin: AdminEnv = dataclasses.field(default_factory=AdminEnv)


_process_common: CommonEnv | None = None


def use_common_settings(common: CommonEnv) -> None:
    """Make `common` the process's shared settings (run_service, at start)."""
    global _process_common
    _process_common = common


def common_settings() -> CommonEnv:
    """The shared settings run_service read at start; in a process that runs
    no service (tools, in-process test servers), read from the environment
    now (callers keep what they derive from it)."""
    return _process_common if _process_common is not None else load_settings(CommonEnv)


def service_settings_type(service: str) -> type:
    """The settings dataclass of `service` (imported on demand: common code
    does not import the services)."""
    module, _, name = SERVICE_SETTINGS[service].partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def known_settings() -> frozenset[str]:
    """Every name a Quire service reads, old names of renamed settings included."""
    names: set[str] = set()
    for service in SERVICE_SETTINGS:
        for meta, _ in declared_settings(service_settings_type(service)):
            names.add(meta.env)
            if meta.renamed_from is not None:
                names.add(meta.renamed_from.name)
    return frozenset(names)


def __getattr__(name: str) -> frozenset[str]:
    if name == "KNOWN_SETTINGS":  # computed on first use: the services' modules import this one
        return known_settings()
    raise AttributeError(name)


def check_own_settings(service: str, environ: Mapping[str, str] | None = None) -> None:
    """ConfigError naming the first variable under `service`'s prefixes that
    no Quire service reads (and the setting it most resembles)."""
    prefixes = OWN_PREFIXES.get(service, ())
    known = known_settings()
    for name in sorted(os.environ if environ is None else environ):
        if name.startswith(prefixes) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else "; docs/configuration.md lists the settings"
            raise ConfigError(f"{name} is not a setting of the {service}{hint}")
