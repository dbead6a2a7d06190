"""RocksDB storage for entries and per-ledger state (rocksdict, raw mode).

Column family `entries`: key = scope_id(8) | ledger_id(8) | entry_id(8), all
big-endian unsigned, so one ledger is one 16-byte prefix and its entries are
in id order; value = the packed entry exactly as received.
Column family `ledgers`: key = scope_id(8) | ledger_id(8); value = LedgerState,
written when what the entries cannot tell changes (the master key, on a
ledger's first add here; the fence; the explicit LAC), not on every add. Its
last entry and LAC are read back as the ledger's entries leave them: the
highest stored entry, and the LAC in that entry's header (`read_state`).

Everything here is synchronous; the bookie calls it from worker threads.

Durability: rocksdict holds the GIL for the whole of a synced write,
fsync included, so a synced `Rdict.write` would stall the event loop (and
gRPC's poller) for every sync and starve group commit of the requests that
should share the next one. So the batch is written unsynced (RocksDB hands
the WAL record to the OS before `write` returns) and then `WalSyncer` fsyncs
RocksDB's WAL files with os.fdatasync, which releases the GIL. A WAL file that
appears is made durable in its directory too; one that vanishes was retired
after its memtable was flushed to a synced SST file.

Recovery: at open RocksDB replays the WAL, dropping a write torn at the very
end of a file; any other bad record is damage, and the open fails with
DamagedJournal rather than start without the acknowledged entries after it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import mmap
import os
import re
import shutil
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    BottommostLevelCompaction,
    Cache,
    CompactOptions,
    DBCompressionType,
    DBRecoveryMode,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from quire_api.errors import DataLoss, QuireError, Reason
from quire_api.ids import LedgerId
from quire_api.replication import entries_held
from quire_bookie.reclaim import SpaceReclaimer
from quire_common.entry import header_ids, verified_without_key

log = logging.getLogger(__name__)

ENTRIES_CF = "entries"
LEDGERS_CF = "ledgers"
NO_ENTRY = -1
_T = TypeVar("_T")


# Free bytes needed before a failed store is reopened: reopening replays the
# WAL into a new SST file, which needs room.
REOPEN_MIN_FREE_BYTES = 8 * 1024 * 1024

# RocksDB's memory and descriptors, bounded whatever the data size. RocksDB's
# defaults allow two 64 MiB memtables per column family and a 32 MiB block cache
# per column family, and keep every SST file open, so a bookie's RSS grew by
# about 100 MiB as its first memtables filled and its descriptors with its data.
MEMTABLE_BYTES = 64 * 1024 * 1024  # one memtable; two per column family at most (one being flushed)
ALL_MEMTABLES_BYTES = 128 * 1024 * 1024  # all column families together: the largest is flushed past this
BLOCK_CACHE_BYTES = 16 * 1024 * 1024  # one cache for every column family, index and filter blocks included
MAX_OPEN_FILES = 256  # SST files kept open; others are opened when read
# RocksDB's info LOG: every delete flushes and compacts, which it logs (about 2 KB per deleted
# ledger), and each open starts a new LOG, keeping the old ones (a thousand by default). Rolled at
# this size and kept to a few files, it stays near 4 MiB however many ledgers come and go.
INFO_LOG_BYTES = 1024 * 1024
INFO_LOG_FILES = 4  # the current LOG and three older ones
# Entries of at least this many bytes are kept in RocksDB's value files (its "blob files"),
# outside the SST files: compaction then moves only their keys, not their bytes, which at
# 64 KiB cost a bookie's compaction threads more than its writer (docs/decisions.md, "Large
# entries in value files"). Smaller entries stay in the SST files, where a read finds them
# without a second file.
LARGE_ENTRY_BYTES = 16 * 1024
# A deleted ledger's entries are counted this many at a time, the interpreter released in
# between (about 0.6 ms of counting at 0.56 µs per entry).
COUNT_SLICE = 1024


def is_disk_full(exc: BaseException) -> bool:
    """Whether a storage failure is a full disk (RocksDB reports ENOSPC as a
    plain exception whose message carries the OS error)."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return "No space left on device" in str(exc)


# One ledger's part of a check: (ledger, entries to look for, entries to verify).
EntriesToCheck = tuple[LedgerId, list[int], list[int]]


@dataclass(frozen=True)
class CheckedEntries:
    """What a check found of one ledger (ids ascending)."""

    missing: list[int]
    damaged: list[int]
    bytes_verified: int


@dataclass(frozen=True)
class Stripes:
    """A packed check (bookie.proto's EntryStripes): row i is the ids
    first_entry_ids[i]..last_entry_ids[i] that position positions[i] of an
    ensemble of ensemble_sizes[i] holds with write quorum write_quorums[i],
    those within verify_first_ids[i]..verify_last_ids[i] to be verified.
    Columns, one element per row, so a row costs no object of its own."""

    scope_ids: Sequence[int]
    ledger_ids: Sequence[int]
    first_entry_ids: Sequence[int]
    last_entry_ids: Sequence[int]
    ensemble_sizes: Sequence[int]
    write_quorums: Sequence[int]
    positions: Sequence[int]
    verify_first_ids: Sequence[int]
    verify_last_ids: Sequence[int]

    def rows(self) -> Iterator[tuple[int, int, int, int, int, int, int, int, int]]:
        return zip(
            self.scope_ids,
            self.ledger_ids,
            self.first_entry_ids,
            self.last_entry_ids,
            self.ensemble_sizes,
            self.write_quorums,
            self.positions,
            self.verify_first_ids,
            self.verify_last_ids,
            strict=True,
        )


