"""The bookie's settings (QUIRE_BOOKIE_*, QUIRE_REGISTRY_TARGET), declared
once: read at start, rendered into docs/configuration.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from quire_bookie.storage import LARGE_ENTRY_BYTES
from quire_common.config import Renamed, setting
from quire_common.settings import CommonEnv, bookie_ttl_setting, registry_target_setting

BOOKIE = "bookie"
SECTION = "Bookie"
MILLISECONDS = 1 / 1000


@dataclass(frozen=True)
class BookieEnv:
    port: int = setting(
        "QUIRE_BOOKIE_PORT", 3181, "listen port (gRPC)", services=BOOKIE, section=SECTION, minimum=1, maximum=65535
    )
    listen_host: str = setting(
        "QUIRE_BOOKIE_LISTEN_HOST",
        "127.0.0.1",
        "listen host (gRPC and admin HTTP)",
        services=BOOKIE,
        section=SECTION,
    )
    advertised_host: str = setting(
        "QUIRE_BOOKIE_ADVERTISED_HOST",
        "127.0.0.1",
        "host published in the bookie's `bookie-rpc` and `http` endpoints",
        services=BOOKIE,
        section=SECTION,
    )
    advertised_port: int | None = setting(
        "QUIRE_BOOKIE_ADVERTISED_PORT",
        None,
        "port published in the bookie's `bookie-rpc` endpoint (a proxy or NAT in front of it); the default "
        "BookieId still uses the listen port",
        services=BOOKIE,
        section=SECTION,
        minimum=1,
        maximum=65535,
        default_doc="`QUIRE_BOOKIE_PORT`",
    )
    http_port: int | None = setting(
        "QUIRE_BOOKIE_HTTP_PORT",
        None,
        "admin HTTP port (`/status`, `/metrics`), advertised as endpoint `http`; `0` turns it off",
        services=BOOKIE,
        section=SECTION,
        minimum=0,
        maximum=65535,
        default_doc="port + 5000 (`8181`)",
    )
    bookie_id: str = setting(
        "QUIRE_BOOKIE_ID",
        "",
        "BookieId (BP-41): 1 to 255 of `[A-Za-z0-9._:-]`, not `readonly`; anything else stops the start",
        services=BOOKIE,
        section=SECTION,
        default_doc="`<advertised host>:<port>`",
    )
    data_dir: str = setting(
        "QUIRE_BOOKIE_DATA_DIR",
        "",
        "where RocksDB (`<dir>/rocksdb`) and the bookie's `COOKIE` file live",
        services=BOOKIE,
        section=SECTION,
        default_doc="`data/bookie-<port>`",
    )
    registry_target: str = registry_target_setting()
    ttl_seconds: int = bookie_ttl_setting()
    max_entry_bytes: int = setting(
        "QUIRE_BOOKIE_MAX_ENTRY_BYTES",
        5 * 1024 * 1024,
        "largest packed entry accepted (RESOURCE_EXHAUSTED above)",
        services=BOOKIE,
        section=SECTION,
        unit="bytes",
        minimum=1024,
    )
    max_read_bytes: int = setting(
        "QUIRE_BOOKIE_MAX_READ_BYTES",
        4 * 1024 * 1024,
        "most bytes in one `ReadEntries` reply (the first entry found is always returned)",
        services=BOOKIE,
        section=SECTION,
        unit="bytes",
        minimum=1024,
    )
    max_read_entries: int = setting(
        "QUIRE_BOOKIE_MAX_READ_ENTRIES",
        10_000,
        "most entries in one `ReadEntries` reply",
        services=BOOKIE,
        section=SECTION,
        minimum=1,
    )
    cached_ledger_states: int = setting(
        "QUIRE_BOOKIE_CACHED_LEDGER_STATES",
        10_000,
        "ledger states (master key, fence, last entry, LAC) kept in memory, the most recently written; "
        "any other ledger's is read from RocksDB when asked for (about 260 bytes of memory each)",
        services=BOOKIE,
        section=SECTION,
        minimum=1,
    )
    group_commit_max_bytes: int = setting(
        "QUIRE_BOOKIE_GROUP_COMMIT_MAX_BYTES",
        4 * 1024 * 1024,
        "most bytes in one synced WriteBatch",
        services=BOOKIE,
        section=SECTION,
        unit="bytes",
        minimum=4096,
    )
    group_commit_max_delay_seconds: float = setting(
        "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS",
        0.0,
        "how long the writer may wait for a full batch before syncing; 0 syncs as soon as the previous sync "
        "ends (at most 1)",
        services=BOOKIE,
        section=SECTION,
        unit="seconds",
        minimum=0,
        maximum=1,
        renamed_from=Renamed("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS", MILLISECONDS),
    )
    max_long_poll_seconds: float = setting(
        "QUIRE_BOOKIE_MAX_LONG_POLL_SECONDS",
        30.0,
        "cap on a long-poll `ReadLastAddConfirmed`",
        services=BOOKIE,
        section=SECTION,
        unit="seconds",
        minimum=0,
        renamed_from=Renamed("QUIRE_BOOKIE_MAX_LONG_POLL_MS", MILLISECONDS),
    )
    capacity_bytes: int = setting(
        "QUIRE_BOOKIE_CAPACITY_BYTES",
        0,
        "capacity the bookie reports and fills against: usage = its own data / this; "
        "`0`: the filesystem's, as `df` counts it (used / (used + free to the bookie))",
        services=BOOKIE,
        section=SECTION,
        unit="bytes",
        minimum=0,
    )
    read_only_usage: float = setting(
        "QUIRE_BOOKIE_READ_ONLY_USAGE",
        0.95,
        "usage at which the bookie turns read-only",
        services=BOOKIE,
        section=SECTION,
        unit="fraction",
        minimum=0,
        maximum=1,
    )
    writable_usage: float = setting(
        "QUIRE_BOOKIE_WRITABLE_USAGE",
        0.90,
        "usage below which a read-only bookie turns writable again (≤ the read-only usage)",
        services=BOOKIE,
        section=SECTION,
        unit="fraction",
        minimum=0,
        maximum=1,
    )
    force_read_only: bool = setting(
        "QUIRE_BOOKIE_FORCE_READ_ONLY", False, "read-only regardless of the disk", services=BOOKIE, section=SECTION
    )
    disk_check_interval_seconds: float = setting(
        "QUIRE_BOOKIE_DISK_CHECK_INTERVAL_SECONDS",
        5.0,
        "how often disk usage is measured",
        services=BOOKIE,
        section=SECTION,
        unit="seconds",
        minimum=0.05,
        renamed_from=Renamed("QUIRE_BOOKIE_DISK_CHECK_INTERVAL_MS", MILLISECONDS),
    )
    idle_flush_seconds: float = setting(
        "QUIRE_BOOKIE_IDLE_FLUSH_SECONDS",
        60.0,
        "once no write has come for this long, the bookie flushes its RocksDB memtables and gives their memory "
        "back to the OS (an idle bookie otherwise holds what it last wrote in memory, and replays it from the "
        "WAL on restart). `0` turns it off",
        services=BOOKIE,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    gc_interval_seconds: float = setting(
        "QUIRE_BOOKIE_GC_INTERVAL_SECONDS",
        300.0,
        "how often ledgers whose metadata is gone are collected; `0` turns garbage collection off",
        services=BOOKIE,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    gc_recheck_seconds: float = setting(
        "QUIRE_BOOKIE_GC_RECHECK_SECONDS",
        10.0,
        "gap between the two metadata look-ups that must both say NOT_FOUND before a ledger is deleted",
        services=BOOKIE,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    rack: str = setting(
        "QUIRE_BOOKIE_RACK", "", "published as property `topology.rack`", services=BOOKIE, section=SECTION
    )
    region: str = setting(
        "QUIRE_BOOKIE_REGION", "", "published as property `topology.region`", services=BOOKIE, section=SECTION
    )
    autorecovery: bool | None = setting(
        "QUIRE_BOOKIE_AUTORECOVERY",
        None,
        "`true`/`false`: published as property `autorecovery.enabled`",
        services=BOOKIE,
        section=SECTION,
    )
    standalone: bool = setting(
        "QUIRE_BOOKIE_STANDALONE",
        False,
        "run without a registry: no cookie check, registration or garbage collection (benchmarks, bookie-only tests)",
        services=BOOKIE,
        section=SECTION,
    )
    verify_digests: bool = setting(
        "QUIRE_BOOKIE_VERIFY_DIGESTS",
        True,
        "check the CRC32/CRC32C digest of every incoming entry (HMAC needs the password, so it is left to "
        "readers); a mismatch is refused and nothing is stored",
        services=BOOKIE,
        section=SECTION,
    )
    entry_compression: str = setting(
        "QUIRE_BOOKIE_ENTRY_COMPRESSION",
        "none",
        "how RocksDB compresses stored entries: `none` (payloads arrive compressed or random as a rule, and "
        "compressing them again only costs CPU), `snappy`, `lz4` or `zstd`; files already written keep theirs",
        services=BOOKIE,
        section=SECTION,
        choices=("none", "snappy", "lz4", "zstd"),
    )
    large_entry_bytes: int = setting(
        "QUIRE_BOOKIE_LARGE_ENTRY_BYTES",
        LARGE_ENTRY_BYTES,
        "entries of at least this many bytes are stored in RocksDB's value files (blob files), which "
        "compaction does not rewrite; 0 keeps every entry in the SST files. Files already written keep "
        "their layout",
        services=BOOKIE,
        section=SECTION,
        minimum=0,
    )
    direct_io_flushes: bool = setting(
        "QUIRE_BOOKIE_DIRECT_IO_FLUSHES",
        True,
        "write RocksDB's memtable flushes and compactions with direct I/O (O_DIRECT), where the data "
        "directory's file system takes it (checked at start; otherwise buffered, with a log line): a flush "
        "then no longer holds up the WAL's fsync that acknowledges adds (docs/decisions.md)",
        services=BOOKIE,
        section=SECTION,
    )
    unsafe_no_sync_loses_data: bool = setting(
        "QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA",
        False,
        "acknowledge adds without fsync; loses acknowledged data on a crash; logs a warning and shows in "
        "GetBookieInfo, `/status`, `/metrics` and health service `durable` (NOT_SERVING)",
        services=BOOKIE,
        section=SECTION,
    )
    fault_sync_delay_seconds: float = setting(
        "QUIRE_BOOKIE_FAULT_SYNC_DELAY_SECONDS",
        0.0,
        "fault injection: slow every synced write by this much (tests, drills; logs a warning; at most 60)",
        services=BOOKIE,
        section=SECTION,
        unit="seconds",
        minimum=0,
        maximum=60,
        renamed_from=Renamed("QUIRE_BOOKIE_FAULT_SYNC_DELAY_MS", MILLISECONDS),
    )
    fault_write_eio_file: str = setting(
        "QUIRE_BOOKIE_FAULT_WRITE_EIO_FILE",
        "",
        "fault injection (tests only): while this file exists every synced write fails with EIO",
        services=BOOKIE,
        section=SECTION,
    )
    fault_read_eio_file: str = setting(
        "QUIRE_BOOKIE_FAULT_READ_EIO_FILE",
        "",
        "fault injection (tests only): while this file exists every read fails with EIO",
        services=BOOKIE,
        section=SECTION,
    )
    fault_lose_unsynced_writes: bool = setting(
        "QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES",
        False,
        "fault injection (tests only; needs `QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA`): acknowledged writes are "
        "held in memory and lost on SIGKILL (the power-loss positive control)",
        services=BOOKIE,
        section=SECTION,
    )
    fault_unsafe_ignore_fence: bool = setting(
        "QUIRE_BOOKIE_FAULT_UNSAFE_IGNORE_FENCE",
        False,
        "fault injection (tests only): a fenced ledger still takes a writer's normal adds, so a writer "
        "recovered out of its ledger goes on being acknowledged past the end the recovery fixed (PART-2's "
        "positive control); logs a loud warning",
        services=BOOKIE,
        section=SECTION,
    )
    fault_unsafe_wal_point_in_time_recovery: bool = setting(
        "QUIRE_BOOKIE_FAULT_UNSAFE_WAL_POINT_IN_TIME_RECOVERY",
        False,
        "fault injection (tests only): a WAL damaged in the middle is replayed up to the damage and the bookie "
        "starts without the acknowledged entries after it, instead of refusing to start (the DSK-7 positive "
        "control); logs a loud warning",
        services=BOOKIE,
        section=SECTION,
    )
    common: CommonEnv = dataclasses.field(default_factory=CommonEnv)
