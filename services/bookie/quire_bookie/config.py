"""The bookie's configuration: its settings (quire_bookie.settings) checked
and turned into what the bookie's code takes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quire_api.errors import InvalidArgument
from quire_api.ids import validate_bookie_id
from quire_bookie.bookie import BookieSettings
from quire_bookie.disk import ReadOnlyPolicy
from quire_bookie.faults import StorageFaults
from quire_bookie.settings import BookieEnv
from quire_common.config import ConfigError, load_settings

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
    def from_settings(cls, env: BookieEnv) -> BookieConfig:
        port = env.port
        bookie_id = env.bookie_id or f"{env.advertised_host}:{port}"
        try:
            validate_bookie_id(bookie_id)
        except InvalidArgument as exc:
            raise ConfigError(f"QUIRE_BOOKIE_ID: {exc}") from None
        default_http = port + HTTP_PORT_OFFSET if port + HTTP_PORT_OFFSET <= 65535 else 0
        for name, usage in (
            ("QUIRE_BOOKIE_READ_ONLY_USAGE", env.read_only_usage),
            ("QUIRE_BOOKIE_WRITABLE_USAGE", env.writable_usage),
        ):
            if not 0 < usage <= 1:
                raise ConfigError(f"{name}={usage} must be a fraction in (0, 1]")
        if env.writable_usage > env.read_only_usage:
            raise ConfigError(
                f"QUIRE_BOOKIE_WRITABLE_USAGE={env.writable_usage} must not exceed "
                f"QUIRE_BOOKIE_READ_ONLY_USAGE={env.read_only_usage}"
            )
        if env.fault_lose_unsynced_writes and not env.unsafe_no_sync_loses_data:
            raise ConfigError(
                "QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES needs QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA=true "
                "(a synced write cannot be lost)"
            )
        storage = storage_settings(env)
        return cls(
            listen_address=f"{env.listen_host}:{port}",
            advertised_host=env.advertised_host,
            port=port,
            advertised_port=env.advertised_port if env.advertised_port is not None else port,
            http_port=env.http_port if env.http_port is not None else default_http,
            bookie_id=bookie_id,
            data_dir=Path(env.data_dir or f"data/bookie-{port}").resolve(),
            registry_target=env.registry_target,
            registration_ttl_seconds=env.ttl_seconds,
            rack=env.rack,
            region=env.region,
            autorecovery="" if env.autorecovery is None else str(env.autorecovery).lower(),
            standalone=env.standalone,
            gc_interval_seconds=env.gc_interval_seconds,
            gc_recheck_seconds=env.gc_recheck_seconds,
            storage=storage,
        )

    @classmethod
    def from_env(cls) -> BookieConfig:
        """From the process's environment (tools and tests; the service reads
        its settings once in run_service)."""
        return cls.from_settings(load_settings(BookieEnv))


def storage_settings(env: BookieEnv) -> BookieSettings:
    """What the bookie's storage and checks take from its settings."""
    return BookieSettings(
        max_entry_bytes=env.max_entry_bytes,
        max_read_bytes=env.max_read_bytes,
        max_read_entries=env.max_read_entries,
        cached_ledger_states=env.cached_ledger_states,
        group_commit_max_bytes=env.group_commit_max_bytes,
        group_commit_max_delay_seconds=env.group_commit_max_delay_seconds,
        sync=not env.unsafe_no_sync_loses_data,
        capacity_bytes=env.capacity_bytes,
        read_only=ReadOnlyPolicy(env.read_only_usage, env.writable_usage, env.force_read_only),
        disk_check_interval_seconds=env.disk_check_interval_seconds,
        idle_flush_seconds=env.idle_flush_seconds,
        max_long_poll_seconds=env.max_long_poll_seconds,
        verify_digests=env.verify_digests,
        entry_compression=env.entry_compression,
        large_entry_bytes=env.large_entry_bytes,
        direct_io_flushes=env.direct_io_flushes,
        fault_sync_delay_seconds=env.fault_sync_delay_seconds,
        fault_storage=StorageFaults(
            Path(env.fault_write_eio_file) if env.fault_write_eio_file else None,
            Path(env.fault_read_eio_file) if env.fault_read_eio_file else None,
            env.fault_lose_unsynced_writes,
        ),
        fault_unsafe_wal_point_in_time_recovery=env.fault_unsafe_wal_point_in_time_recovery,
        fault_unsafe_ignore_fence=env.fault_unsafe_ignore_fence,
    )