@dataclass
class StripesChecked:
    """What a packed check found: copies as parallel (row, entry id) lists,
    by row and then entry id."""

    missing_rows: list[int] = field(default_factory=list)
    missing_entry_ids: list[int] = field(default_factory=list)
    damaged_rows: list[int] = field(default_factory=list)
    damaged_entry_ids: list[int] = field(default_factory=list)
    bytes_verified: int = 0


class HandlesInUse:
    """The store's RocksDB handles in use. Every read, write and compaction
    holds this shared (`with`); `reopen` and `close`, which replace or drop
    the handles, hold it alone (`alone()`) once every use begun before them
    has ended, and uses that come while one of them waits, wait behind it.
    One plain lock for every use let a long read hold the writer's next write
    back: a scrub's check of 65,000 entries held an add for about 3 s
    (docs/decisions.md, "Reads beside the writer"). No store method takes it
    twice, so none waits for itself."""

    def __init__(self) -> None:
        # Uses take the condition's lock directly: its own `with` is a Python call each way,
        # and every write and read of the store passes here.
        self._mutex = threading.Lock()
        self._changed = threading.Condition(self._mutex)
        self._users = 0
        self._alone = False  # held, or waited for, by a reopen or close

    def __enter__(self) -> None:
        with self._mutex:
            while self._alone:
                self._changed.wait()
            self._users += 1

    def __exit__(self, *_: object) -> None:
        with self._mutex:
            self._users -= 1
            if self._alone and not self._users:  # a reopen or close waits for the last use to end
                self._changed.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        with self._mutex:
            while self._alone:
                self._changed.wait()
            self._alone = True  # from now on, new uses wait
            while self._users:
                self._changed.wait()
        try:
            yield
        finally:
            with self._mutex:
                self._alone = False
                self._changed.notify_all()


class _KeysBeforeDelete:
    """A deleted ledger's keys as they were before its delete: an open
    RocksDB iterator (it keeps the view it was opened on, and the database
    open) and the options whose upper bound it reads, until counted or
    released."""

    __slots__ = ("keys", "options")

    def __init__(self, keys: Iterable[object], options: ReadOptions) -> None:
        self.keys: Iterable[object] | None = keys
        self.options: ReadOptions | None = options

    def release(self) -> None:
        self.keys = self.options = None


def _locked(method: Callable[..., _T]) -> Callable[..., _T]:
    """Run an EntryStore method as a use of the store's handles (HandlesInUse)."""

    @functools.wraps(method)
    def run(self: EntryStore, *args: Any, **kwargs: Any) -> _T:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


def bounded_options(block_cache: Cache) -> Options:
    """Options for the database and each column family, within the bounds above."""
    options = Options(raw_mode=True)
    options.set_write_buffer_size(MEMTABLE_BYTES)
    options.set_max_write_buffer_number(2)
    options.set_db_write_buffer_size(ALL_MEMTABLES_BYTES)
    options.set_max_open_files(MAX_OPEN_FILES)
    options.set_max_log_file_size(INFO_LOG_BYTES)
    options.set_keep_log_file_num(INFO_LOG_FILES)
    table = BlockBasedOptions()
    table.set_block_cache(block_cache)
    table.set_cache_index_and_filter_blocks(True)
    options.set_block_based_table_factory(table)
    return options


_DIRECT_IO_PROBE = ".direct-io-probe"
_DIRECT_IO_BLOCK = 4096  # O_DIRECT wants writes aligned to the device's block: a page serves every common one


def direct_io_works(directory: Path) -> bool:
    """Whether files in `directory` take direct I/O (O_DIRECT), tried with one
    aligned write: some file systems refuse it (older tmpfs, some FUSE and
    network ones), and RocksDB does not fall back to buffered writes there."""
    if not hasattr(os, "O_DIRECT"):  # not Linux
        return False
    probe = directory / _DIRECT_IO_PROBE
    try:
        descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
        try:
            with mmap.mmap(-1, _DIRECT_IO_BLOCK) as aligned:  # an anonymous map is page-aligned
                os.write(descriptor, aligned)
        finally:
            os.close(descriptor)
    except OSError as exc:
        log.info("direct I/O is not available in %s (%s): flushes and compactions stay buffered", directory, exc)
        return False
    finally:
        probe.unlink(missing_ok=True)
    return True


def entry_options(block_cache: Cache, compression: str, large_entry_bytes: int = LARGE_ENTRY_BYTES) -> Options:
    """Options for the entries' column family: `bounded_options`, entries of
    `large_entry_bytes` or more in value files (0: none), and the
    compression chosen by name (QUIRE_BOOKIE_ENTRY_COMPRESSION's choices are
    the names of rocksdict's DBCompressionType constructors). Quire stores
    payloads as writers send them, mostly compressed or random already; on
    those Snappy, RocksDB's default, saves nothing and costs every flush and
    compaction (docs/decisions.md, "Entries are stored uncompressed"). Each
    SST file records its own compression, so a change applies to the files
    written after it."""
    options = bounded_options(block_cache)
    options.set_compression_type(getattr(DBCompressionType, compression)())
    if large_entry_bytes:
        # Value files are never rewritten by compaction (their garbage collection is off):
        # entries are never overwritten, and a delete's space is given back by the
        # compaction of its range, with collection on for that alone (_reclaim_space).
        options.set_enable_blob_files(True)
        options.set_min_blob_size(large_entry_bytes)
        options.set_blob_compression_type(getattr(DBCompressionType, compression)())
    return options


