"""Every QUIRE_* setting a Quire service reads, so a misspelt one is caught
at start instead of silently ignored.

A service refuses to start when the environment holds a variable under one
of its own prefixes (the gateway's QUIRE_GATEWAY_ and QUIRE_AUDITOR_, ...)
that no Quire service reads, naming it and the closest real setting. Other
QUIRE_* variables are left alone: one environment often serves several
services and tools. A unit test keeps this list equal to the names the
services' code uses.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping

from quire_common.config import ConfigError

KNOWN_SETTINGS = frozenset(
    {
        "QUIRE_ADMIN_HTTP_ENABLED",
        "QUIRE_AUDITOR_INTERVAL_SECONDS",
        "QUIRE_AUDITOR_LEASE_SECONDS",
        "QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS",
        "QUIRE_AUDITOR_SCRUB_BYTES_PER_SECOND",
        "QUIRE_AUDITOR_SCRUB_ENTRIES_PER_SECOND",
        "QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS",
        "QUIRE_AUDITOR_SCRUB_SAMPLE_ENTRIES",
        "QUIRE_AUTH_CLIENT_CERT_ROLES",
        "QUIRE_AUTH_ENABLED",
        "QUIRE_AUTH_JWT_ALGORITHM",
        "QUIRE_AUTH_JWT_AUDIENCE",
        "QUIRE_AUTH_JWT_KEY_FILE",
        "QUIRE_BOOKIE_ADVERTISED_HOST",
        "QUIRE_BOOKIE_ADVERTISED_PORT",
        "QUIRE_BOOKIE_AUTORECOVERY",
        "QUIRE_BOOKIE_CAPACITY_BYTES",
        "QUIRE_BOOKIE_DATA_DIR",
        "QUIRE_BOOKIE_DISK_CHECK_INTERVAL_MS",
        "QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES",
        "QUIRE_BOOKIE_FAULT_READ_EIO_FILE",
        "QUIRE_BOOKIE_FAULT_SYNC_DELAY_MS",
        "QUIRE_BOOKIE_FAULT_UNSAFE_WAL_POINT_IN_TIME_RECOVERY",
        "QUIRE_BOOKIE_FAULT_WRITE_EIO_FILE",
        "QUIRE_BOOKIE_FORCE_READ_ONLY",
        "QUIRE_BOOKIE_GC_INTERVAL_SECONDS",
        "QUIRE_BOOKIE_GC_RECHECK_SECONDS",
        "QUIRE_BOOKIE_GROUP_COMMIT_MAX_BYTES",
        "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS",
        "QUIRE_BOOKIE_HTTP_PORT",
        "QUIRE_BOOKIE_ID",
        "QUIRE_BOOKIE_LISTEN_HOST",
        "QUIRE_BOOKIE_MAX_ENTRY_BYTES",
        "QUIRE_BOOKIE_MAX_LONG_POLL_MS",
        "QUIRE_BOOKIE_MAX_READ_BYTES",
        "QUIRE_BOOKIE_MAX_READ_ENTRIES",
        "QUIRE_BOOKIE_PORT",
        "QUIRE_BOOKIE_RACK",
        "QUIRE_BOOKIE_READ_ONLY_USAGE",
        "QUIRE_BOOKIE_REGION",
        "QUIRE_BOOKIE_STANDALONE",
        "QUIRE_BOOKIE_TTL_SECONDS",
        "QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA",
        "QUIRE_BOOKIE_VERIFY_DIGESTS",
        "QUIRE_BOOKIE_WRITABLE_USAGE",
        "QUIRE_CLUSTER",
        "QUIRE_ETCD_CA",
        "QUIRE_ETCD_CERT",
        "QUIRE_ETCD_ENDPOINTS",
        "QUIRE_ETCD_KEY",
        "QUIRE_ETCD_PASSWORD_FILE",
        "QUIRE_ETCD_SERVER_NAME",
        "QUIRE_ETCD_TIMEOUT_SECONDS",
        "QUIRE_ETCD_USER",
        "QUIRE_FAULT_INJECTION_RULES",
        "QUIRE_GATEWAY_ADDRESS",
        "QUIRE_GATEWAY_PEER_TLS_NAME",
        "QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION",
        "QUIRE_GATEWAY_SESSION_SECONDS",
        "QUIRE_GATEWAY_ADVERTISED_ADDRESS",
        "QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS",
        "QUIRE_GATEWAY_BLOB_LEDGERS_PER_SCOPE",
        "QUIRE_GATEWAY_BLOB_LEDGER_MAX_AGE_SECONDS",
        "QUIRE_GATEWAY_BLOB_LEDGER_MAX_BYTES",
        "QUIRE_GATEWAY_BOOKIE_QUARANTINE_SECONDS",
        "QUIRE_GATEWAY_BOOKIE_RETRY_SECONDS",
        "QUIRE_GATEWAY_DELAY_ENSEMBLE_CHANGE",
        "QUIRE_GATEWAY_EXPLICIT_LAC_SECONDS",
        "QUIRE_GATEWAY_DEPENDENCY_CHECK_SECONDS",
        "QUIRE_GATEWAY_ENTRY_CACHE_BYTES",
        "QUIRE_GATEWAY_FAULT_UNSAFE_NO_REPAIR_MARKS",
        "QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK",
        "QUIRE_GATEWAY_HTTP_PORT",
        "QUIRE_GATEWAY_MAX_CALLS_PER_BOOKIE",
        "QUIRE_GATEWAY_MAX_ENTRY_BYTES",
        "QUIRE_GATEWAY_MAX_INFLIGHT_BYTES",
        "QUIRE_GATEWAY_MAX_WAITING_BYTES",
        "QUIRE_GATEWAY_METADATA_CACHE_LEDGERS",
        "QUIRE_GATEWAY_NAME",
        "QUIRE_GATEWAY_RECOVERY_BOOKIE_TIMEOUT_SECONDS",
        "QUIRE_GATEWAY_RECOVERY_TIMEOUT_SECONDS",
        "QUIRE_GATEWAY_SPECULATIVE_READ_SECONDS",
        "QUIRE_GATEWAY_TLS_CLIENT_AUTH",
        "QUIRE_HEALTH_PROBE_PORT",
        "QUIRE_INSECURE_PLAINTEXT_DEV",
        "QUIRE_LOG_LEVEL",
        "QUIRE_METRICS_ENABLED",
        "QUIRE_METRICS_PROMETHEUS",
        "QUIRE_PLACEMENT_ADDRESS",
        "QUIRE_PLACEMENT_BOOKIE_INFO_INTERVAL_SECONDS",
        "QUIRE_PLACEMENT_BOOKIE_INFO_RETRY_INTERVAL_SECONDS",
        "QUIRE_PLACEMENT_BOOKIE_INFO_TIMEOUT_SECONDS",
        "QUIRE_PLACEMENT_BOOKIE_MAX_WEIGHT_MULTIPLE",
        "QUIRE_PLACEMENT_DISK_WEIGHT_ENABLED",
        "QUIRE_PLACEMENT_ENFORCE_DURABILITY",
        "QUIRE_PLACEMENT_ENFORCE_MIN_RACKS",
        "QUIRE_PLACEMENT_HTTP_PORT",
        "QUIRE_PLACEMENT_LOAD_FACTOR_MAX_AGE_SECONDS",
        "QUIRE_PLACEMENT_LOCAL_REGION",
        "QUIRE_PLACEMENT_MIN_RACKS_PER_WRITE_QUORUM",
        "QUIRE_PLACEMENT_MIN_REGIONS_FOR_DURABILITY",
        "QUIRE_PLACEMENT_POLICY",
        "QUIRE_PLACEMENT_REGIONS",
        "QUIRE_PLACEMENT_TARGET",
        "QUIRE_REFLECTION_ENABLED",
        "QUIRE_REGISTRY_ADDRESS",
        "QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK",
        "QUIRE_REGISTRY_HTTP_PORT",
        "QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS",
        "QUIRE_REGISTRY_TARGET",
        "QUIRE_RESOLVER_ENABLED",
        "QUIRE_TELEMETRY_DIR",
        "QUIRE_TELEMETRY_FILE_MAX_BYTES",
        "QUIRE_TELEMETRY_MAX_TOTAL_BYTES",
        "QUIRE_TELEMETRY_METRICS_INTERVAL_SECONDS",
        "QUIRE_TLS_CA",
        "QUIRE_TLS_CERT",
        "QUIRE_TLS_KEY",
        "QUIRE_TLS_SERVER_NAME",
    }
)

# The prefixes each service owns: an unknown name under one of them is a mistake.
OWN_PREFIXES = {
    "gateway": ("QUIRE_GATEWAY_", "QUIRE_AUDITOR_"),
    "bookie": ("QUIRE_BOOKIE_",),
    "registry": ("QUIRE_REGISTRY_", "QUIRE_ETCD_"),
    "placement": ("QUIRE_PLACEMENT_",),
}


def check_own_settings(service: str, environ: Mapping[str, str] | None = None) -> None:
    """ConfigError naming the first variable under `service`'s prefixes that
    no Quire service reads (and the setting it most resembles)."""
    prefixes = OWN_PREFIXES.get(service, ())
    for name in sorted(os.environ if environ is None else environ):
        if name.startswith(prefixes) and name not in KNOWN_SETTINGS:
            close = difflib.get_close_matches(name, sorted(KNOWN_SETTINGS), n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else "; docs/configuration.md lists the settings"
            raise ConfigError(f"{name} is not a setting of the {service}{hint}")
