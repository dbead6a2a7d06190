"""Bookie settings (QUIRE_BOOKIE_*, QUIRE_REGISTRY_TARGET)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from quire_api.errors import InvalidArgument
from quire_api.ids import validate_bookie_id
from quire_bookie.bookie import BookieSettings
from quire_bookie.disk import ReadOnlyPolicy
from quire_bookie.faults import StorageFaults
from quire_common.config import ConfigError, env_bool, env_float, env_int, env_str

log = logging.getLogger(__name__)

HTTP_PORT_OFFSET = 5000  # 3181 -> 8181, the default docs/configuration.md gives QUIRE_BOOKIE_HTTP_PORT


@dataclass(frozen=True)
class BookieConfig:
    listen_address: str
    advertised_host: str
    port: int
    advertised_port: int  # the port published in the bookie-rpc endpoint (a proxy in front, say)
    http_port: int  # 0: no admin HTTP server
    bookie_id: str
    data_dir: Path
    registry_target: str
    registration_ttl_seconds: int
    rack: str
    region: str
    autorecovery: str  # "", "true" or "false": published as autorecovery.enabled when set
    standalone: bool  # no registry: no cookie check, registration or garbage collection
    gc_interval_seconds: float  # 0: no garbage collection
    gc_recheck_seconds: float
    storage: BookieSettings

    @property
    def unsafe_no_sync(self) -> bool:
        return not self.storage.sync

    @classmethod
    def from_env(cls) -> BookieConfig:
        port = env_int("QUIRE_BOOKIE_PORT", 3181, minimum=1, maximum=65535)
        advertised_host = env_str("QUIRE_BOOKIE_ADVERTISED_HOST", "127.0.0.1")
        bookie_id = env_str("QUIRE_BOOKIE_ID", "") or f"{advertised_host}:{port}"
        try:
            validate_bookie_id(bookie_id)
        except InvalidArgument as exc:
            raise ConfigError(f"QUIRE_BOOKIE_ID: {exc}") from None
        default_http = port + HTTP_PORT_OFFSET if port + HTTP_PORT_OFFSET <= 65535 else 0
        read_only_usage = _fraction("QUIRE_BOOKIE_READ_ONLY_USAGE", 0.95)
        writable_usage = _fraction("QUIRE_BOOKIE_WRITABLE_USAGE", 0.90)
        if writable_usage > read_only_usage:
            raise ConfigError(
                f"QUIRE_BOOKIE_WRITABLE_USAGE={writable_usage} must not exceed "
                f"QUIRE_BOOKIE_READ_ONLY_USAGE={read_only_usage}"
            )
        autorecovery = env_str("QUIRE_BOOKIE_AUTORECOVERY", "").strip().lower()
        if autorecovery:
            autorecovery = "true" if env_bool("QUIRE_BOOKIE_AUTORECOVERY", False) else "false"
        storage = BookieSettings(
            max_entry_bytes=env_int("QUIRE_BOOKIE_MAX_ENTRY_BYTES", 5 * 1024 * 1024, minimum=1024),
            max_read_bytes=env_int("QUIRE_BOOKIE_MAX_READ_BYTES", 4 * 1024 * 1024, minimum=1024),
            max_read_entries=env_int("QUIRE_BOOKIE_MAX_READ_ENTRIES", 10_000, minimum=1),
            group_commit_max_bytes=env_int("QUIRE_BOOKIE_GROUP_COMMIT_MAX_BYTES", 4 * 1024 * 1024, minimum=4096),
            group_commit_max_delay_seconds=env_int("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS", 0, minimum=0, maximum=1000)
            / 1000,
            sync=not env_bool("QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA", False),
            capacity_bytes=env_int("QUIRE_BOOKIE_CAPACITY_BYTES", 0, minimum=0),
            read_only=ReadOnlyPolicy(read_only_usage, writable_usage, env_bool("QUIRE_BOOKIE_FORCE_READ_ONLY", False)),
            disk_check_interval_seconds=env_int("QUIRE_BOOKIE_DISK_CHECK_INTERVAL_MS", 5000, minimum=50) / 1000,
            max_long_poll_seconds=env_int("QUIRE_BOOKIE_MAX_LONG_POLL_MS", 30_000, minimum=0) / 1000,
            verify_digests=env_bool("QUIRE_BOOKIE_VERIFY_DIGESTS", True),
            fault_sync_delay_seconds=env_int("QUIRE_BOOKIE_FAULT_SYNC_DELAY_MS", 0, minimum=0, maximum=60_000) / 1000,
            fault_storage=_storage_faults(),
            fault_unsafe_wal_point_in_time_recovery=env_bool(
                "QUIRE_BOOKIE_FAULT_UNSAFE_WAL_POINT_IN_TIME_RECOVERY", False
            ),
        )
        return cls(
            listen_address=f"{env_str('QUIRE_BOOKIE_LISTEN_HOST', '127.0.0.1')}:{port}",
            advertised_host=advertised_host,
            port=port,
            advertised_port=env_int("QUIRE_BOOKIE_ADVERTISED_PORT", port, minimum=1, maximum=65535),
            http_port=env_int("QUIRE_BOOKIE_HTTP_PORT", default_http, minimum=0, maximum=65535),
            bookie_id=bookie_id,
            data_dir=Path(env_str("QUIRE_BOOKIE_DATA_DIR", f"data/bookie-{port}")).resolve(),
            registry_target=env_str("QUIRE_REGISTRY_TARGET", "127.0.0.1:7001"),
            registration_ttl_seconds=env_int("QUIRE_BOOKIE_TTL_SECONDS", 10, minimum=2, maximum=300),
            rack=env_str("QUIRE_BOOKIE_RACK", ""),
            region=env_str("QUIRE_BOOKIE_REGION", ""),
            autorecovery=autorecovery,
            standalone=env_bool("QUIRE_BOOKIE_STANDALONE", False),
            gc_interval_seconds=env_float("QUIRE_BOOKIE_GC_INTERVAL_SECONDS", 300.0, minimum=0.0),
            gc_recheck_seconds=env_float("QUIRE_BOOKIE_GC_RECHECK_SECONDS", 10.0, minimum=0.0),
            storage=storage,
        )


def _storage_faults() -> StorageFaults:
    """Test-only storage faults (services/bookie/quire_bookie/faults.py)."""
    write_eio = env_str("QUIRE_BOOKIE_FAULT_WRITE_EIO_FILE", "")
    read_eio = env_str("QUIRE_BOOKIE_FAULT_READ_EIO_FILE", "")
    lose = env_bool("QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES", False)
    if lose and not env_bool("QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA", False):
        raise ConfigError(
            "QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES needs QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA=true "
            "(a synced write cannot be lost)"
        )
    return StorageFaults(Path(write_eio) if write_eio else None, Path(read_eio) if read_eio else None, lose)


def _fraction(name: str, default: float) -> float:
    value = env_float(name, default, minimum=0.0)
    if not 0 < value <= 1:
        raise ConfigError(f"{name}={value} must be a fraction in (0, 1]")
    return value