# An entry's key: its ledger's key (LedgerId.key: scope and ledger, 8 bytes each) and its id,
# all big-endian, packed in one call: 214 against 605 ns joined from the ledger's key and the
# id's bytes, where a bookie writes every entry.
_ENTRY_KEY = struct.Struct(">QQQ")


def entry_key(ledger_id: LedgerId, entry_id: int) -> bytes:
    return _ENTRY_KEY.pack(ledger_id[0], ledger_id[1], entry_id)


# A ledger state record: format(1) | fenced(1) | key length(1) | master key(<=32) | last entry | lac | explicit lac
_STATE_LAYOUT_VERSION = 1


_new_tuple = tuple.__new__


class LedgerState(NamedTuple):
    """What a bookie knows about one ledger besides its entries. A tuple: a
    bookie makes one for every add it stores, and a tuple costs less than a
    third of a frozen dataclass to make."""

    master_key: bytes = b""
    fenced: bool = False
    last_entry_id: int = NO_ENTRY  # highest entry id stored
    last_add_confirmed: int = NO_ENTRY  # highest LAC seen in a stored header
    explicit_lac: int = NO_ENTRY  # LAC written by the writer outside an entry

    def encode(self) -> bytes:
        return (
            struct.pack(">BBB", _STATE_LAYOUT_VERSION, int(self.fenced), len(self.master_key))
            + self.master_key
            + struct.pack(">qqq", self.last_entry_id, self.last_add_confirmed, self.explicit_lac)
        )

    @classmethod
    def decode(cls, data: bytes) -> LedgerState:
        version, fenced, key_length = struct.unpack_from(">BBB", data)
        if version != _STATE_LAYOUT_VERSION:
            raise ValueError(f"unknown ledger state layout {version}")
        master_key = data[3 : 3 + key_length]
        last_entry, lac, explicit_lac = struct.unpack_from(">qqq", data, 3 + key_length)
        return cls(master_key, bool(fenced), last_entry, lac, explicit_lac)

    @property
    def lac(self) -> int:
        """The LAC this bookie reports: from entry headers or written explicitly."""
        from_headers, explicit = self.last_add_confirmed, self.explicit_lac  # asked per ledger per commit: no max()
        return from_headers if from_headers > explicit else explicit

    def with_entry(self, entry_id: int, lac: int) -> LedgerState:
        # This runs for every add: the tuple is made by tuple.__new__, which skips the
        # Python-level __new__ that NamedTuple generates, and the maxima are comparisons
        # rather than calls of max() (about 3,900 instructions per add fewer than
        # LedgerState(...) with max(): docs/decisions.md).
        master_key, fenced, last_entry_id, last_add_confirmed, explicit_lac = self
        return _new_tuple(
            LedgerState,
            (
                master_key,
                fenced,
                entry_id if entry_id > last_entry_id else last_entry_id,
                lac if lac > last_add_confirmed else last_add_confirmed,
                explicit_lac,
            ),
        )

    def same_record(self, other: LedgerState) -> bool:
        """Whether the stored record of `other` would serve for this state
        too: they differ only in what the entries tell (the last entry and
        the LAC of its header), so an add to a ledger already here writes
        its entries alone."""
        return (
            self.master_key == other.master_key
            and self.fenced == other.fenced
            and self.explicit_lac == other.explicit_lac
        )

    def with_last_entry(self, last_entry: tuple[int, bytes] | None) -> LedgerState:
        """This state (as its record was written) moved on to the ledger's
        highest stored entry. A writer packs its entries with LACs that never
        go down as ids go up (recovery and repair copy entries unchanged), so
        the highest entry carries the highest LAC; a header that does not
        parse leaves the LAC where the record had it (a LAC is a lower bound
        for readers and recovery, never a promise)."""
        if last_entry is None:
            return self
        entry_id, data = last_entry
        try:
            lac = header_ids(data)[3]
        except QuireError:
            lac = NO_ENTRY
        return self.with_entry(entry_id, lac)


SUPER_VERSION_PROPERTY = "rocksdb.current-super-version-number"
MEMTABLES_PROPERTY = "rocksdb.cur-size-all-mem-tables"  # active and not yet flushed, in bytes


class WalSyncer:
    """Syncs the live write-ahead log files of one RocksDB directory.

    RocksDB starts a new WAL file only when it switches a memtable, and every
    switch installs a new super version of that column family; `generation`
    returns those numbers. The directory is listed again only when they
    changed since the last listing (taken before listing, so a switch during
    it is seen next time), not before every sync: a listing cost each group
    commit about as much as ten entries' checks."""

    def __init__(self, path: Path, generation: Callable[[], object] | None = None) -> None:
        self._path = path
        self._files: dict[str, int] = {}  # WAL file name -> open descriptor
        self._newest = ""  # the WAL file RocksDB appends to: the highest numbered
        self._generation = generation
        self._listed_at: object = None  # the generation of the last listing

    def sync(self) -> None:
        generation = self._generation() if self._generation is not None else None
        if not self._files or generation is None or generation != self._listed_at:
            self._list()
            self._listed_at = generation
            # The files RocksDB left for a newer one get their last sync here: an unsynced
            # write (an explicit LAC alone) may have been their last.
            for fd in self._files.values():
                os.fdatasync(fd)  # what RocksDB itself uses for a synced WAL write
            return
        # RocksDB appends to its newest WAL file only; older ones stay until the column families
        # whose data they hold are flushed (the ledger states' family seldom is), and an fdatasync
        # of a file with nothing new still costs this machine about 70 µs of wall time.
        os.fdatasync(self._files[self._newest])

    def _list(self) -> None:
        names = {name for name in os.listdir(self._path) if name.endswith(".log")}
        if names != set(self._files):
            for gone in set(self._files) - names:
                os.close(self._files.pop(gone))
            for new in names - set(self._files):
                try:
                    self._files[new] = os.open(self._path / new, os.O_RDONLY)
                except FileNotFoundError:  # retired meanwhile: its data is in a synced SST file
                    continue
            directory = os.open(self._path, os.O_RDONLY)
            try:
                os.fsync(directory)  # a new WAL's directory entry must be durable too
            finally:
                os.close(directory)
        self._newest = max(self._files, key=lambda name: int(name.removesuffix(".log")), default="")

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()
        self._newest = ""


class EntryStore:
    """One RocksDB per bookie. `read_only=True` opens a stopped bookie's
    database without writing anything (for `quire bookie inspect`)."""

    def __init__(
        self,
        path: Path,
        *,
        sync: bool = True,
        read_only: bool = False,
        entry_compression: str = "none",
        large_entry_bytes: int = LARGE_ENTRY_BYTES,
        direct_io_flushes: bool = True,
        unsafe_point_in_time_recovery: bool = False,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._sync = sync
        self._entry_compression = entry_compression
        self._large_entry_bytes = large_entry_bytes
        self._point_in_time = unsafe_point_in_time_recovery  # the DSK-7 positive control only
        self._lock = HandlesInUse()  # so that `reopen` never swaps the handles under a use
        # Deleted ledgers' keys not yet counted: each holds an iterator, and so the database, open.
        self._uncounted: set[_KeysBeforeDelete] = set()
        if not read_only:
            path.mkdir(parents=True, exist_ok=True)
        # Flushes and compactions written past the page cache: written through it, a 64 MiB
        # memtable's flush was still being written back when the WAL's next fdatasync came, and
        # that sync (which acknowledges adds) waited for it (docs/decisions.md).
        self.direct_io_flushes = direct_io_flushes and not read_only and direct_io_works(path)
        torn_tails = [] if read_only else torn_wal_tails(path)  # read before RocksDB replays and retires them
        self._open(read_only)
        self._batch_options = WriteOptions()
        self._batch_options.sync = False  # synced by the WalSyncer instead, without the GIL
        self._wal = WalSyncer(path, self._memtable_generation)
        self._reclaimer = SpaceReclaimer(self._reclaim_space)  # deleted ledgers' space, given back beside the writer
        self.recovery_report = [] if read_only else torn_tails + wal_recovery_lines(path)
        for line in self.recovery_report:
            log.warning("RocksDB WAL recovery dropped a torn or corrupt tail: %s", line)

    def _open(self, read_only: bool) -> None:
        block_cache = Cache(BLOCK_CACHE_BYTES)
        options = bounded_options(block_cache)
        # Tolerate corrupted tail records: a record cut short at the end of a
        # WAL file (a write torn by a crash, never acknowledged) is dropped;
        # any other bad record (a checksum mismatch, a bad length anywhere
        # but the end) refuses the open. Point in time would drop everything
        # after a bad record in the middle, entries this bookie acknowledged
        # included, and start as if they had never been written.
        options.set_wal_recovery_mode(
            DBRecoveryMode.point_in_time() if self._point_in_time else DBRecoveryMode.tolerate_corrupted_tail_records()
        )
        if read_only:
            if not (self.path / "CURRENT").exists():
                raise FileNotFoundError(f"no bookie database at {self.path}")
            access = AccessType.read_only()
        else:
            options.create_if_missing(True)
            options.create_missing_column_families(True)
            options.set_use_direct_io_for_flush_and_compaction(self.direct_io_flushes)
            access = AccessType.read_write()
        try:
            self._db = Rdict(
                str(self.path),
                options=options,
                column_families={
                    ENTRIES_CF: entry_options(block_cache, self._entry_compression, self._large_entry_bytes),
                    LEDGERS_CF: bounded_options(block_cache),
                },
                access_type=access,
            )
        except Exception as exc:
            damaged = wal_recovery_lines(self.path) if str(exc).startswith("Corruption") else []
            if damaged:
                raise DamagedJournal(self.path, damaged, str(exc)) from None
            raise
        self._entries = self._db.get_column_family(ENTRIES_CF)
        self._ledgers = self._db.get_column_family(LEDGERS_CF)
        self._entries_handle = self._db.get_column_family_handle(ENTRIES_CF)
        self._ledgers_handle = self._db.get_column_family_handle(LEDGERS_CF)

    def _memtable_generation(self) -> tuple[int | None, ...]:
        """Changes whenever a column family switches memtables (and so RocksDB may have started a WAL file)."""
        return tuple(
            family.property_int_value(SUPER_VERSION_PROPERTY) for family in (self._db, self._entries, self._ledgers)
        )

    def _drop_handles(self) -> None:
        # RocksDB's lock is released only when the last handle object is
        # dropped, so drop them all (iterators too): the same process may reopen the store.
        for held in list(self._uncounted):
            held.release()
        self._uncounted.clear()
        for name in ("_entries", "_ledgers", "_entries_handle", "_ledgers_handle", "_db"):
            self.__dict__.pop(name, None)

    def close(self) -> None:
        self._reclaimer.close()  # the space of ledgers deleted so far is given back first
        with self._lock.alone():
            self._wal.close()
            try:
                if not self.read_only:
                    self._db.flush_wal(True)
                self._entries.close()
                self._ledgers.close()
                self._db.close()
            except Exception as exc:  # a write failed before: RocksDB refuses; what was synced is in the WAL
                log.error("closing the store failed: %s", exc)
            finally:
                self._drop_handles()

    def reopen(self) -> None:
        """Start RocksDB afresh after a failed write (it refuses every write
        after one fails). Raises, leaving the failed database open for reads,
        while the disk lacks room to replay the WAL; if the reopen itself
        fails, the database is opened read-only so reads go on."""
        free = shutil.disk_usage(self.path).free
        if free < REOPEN_MIN_FREE_BYTES:
            raise OSError(
                errno.ENOSPC,
                f"No space left on device: {free} bytes free, {REOPEN_MIN_FREE_BYTES} needed to reopen the store",
            )
        with self._lock.alone():
            self._wal.close()
            self._drop_handles()
            try:
                self._open(read_only=False)
            except Exception:
                self._open(read_only=True)
                raise
        log.warning("storage reopened after a failed write; recovered: %s", wal_recovery_lines(self.path) or "all")

    def load_states(self) -> dict[LedgerId, LedgerState]:
        with self._lock:
            return self._load_states()

    def _load_states(self) -> dict[LedgerId, LedgerState]:
        states: dict[LedgerId, LedgerState] = {}
        for key, value in self._ledgers.items():
            ledger_id = LedgerId.from_key(cast(bytes, key))
            states[ledger_id] = LedgerState.decode(cast(bytes, value)).with_last_entry(self._last_entry(ledger_id))
        return states

    @_locked
    def read_state(self, ledger_id: LedgerId) -> LedgerState | None:
        """The ledger's state: its record, moved on to its highest stored entry."""
        value = self._ledgers.get(ledger_id.key)
        if value is None:
            return None
        return LedgerState.decode(cast(bytes, value)).with_last_entry(self._last_entry(ledger_id))

    @_locked
    def count_states(self) -> int:
        """How many ledgers have a state (a scan of their keys)."""
        return sum(1 for _ in self._ledgers.keys())

    @_locked
    def state_ledger_ids(self) -> list[LedgerId]:
        """Every ledger with a state (a scan of their keys)."""
        return [LedgerId.from_key(cast(bytes, key)) for key in self._ledgers.keys()]

    @_locked
    def write_sequence(self) -> int:
        """RocksDB's last sequence number: it moves with every write."""
        return int(self._db.latest_sequence_number())

    @_locked
    def memtable_bytes(self) -> int:
        """What the column families' memtables hold, flushed or not yet."""
        families = (self._db, self._entries, self._ledgers)
        return sum(family.property_int_value(MEMTABLES_PROPERTY) or 0 for family in families)

    @_locked
    def flush_memtables(self) -> None:
        """Write every memtable to an SST file: RocksDB frees their memory,
        and a restart has that much less WAL to replay."""
        for family in (self._db, self._entries, self._ledgers):
            family.flush()

    def write(
        self, entries: list[tuple[LedgerId, int, bytes]], states: dict[LedgerId, LedgerState], *, sync: bool = True
    ) -> None:
        """Write entries and ledger state records (those that changed: see
        LedgerState.same_record) in one WriteBatch; durable on return (the
        WAL is fsynced) unless the store was opened without sync, or `sync`
        is off for this write (it is then synced by the next synced write,
        or lost with a crash before it)."""
        batch = WriteBatch(raw_mode=True)
        put, entries_handle, key = batch.put, self._entries_handle, _ENTRY_KEY.pack  # entry_key's, inline
        for ledger_id, entry_id, data in entries:
            put(key(ledger_id[0], ledger_id[1], entry_id), data, entries_handle)
        for ledger_id, state in states.items():
            batch.put(ledger_id.key, state.encode(), self._ledgers_handle)
        with self._lock:
            self._db.write(batch, self._batch_options)
        if self._sync and sync:
            self._wal.sync()

    def read(self, ledger_id: LedgerId, entry_id: int) -> bytes | None:
        with self._lock:
            value = self._entries.get(entry_key(ledger_id, entry_id))
        return bytes(value) if value is not None else None

    @_locked
    def read_many(
        self, ledger_id: LedgerId, entry_ids: list[int], max_bytes: int, max_entries: int
    ) -> tuple[list[tuple[int, bytes]], list[int], bool]:
        """Entries found (at least the first one found, then up to max_bytes
        and max_entries), ids missing, and whether a limit cut the list short."""
        found: list[tuple[int, bytes]] = []
        missing: list[int] = []
        total = 0
        for entry_id in entry_ids:
            value = self._entries.get(entry_key(ledger_id, entry_id))
            if value is None:
                missing.append(entry_id)
                continue
            if found and (total + len(value) > max_bytes or len(found) >= max_entries):
                return found, missing, True
            found.append((entry_id, bytes(value)))
            total += len(value)
        return found, missing, False

    @_locked
    def read_range(
        self, ledger_id: LedgerId, first: int, last: int, max_bytes: int, max_entries: int
    ) -> tuple[list[tuple[int, bytes]], list[int], bool]:
        """Stored entries with ids in [first, last] in id order (at least the
        first one, then up to max_bytes and max_entries), the ids missing
        between them, and whether a limit cut the range short."""
        found: list[tuple[int, bytes]] = []
        missing: list[int] = []
        total = 0
        expected = first
        for entry_id, value in self.entries(ledger_id, first, last):
            if found and (total + len(value) > max_bytes or len(found) >= max_entries):
                return found, missing, True
            missing.extend(range(expected, entry_id))
            found.append((entry_id, value))
            total += len(value)
            expected = entry_id + 1
        return found, missing, False

    def entries(self, ledger_id: LedgerId, first: int = 0, last: int = (1 << 63) - 1) -> Iterator[tuple[int, bytes]]:
        """A ledger's stored entries with ids in [first, last], in id order.
        Not under the lock by itself: callers that may race `reopen` hold it."""
        for key, value in self._entries.items(from_key=entry_key(ledger_id, first)):
            stored_key = cast(bytes, key)
            entry_id = int.from_bytes(stored_key[16:24], "big")
            if stored_key[:16] != ledger_id.key or entry_id > last:
                return
            yield entry_id, bytes(value)

    @_locked
    def missing(self, ledger_id: LedgerId, entry_ids: list[int]) -> list[int]:
        """Which of `entry_ids` are not stored, from one scan of the keys
        between the lowest and the highest of them."""
        return self._missing(ledger_id, entry_ids)

    def _missing(self, ledger_id: LedgerId, entry_ids: list[int]) -> list[int]:
        if not entry_ids:
            return []
        wanted = set(entry_ids)
        highest = max(wanted)
        held: set[int] = set()
        prefix = ledger_id.key
        for key in self._entries.keys(from_key=prefix + min(wanted).to_bytes(8, "big")):
            stored_key = cast(bytes, key)
            entry_id = int.from_bytes(stored_key[16:24], "big")
            if stored_key[:16] != prefix or entry_id > highest:
                break
            if entry_id in wanted:
                held.add(entry_id)
        return [entry_id for entry_id in entry_ids if entry_id not in held]

    @_locked
    def check(self, ledgers: list[EntriesToCheck]) -> list[CheckedEntries]:
        """For each ledger: which of its listed entries are not stored, and
        which of those to verify are stored damaged (`verified_without_key`).
        A ledger whose storage cannot be read back has all its listed
        entries damaged; the others are still checked."""
        found = []
        for ledger_id, entry_ids, verify_entry_ids in ledgers:
            try:
                found.append(self._check(ledger_id, entry_ids, verify_entry_ids))
            except Exception as exc:  # rocksdict raises plain Exceptions ("Corruption: ...")
                log.error("checking ledger %s in storage failed: %s", ledger_id, exc)
                found.append(CheckedEntries([], sorted({*entry_ids, *verify_entry_ids}), 0))
        return found

    def _check(self, ledger_id: LedgerId, entry_ids: list[int], verify_entry_ids: list[int]) -> CheckedEntries:
        missing = set(self._missing(ledger_id, entry_ids))
        damaged: set[int] = set()
        read = 0
        for entry_id in verify_entry_ids:
            data = self._entries.get(entry_key(ledger_id, entry_id))
            if data is None:
                missing.add(entry_id)
                continue
            read += len(data)
            if not verified_without_key(bytes(data), ledger_id, entry_id):
                damaged.add(entry_id)
        return CheckedEntries(sorted(missing), sorted(damaged), read)

    @_locked
    def check_stripes(self, stripes: Stripes) -> StripesChecked:
        """check() for a packed question: each row's held ids are worked
        out here from its range and stripe, those in its verify range read
        back and verified, the others looked for by key. A row whose
        ledger's storage cannot be read back has all its held ids damaged;
        the other rows are still checked. Tight on purpose: the scrub asks
        about every copy of every ledger, often one or two per row."""
        found = StripesChecked()
        for row, (scope, ledger, first, last, size, quorum, position, verify_first, verify_last) in enumerate(
            stripes.rows()
        ):
            held = entries_held(size, quorum, position, first, last)
            if not held:
                continue
            ledger_id = LedgerId(scope, ledger)
            try:
                missing, damaged, read = self._check_held(
                    ledger_id, held, (size, quorum, position), verify_first, verify_last
                )
            except Exception as exc:  # rocksdict raises plain Exceptions ("Corruption: ...")
                log.error("checking ledger %s in storage failed: %s", ledger_id, exc)
                missing, damaged, read = [], held, 0
            if missing:
                found.missing_rows.extend([row] * len(missing))
                found.missing_entry_ids.extend(missing)
            if damaged:
                found.damaged_rows.extend([row] * len(damaged))
                found.damaged_entry_ids.extend(damaged)
            found.bytes_verified += read
        return found

    def _check_held(
        self, ledger_id: LedgerId, held: list[int], stripe: tuple[int, int, int], verify_first: int, verify_last: int
    ) -> tuple[list[int], list[int], int]:
        """(missing, damaged, bytes read) of one row's held ids (ascending;
        `stripe` is the row's ensemble size, write quorum and position),
        those within verify_first..verify_last read back and verified."""
        size, quorum, position = stripe
        prefix = ledger_id.key
        if verify_first <= held[0] and held[-1] <= verify_last:
            looked_for = []  # all verified: a small ledger, each pass
        else:
            looked_for = [e for e in held if not verify_first <= e <= verify_last]
        missing = self._missing(ledger_id, looked_for) if looked_for else []
        damaged = []
        read = 0
        verified_missing = False
        for entry_id in range(max(held[0], verify_first), min(held[-1], verify_last) + 1):
            if (position - entry_id) % size >= quorum:
                continue  # not held here
            data = self._entries.get(prefix + entry_id.to_bytes(8, "big"))
            if data is None:
                missing.append(entry_id)
                verified_missing = True
                continue
            read += len(data)
            if not verified_without_key(data, ledger_id, entry_id):
                damaged.append(entry_id)
        if verified_missing and looked_for:
            missing.sort()
        return missing, damaged, read

    @_locked
    def ledgers_with_entries(self) -> dict[LedgerId, int]:
        """Every ledger that has entries, with its entry count (a full scan)."""
        counts: dict[LedgerId, int] = {}
        for key in self._entries.keys():
            ledger_id = LedgerId.from_key(cast(bytes, key))
            counts[ledger_id] = counts.get(ledger_id, 0) + 1
        return counts

    @_locked
    def last_entry(self, ledger_id: LedgerId) -> tuple[int, bytes] | None:
        """The highest stored entry of a ledger."""
        return self._last_entry(ledger_id)

    def _last_entry(self, ledger_id: LedgerId) -> tuple[int, bytes] | None:
        upper = ledger_id.key + b"\xff" * 8
        for key, value in self._entries.items(backwards=True, from_key=upper):
            stored_key = cast(bytes, key)
            if stored_key[:16] != ledger_id.key:
                return None
            return int.from_bytes(stored_key[16:24], "big"), bytes(value)
        return None

    def delete_ledger(self, ledger_id: LedgerId) -> int:
        """Remove a ledger's entries and state; returns how many entries went."""
        return self.delete_ledgers([ledger_id])[0]()

    @_locked
    def delete_ledgers(self, ledger_ids: list[LedgerId]) -> list[Callable[[], int]]:
        """Remove ledgers' entries and state in one synced write. Returns, per
        ledger, a call that counts the entries it held, to be made off the
        writer thread (`_count`): the keys of each are opened before the
        delete, and a RocksDB iterator keeps the view it was opened on. Their
        space is given back afterwards, on the SpaceReclaimer's thread
        (`_reclaim_space`)."""
        views: list[_KeysBeforeDelete] = []
        batch = WriteBatch(raw_mode=True)
        try:
            for ledger_id in ledger_ids:
                prefix = ledger_id.key
                in_ledger = ReadOptions()  # an upper bound lets RocksDB end the range (0.56 against 0.9 µs per entry)
                in_ledger.set_iterate_upper_bound(prefix + b"\xff" * 8 + b"\x00")
                views.append(_KeysBeforeDelete(self._entries.keys(from_key=prefix, read_opt=in_ledger), in_ledger))
                # delete_range's end is exclusive; the last possible id goes separately.
                batch.delete_range(prefix + b"\x00" * 8, prefix + b"\xff" * 8, self._entries_handle)
                batch.delete(prefix + b"\xff" * 8, self._entries_handle)
                batch.delete(prefix, self._ledgers_handle)
            self._db.write(batch, self._batch_options)
            if self._sync:
                self._wal.sync()
        except BaseException:
            for view in views:  # nobody will count them
                view.release()
            raise
        self._uncounted.update(views)
        self._reclaimer.put(ledger_ids)
        return [functools.partial(self._count, view) for view in views]

    @_locked
    def _count(self, held: _KeysBeforeDelete) -> int:
        """How many keys a deleted ledger had before its delete. The
        interpreter is released every COUNT_SLICE keys, so that the writer and
        the event loop wait no longer than a slice (a ledger of a million
        entries takes about half a second). Refused once the store was closed
        or reopened: the database the keys were read from is gone."""
        keys = held.keys
        if keys is None:
            raise RuntimeError("the store was closed or reopened after the delete; its count is lost")
        try:
            counted = 0
            for counted, _ in enumerate(keys, 1):
                if not counted % COUNT_SLICE:
                    time.sleep(0)
            return counted
        finally:
            held.release()
            self._uncounted.discard(held)

    def space_reclaimed(self, timeout_seconds: float) -> bool:
        """Whether the space of every ledger deleted so far is given back
        within `timeout_seconds` (waits for it until then)."""
        return self._reclaimer.wait_until_idle(timeout_seconds)

    @_locked
    def _reclaim_space(self, ledger_ids: list[LedgerId]) -> None:
        """Give deleted ledgers' space back, once for all of them: flushing
        the memtables retires the WAL that still holds their entries,
        compaction drops them from the SST files. Compacting the bottom level
        too drops the deletes themselves: a file holding only them would
        otherwise be moved down as it is and stay, one or two SST files (and
        open descriptors) more per deleted ledger. Both release the
        interpreter, and nothing else waits for them (SpaceReclaimer).

        Large entries live in value files that compaction leaves as they are;
        a value file goes once no SST file points into it. So for these
        compactions only, the value files' garbage collection is on, for every
        file: the entries of live ledgers that the compacted SST files point
        to are copied to new value files, and the old files, holding the
        deleted ledgers' entries, go."""
        if "_db" not in self.__dict__:
            return  # no database open (a reopen failed): nothing to give back now
        self._entries.flush()
        self._ledgers.flush()
        down_to_the_bottom = CompactOptions()
        down_to_the_bottom.set_bottommost_level_compaction(BottommostLevelCompaction.force_optimized())
        self._entries.set_options(_COLLECT_VALUE_FILES)
        try:
            for ledger_id in ledger_ids:
                prefix = ledger_id.key
                self._entries.compact_range(prefix, prefix + b"\xff" * 8, down_to_the_bottom)
                self._ledgers.compact_range(prefix, prefix + b"\x00", down_to_the_bottom)
        finally:
            self._entries.set_options(_LEAVE_VALUE_FILES)


# RocksDB's options for value files' garbage collection, on (every file, however new) and off.
_COLLECT_VALUE_FILES = {"enable_blob_garbage_collection": "true", "blob_garbage_collection_age_cutoff": "1.0"}
_LEAVE_VALUE_FILES = {"enable_blob_garbage_collection": "false"}


class DamagedJournal(DataLoss):
    """RocksDB found a bad record before the end of a WAL file: replaying past
    it is impossible, and stopping there would lose acknowledged entries."""

    def __init__(self, path: Path, rocksdb_lines: list[str], error: str) -> None:
        self.wal_files = sorted({line.split(": dropping", 1)[0] for line in rocksdb_lines if ": dropping" in line})
        super().__init__(
            f"the journal of {path} (RocksDB's write-ahead log) is damaged before its end: "
            f"{'; '.join(rocksdb_lines)} ({error}). Replaying stops at the damage, so the entries recorded "
            "after it, which this bookie acknowledged, would be lost",
            Reason.STORAGE_ERROR,
        )


WAL_BLOCK_BYTES = 32 * 1024
WAL_HEADER_BYTES = 7  # crc(4) | length(2) | type(1), RocksDB's log format (recycled WAL files are not used)
_WAL_RECORD_ENDS = (1, 4)  # kFullType, kLastType: a fragment that ends a write batch
_WAL_DROP = re.compile(r"\] ([^\]\n]+\.log: dropping .*)")  # "... [db/db_impl_open.cc:N] <path>.log: dropping ..."


def torn_wal_tails(path: Path) -> list[str]:
    """WAL files whose last bytes are not a whole record, as a write torn by a
    crash leaves them. RocksDB drops such a tail without a word in tolerate
    mode, so the bookie reads the framing itself (not the checksums) to say so."""
    found: list[str] = []
    for wal in sorted(path.glob("*.log")):
        try:
            data = wal.read_bytes()
        except OSError:
            continue
        whole = wal_whole_records_end(data)
        if whole < len(data):
            found.append(f"{wal}: the last {len(data) - whole} bytes are not a whole record (a write torn by a crash)")
    return found


def wal_whole_records_end(data: bytes) -> int:
    """The offset just past the last whole write batch of a WAL file's bytes."""
    offset = whole = 0
    while offset + WAL_HEADER_BYTES <= len(data):
        left_in_block = WAL_BLOCK_BYTES - offset % WAL_BLOCK_BYTES
        if left_in_block < WAL_HEADER_BYTES:  # the block's zero trailer
            if whole == offset:
                whole += left_in_block
            offset += left_in_block
            continue
        _, length, kind = struct.unpack_from("<IHB", data, offset)
        end = offset + WAL_HEADER_BYTES + length
        if kind == 0 or length > left_in_block - WAL_HEADER_BYTES or end > len(data):
            break
        offset = end
        if kind in _WAL_RECORD_ENDS:
            whole = offset
    return whole


def wal_recovery_lines(path: Path) -> list[str]:
    """What RocksDB's last open says it dropped while replaying the WAL (from
    its info LOG, which each open starts afresh): "<file>.log: dropping N
    bytes; Corruption: ..." and "Point in time recovered to log #N seq #M"."""
    try:
        text = (path / "LOG").read_text(errors="replace")
    except OSError:
        return []
    lines = [match.group(1) for match in _WAL_DROP.finditer(text)]
    if lines:
        lines += [line.split("] ")[-1].strip() for line in text.splitlines() if "Point in time recovered" in line]
    return lines
