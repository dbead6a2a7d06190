"""The bookie's domain logic: validate requests against entry headers and
ledger state, store through the group committer, read back, watch the disk.
No grpc here."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from quire_api.errors import (
    DataLoss,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    QuireError,
    Reason,
    ResourceExhausted,
)
from quire_api.ids import LedgerId
from quire_bookie.disk import DiskUsage, ReadOnlyPolicy, measure
from quire_bookie.faults import FaultyStore, StorageFaults
from quire_bookie.journal import AddMessage, FlushStats, GroupCommitter
from quire_bookie.ledger_states import LedgerStates
from quire_bookie.storage import (
    LARGE_ENTRY_BYTES,
    NO_ENTRY,
    CheckedEntries,
    EntriesToCheck,
    EntryStore,
    LedgerState,
    Stripes,
    StripesChecked,
)
from quire_common.deferred_histogram import deferred_histogram
from quire_common.entry import header_ids_and_digest
from quire_common.memory import WORTH_GIVING_BACK_BYTES, give_back_free_memory
from quire_common.tasks import cancel_and_wait
from quire_common.telemetry import duration_histogram, meter, record_sample

T = TypeVar("T")

log = logging.getLogger(__name__)
_meter = meter("quire.bookie")
_add_latency = duration_histogram(
    _meter,
    "quire.bookie.add.duration",
    "Per group commit: from the arrival of its oldest add to the synced write (the longest an add of it waited)",
)
_sync_latency = duration_histogram(_meter, "quire.bookie.sync.duration", "One group commit: synced write of a batch")
_batch_entries = deferred_histogram(
    _meter, "quire.bookie.group_commit.entries", "{entry}", "Entries in one synced batch"
)

LOAD_WINDOW_SECONDS = 60.0
# Entry ids one FindMissingEntries or CheckEntries call may ask about (about 0.5 MB of request).
MAX_CHECKED_ENTRIES = 65_536
# LAC writes one WriteLastAddConfirmedBatch call may carry.
MAX_LAC_WRITES = 10_000


@dataclass(frozen=True)
class BookieSettings:
    """The storage engine's limits; BookieConfig fills them from the environment."""

    max_entry_bytes: int = 5 * 1024 * 1024
    max_read_bytes: int = 4 * 1024 * 1024
    max_read_entries: int = 10_000
    cached_ledger_states: int = 10_000  # ledger states kept in memory (ledger_states.py)
    group_commit_max_bytes: int = 4 * 1024 * 1024
    group_commit_max_delay_seconds: float = 0.0
    sync: bool = True
    capacity_bytes: int = 0  # 0: the filesystem's size
    read_only: ReadOnlyPolicy = field(default_factory=ReadOnlyPolicy)
    disk_check_interval_seconds: float = 5.0
    idle_flush_seconds: float = 60.0  # writes quiet this long: memtables flushed, memory given back (0: never)
    max_long_poll_seconds: float = 30.0
    verify_digests: bool = True  # check CRC32/CRC32C digests of incoming entries
    entry_compression: str = "none"  # RocksDB's compression of stored entries (storage.entry_options)
    large_entry_bytes: int = LARGE_ENTRY_BYTES  # entries this large and larger in value files (0: none)
    direct_io_flushes: bool = True  # flushes and compactions bypass the page cache, where the disk allows
    # Fault injection for tests and drills only: every synced write takes this much longer.
    fault_sync_delay_seconds: float = 0.0
    fault_storage: StorageFaults = field(default_factory=StorageFaults)
    # The DSK-7 positive control only: replay a damaged WAL up to the damage and start without the rest.
    fault_unsafe_wal_point_in_time_recovery: bool = False
    # The PART-2 positive control only: a fenced ledger still takes normal adds.
    fault_unsafe_ignore_fence: bool = False


@dataclass(frozen=True)
class BookieInfo:
    total_disk_bytes: int
    free_disk_bytes: int
    used_bytes: int
    read_only: bool
    read_only_reason: str
    adds_per_second: float
    add_bytes_per_second: float
    sync_latency_ms: float
    sync_latency_p50_ms: float
    sync_latency_p99_ms: float
    sync_disabled: bool


@dataclass
class Counters:
    """Totals since start, which admin.py reports as OpenTelemetry counters
    when they are collected (nothing per read or commit beyond the increment:
    a counter's `add` cost a group commit as much as a histogram's record).
    Entries stored and the syncs are in the histograms above."""

    reads: int = 0
    rejected_adds: int = 0
    bytes_written: int = 0  # of entries stored
    bytes_read: int = 0  # of entries read (or verified, by a scrub's check)


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, round(fraction * len(sorted_values) + 0.5 - 1e-9))
    return sorted_values[min(rank, len(sorted_values)) - 1]


class Bookie:
    def __init__(self, data_dir: Path, settings: BookieSettings | None = None) -> None:
        self.data_dir = data_dir
        self.settings = settings or BookieSettings()
        self.counters = Counters()
        self.read_only_reason = ""
        self._read_only_listeners: list[Callable[[bool, str], None]] = []
        self._disk: DiskUsage | None = None
        store = EntryStore(
            data_dir / "rocksdb",
            sync=self.settings.sync,
            entry_compression=self.settings.entry_compression,
            large_entry_bytes=self.settings.large_entry_bytes,
            direct_io_flushes=self.settings.direct_io_flushes,
            unsafe_point_in_time_recovery=self.settings.fault_unsafe_wal_point_in_time_recovery,
        )
        # Test-only storage faults (docs/faults.md); a plain EntryStore otherwise.
        self._store: EntryStore = (
            FaultyStore(store, self.settings.fault_storage) if self.settings.fault_storage.any else store  # type: ignore[assignment]
        )
        self._recent_flushes: deque[FlushStats] = deque(maxlen=10_000)
        self._lac_moved: dict[LedgerId, asyncio.Event] = {}
        self._lac_waiters: dict[LedgerId, int] = {}  # long polls waiting on each event
        self._committer = GroupCommitter(
            self._store,
            LedgerStates(self._store, self.settings.cached_ledger_states),
            max_batch_bytes=self.settings.group_commit_max_bytes,
            max_delay_seconds=self.settings.group_commit_max_delay_seconds,
            fault_sync_delay_seconds=self.settings.fault_sync_delay_seconds,
            fences_hold=not self.settings.fault_unsafe_ignore_fence,
            on_flush=self._flushed,
            on_lac_moved=self._signal_lac,
            check_add=self._check_add,
            check_entry=self.check_entry,
        )
        self._disk_task: asyncio.Task[None] | None = None
        self._idle_flush_task: asyncio.Task[None] | None = None
        self._shutdown_listeners: list[Callable[[], None]] = []

    def add_shutdown_listener(self, listener: Callable[[], None]) -> None:
        self._shutdown_listeners.append(listener)

    def remove_shutdown_listener(self, listener: Callable[[], None]) -> None:
        if listener in self._shutdown_listeners:
            self._shutdown_listeners.remove(listener)

    def begin_shutdown(self) -> None:
        """Tell long-lived calls (AddStream calls) to wind down, before
        the server waits for in-flight calls to finish."""
        for listener in list(self._shutdown_listeners):
            listener()

    @property
    def read_only(self) -> bool:
        return bool(self.read_only_reason)

    async def start(self) -> None:
        await self.check_disk()
        self._committer.start()
        self._disk_task = asyncio.create_task(self._watch_disk(), name="disk-check")
        self._idle_flush_task = asyncio.create_task(self._flush_when_quiet(), name="idle-flush")

    async def close(self) -> None:
        """Finish and sync every queued add, then close RocksDB."""
        await cancel_and_wait(self._idle_flush_task)
        await cancel_and_wait(self._disk_task)
        await self._committer.stop()
        self._store.close()

    # -- read-only mode --------------------------------------------------------

    def on_read_only_change(self, listener: Callable[[bool, str], None]) -> None:
        """Call `listener(read_only, reason)` whenever the mode flips."""
        self._read_only_listeners.append(listener)

    async def check_disk(self) -> DiskUsage:
        """Measure the disk and turn read-only or writable as the policy says."""
        disk = await asyncio.to_thread(measure, self.data_dir, self.settings.capacity_bytes)
        self._disk = disk
        record_sample("bookie_info", free_bytes=disk.free_bytes, total_bytes=disk.total_bytes)
        reason = self.settings.read_only.decide(self.read_only_reason, disk)
        if bool(reason) != self.read_only:
            if reason:
                log.warning("bookie turns read-only: %s", reason)
            else:
                log.info("bookie turns writable again: disk usage %.1f%%", 100 * disk.usage)
            self.read_only_reason = reason
            for listener in self._read_only_listeners:
                listener(bool(reason), reason)
        else:
            self.read_only_reason = reason  # same mode; the figures in the reason may differ
        return disk

    async def _watch_disk(self) -> None:
        while True:
            await asyncio.sleep(self.settings.disk_check_interval_seconds)
            try:
                await self.check_disk()
            except OSError as exc:
                log.error("disk check failed: %s", exc)

    async def _flush_when_quiet(self) -> None:
        """Once no write has come for `idle_flush_seconds`, flush the
        memtables and give their memory back to the OS. Written entries
        otherwise stay in memory until the next 64 MiB fill a memtable,
        which an idle bookie never does: its RSS stayed near its high-water
        mark, and a restart replayed all of that WAL."""
        quiet_for, store = self.settings.idle_flush_seconds, self._store
        if quiet_for <= 0:
            return
        last_sequence = -1
        while True:
            await asyncio.sleep(quiet_for)
            try:
                # Off the loop: the store's lock may be held by a delete's compaction.
                sequence, held = await asyncio.to_thread(lambda: (store.write_sequence(), store.memtable_bytes()))
                if sequence == last_sequence and held >= WORTH_GIVING_BACK_BYTES:
                    await asyncio.to_thread(store.flush_memtables)
                    await asyncio.to_thread(give_back_free_memory)
                    log.info("writes quiet for %.0fs: memtables flushed, their memory given back", quiet_for)
                last_sequence = sequence
            except Exception as exc:  # a failed store is reported by the writes; try again next round
                log.warning("flushing idle memtables failed: %s", exc)

    # -- writes ----------------------------------------------------------------

    async def add_entries(
        self, ledger_id: LedgerId, master_key: bytes, entries: list[tuple[int, bytes]], recovery: bool
    ) -> list[int]:
        """Store a batch of packed entries durably; all or nothing."""
        await (await self.start_add(ledger_id, master_key, entries, recovery))
        return [entry_id for entry_id, _ in entries]

    async def start_add(
        self, ledger_id: LedgerId, master_key: bytes, entries: list[tuple[int, bytes]], recovery: bool
    ) -> asyncio.Future[None]:
        """Check an add and queue it for the next synced write; the returned
        future resolves once the add is durable (or fails with why it was
        refused). Raises at once for an add that fails its checks."""
        checked = self._check_add(ledger_id, master_key, entries, recovery)
        return await self._committer.start_add(ledger_id, master_key, checked, recovery)

    async def queue_add_message(self, message: AddMessage) -> None:
        """Queue one AddStream message; the writer thread checks its adds
        (`_check_add`, then the ledger's state) and writes those that pass in
        its next synced write, then its stream is given the answer."""
        await self._committer.take_message(message)

    def _check_add(
        self, ledger_id: LedgerId, master_key: bytes, entries: list[tuple[int, bytes]], recovery: bool
    ) -> list[tuple[int, int, bytes]]:
        """The add's entries as (id, LAC from the header, packed bytes) once
        each passes `check_entry`; an add refused here is counted (rejected_adds)."""
        if not entries:
            self.counters.rejected_adds += 1
            raise InvalidArgument("an add carries no entries")
        check_entry = self.check_entry
        return [
            (entry_id, check_entry(ledger_id, master_key, entry_id, data, recovery), data) for entry_id, data in entries
        ]

    def check_entry(
        self, ledger_id: LedgerId, master_key: bytes, entry_id: int, data: bytes, recovery: bool = False
    ) -> int:
        """The LAC the entry's header carries, once the entry passes the checks
        that need no ledger state (the writer thread runs this for every entry
        it is sent); a refusal is counted (rejected_adds) and raised."""
        try:
            if self.read_only_reason and not recovery:  # read_only's test, without its call
                raise FailedPrecondition(
                    f"bookie is read-only ({self.read_only_reason}); write elsewhere", Reason.BOOKIE_READ_ONLY
                )
            if len(master_key) != MASTER_KEY_BYTES:  # check_master_key_length's test, without its call
                check_master_key_length(master_key)
            settings = self.settings
            if len(data) > settings.max_entry_bytes:
                raise ResourceExhausted(
                    f"entry {entry_id} is {len(data)} bytes; this bookie takes at most {settings.max_entry_bytes}",
                    Reason.ENTRY_TOO_LARGE,
                )
            header_scope, header_ledger, header_entry, lac, digest_matches = header_ids_and_digest(data)
            if header_scope != ledger_id[0] or header_ledger != ledger_id[1] or header_entry != entry_id:
                raise InvalidArgument(
                    f"entry header says ledger {LedgerId(header_scope, header_ledger)} entry {header_entry}, "
                    f"the request says ledger {ledger_id} entry {entry_id}",
                    Reason.ENTRY_HEADER_MISMATCH,
                )
            if entry_id < 0:
                raise InvalidArgument(f"entry id {entry_id} is negative")
            if settings.verify_digests and digest_matches is False:
                raise InvalidArgument(
                    f"entry {entry_id} of ledger {ledger_id} does not match its digest: "
                    "corrupted on the way in; nothing stored",
                    Reason.DIGEST_MISMATCH,
                )
            return lac
        except QuireError:
            self.counters.rejected_adds += 1
            raise

    async def fence(self, ledger_id: LedgerId, master_key: bytes) -> LedgerState:
        check_master_key_length(master_key)
        return await self._committer.fence(ledger_id, master_key)

    async def write_last_add_confirmed(self, ledger_id: LedgerId, master_key: bytes, lac: int) -> LedgerState:
        check_master_key_length(master_key)
        if lac < NO_ENTRY:
            raise InvalidArgument(f"last_add_confirmed {lac} is below -1")
        return await self._committer.write_lac(ledger_id, master_key, lac)

    async def write_last_add_confirmed_batch(
        self, writes: list[tuple[LedgerId, bytes, int]]
    ) -> list[LedgerState | QuireError]:
        """Many ledgers' LAC writes, queued together so they share a sync;
        each answered on its own (its state, or why it was refused)."""
        if len(writes) > MAX_LAC_WRITES:
            raise InvalidArgument(f"{len(writes)} LAC writes in one call; at most {MAX_LAC_WRITES}")
        if len({ledger_id for ledger_id, _, _ in writes}) < len(writes):
            raise InvalidArgument("a ledger is listed more than once")
        for _, key, lac in writes:  # a malformed write refuses the call, as it would refuse WriteLastAddConfirmed
            check_master_key_length(key)
            if lac < NO_ENTRY:
                raise InvalidArgument(f"last_add_confirmed {lac} is below -1")
        return await self._committer.write_lacs(writes)

    async def delete_ledger(self, ledger_id: LedgerId) -> int:
        count = await self._committer.delete(ledger_id)
        log.info("deleted ledger %s (%d entries)", ledger_id, count)
        return count

    def ledger_ids(self) -> list[LedgerId]:
        """Every ledger this bookie holds state for."""
        return self._committer.states.ledger_ids()

    def ledger_count(self) -> int:
        """How many ledgers this bookie holds state for; safe to ask from another thread (a metric exporter's)."""
        return len(self._committer.states)

    @property
    def disk(self) -> DiskUsage:
        """The disk as of the last check (zeros before the first); safe to read from another thread."""
        return self._disk or DiskUsage(0, 0, 0)

    # -- reads -----------------------------------------------------------------

    async def _read_storage(self, ledger_id: LedgerId, read: Callable[..., T], *args: object) -> T:
        """Run a storage read off the event loop. Any failure of the read
        itself — an I/O error, or RocksDB finding a block whose checksum does
        not match (rocksdict raises a plain Exception, "Corruption: ...") — is
        this copy being unreadable, not the bookie being down: DATA_LOSS with
        STORAGE_ERROR, so a reader goes on to another replica and flags this
        one for repair."""
        try:
            return await asyncio.to_thread(read, *args)
        except QuireError:
            raise
        except Exception as exc:
            log.error("reading ledger %s from storage failed: %s", ledger_id, exc)
            raise DataLoss(
                f"ledger {ledger_id}: this bookie's storage could not read it ({exc})", Reason.STORAGE_ERROR
            ) from None

    def _state(self, ledger_id: LedgerId) -> LedgerState | None:
        return self._committer.states.get(ledger_id)

    async def read_entry(self, ledger_id: LedgerId, entry_id: int) -> tuple[int, bytes]:
        self.counters.reads += 1
        if entry_id < -1:
            raise InvalidArgument(f"entry id {entry_id} is negative (use -1 for the last entry)")
        if self._state(ledger_id) is None:
            raise NotFound(f"ledger {ledger_id} is not on this bookie", Reason.LEDGER_NOT_FOUND)
        if entry_id == -1:
            last = await self._read_storage(ledger_id, self._store.last_entry, ledger_id)
            if last is None:
                raise NotFound(f"ledger {ledger_id} has no entries on this bookie", Reason.ENTRY_NOT_FOUND)
            return last
        data = await self._read_storage(ledger_id, self._store.read, ledger_id, entry_id)
        if data is None:
            raise NotFound(f"entry {entry_id} of ledger {ledger_id} is not on this bookie", Reason.ENTRY_NOT_FOUND)
        self.counters.bytes_read += len(data)
        return entry_id, data

    async def read_entries(
        self, ledger_id: LedgerId, entry_ids: list[int], max_bytes: int = 0, max_entries: int = 0
    ) -> tuple[list[tuple[int, bytes]], list[int], bool]:
        """Entries found in request order, bounded by bytes and count (always
        at least the first found), ids missing, and whether a bound cut it."""
        self.counters.reads += 1
        if any(entry_id < 0 for entry_id in entry_ids):
            raise InvalidArgument("entry ids must not be negative")
        byte_limit = min(max_bytes or self.settings.max_read_bytes, self.settings.max_read_bytes)
        count_limit = min(max_entries or self.settings.max_read_entries, self.settings.max_read_entries)
        result = await self._read_storage(
            ledger_id, self._store.read_many, ledger_id, entry_ids, byte_limit, count_limit
        )
        self.counters.bytes_read += sum(len(data) for _, data in result[0])
        return result

    async def read_range(
        self, ledger_id: LedgerId, first: int, last: int, max_bytes: int = 0, max_entries: int = 0
    ) -> tuple[list[tuple[int, bytes]], list[int], bool]:
        """Stored entries first..last in id order, bounded like read_entries;
        the ids missing between the ones returned; whether a bound cut it."""
        self.counters.reads += 1
        if first < 0 or last < first:
            raise InvalidArgument(f"entry range {first}..{last} is empty or negative")
        byte_limit = min(max_bytes or self.settings.max_read_bytes, self.settings.max_read_bytes)
        count_limit = min(max_entries or self.settings.max_read_entries, self.settings.max_read_entries)
        result = await self._read_storage(
            ledger_id, self._store.read_range, ledger_id, first, last, byte_limit, count_limit
        )
        self.counters.bytes_read += sum(len(data) for _, data in result[0])
        return result

    async def find_missing_entries(self, ledger_id: LedgerId, entry_ids: list[int]) -> list[int]:
        """Which of `entry_ids` this bookie does not store (the scrub's
        question); keys are scanned, entry data is not returned."""
        if len(entry_ids) > MAX_CHECKED_ENTRIES:
            raise InvalidArgument(f"{len(entry_ids)} entry ids asked about; at most {MAX_CHECKED_ENTRIES} per call")
        if any(entry_id < 0 for entry_id in entry_ids):
            raise InvalidArgument("entry ids must not be negative")
        self.counters.reads += 1
        return await self._read_storage(ledger_id, self._store.missing, ledger_id, entry_ids)

    async def check_entries(self, ledgers: list[EntriesToCheck]) -> list[CheckedEntries]:
        """The scrub's question for many ledgers at once: what of each is
        missing here, and what of the entries to verify is stored damaged
        (checked here: no entry data leaves the bookie)."""
        asked = sum(len(entry_ids) + len(verify_ids) for _, entry_ids, verify_ids in ledgers)
        if asked > MAX_CHECKED_ENTRIES:
            raise InvalidArgument(f"{asked} entry ids asked about; at most {MAX_CHECKED_ENTRIES} per call")
        if len({ledger_id for ledger_id, _, _ in ledgers}) < len(ledgers):
            raise InvalidArgument("a ledger is listed more than once")
        if any(e < 0 for _, entry_ids, verify_ids in ledgers for e in (*entry_ids, *verify_ids)):
            raise InvalidArgument("entry ids must not be negative")
        self.counters.reads += 1
        found = await asyncio.to_thread(self._store.check, ledgers)
        self.counters.bytes_read += sum(f.bytes_verified for f in found)
        return found

    async def check_stripes(self, stripes: Stripes) -> StripesChecked:
        """check_entries for the packed question (what the scrub sends): a
        few numbers per ledger segment instead of each ledger's ids."""
        columns = (
            stripes.scope_ids,
            stripes.ledger_ids,
            stripes.first_entry_ids,
            stripes.last_entry_ids,
            stripes.ensemble_sizes,
            stripes.write_quorums,
            stripes.positions,
            stripes.verify_first_ids,
            stripes.verify_last_ids,
        )
        if len({len(column) for column in columns}) > 1:
            raise InvalidArgument("the stripes' lists must all have one element per row")
        if any(first < 0 for first in stripes.first_entry_ids):
            raise InvalidArgument("entry ids must not be negative")
        for size, quorum, position in zip(
            stripes.ensemble_sizes, stripes.write_quorums, stripes.positions, strict=True
        ):
            if not 1 <= quorum <= size or position >= size:
                raise InvalidArgument(
                    f"a row's write quorum {quorum} and position {position} do not fit an ensemble of {size}"
                )
        # Bounded by the ids the ranges span (every one may be looked at), not by those held.
        asked = sum(
            last - first + 1
            for first, last in zip(stripes.first_entry_ids, stripes.last_entry_ids, strict=True)
            if last >= first
        )
        if asked > MAX_CHECKED_ENTRIES:
            raise InvalidArgument(f"the rows span {asked} entry ids; at most {MAX_CHECKED_ENTRIES} per call")
        self.counters.reads += 1
        found = await asyncio.to_thread(self._store.check_stripes, stripes)
        self.counters.bytes_read += found.bytes_verified
        return found

    def last_add_confirmed(self, ledger_id: LedgerId) -> tuple[int, int, bool]:
        """(LAC, last entry id, fenced) as this bookie knows them."""
        state = self._state(ledger_id)
        if state is None:
            return NO_ENTRY, NO_ENTRY, False
        return state.lac, state.last_entry_id, state.fenced

    async def wait_last_add_confirmed(
        self, ledger_id: LedgerId, previous_lac: int, timeout_seconds: float
    ) -> tuple[int, int, bool]:
        """Long poll: (LAC, last entry id, fenced) once the LAC is above
        `previous_lac`, or as they stand when the timeout ends."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(timeout_seconds, 0.0), self.settings.max_long_poll_seconds)
        while True:
            current = self.last_add_confirmed(ledger_id)
            remaining = deadline - loop.time()
            if current[0] > previous_lac or remaining <= 0:
                return current
            moved = self._lac_moved.setdefault(ledger_id, asyncio.Event())
            self._lac_waiters[ledger_id] = self._lac_waiters.get(ledger_id, 0) + 1
            try:
                await asyncio.wait_for(moved.wait(), remaining)
            except TimeoutError:
                return self.last_add_confirmed(ledger_id)
            finally:
                self._lac_waiters[ledger_id] -= 1
                if not self._lac_waiters[ledger_id]:
                    # The last waiter is gone: forget the event, or a ledger whose LAC
                    # never moves again (closed, deleted) would keep it for good.
                    del self._lac_waiters[ledger_id]
                    if self._lac_moved.get(ledger_id) is moved:
                        del self._lac_moved[ledger_id]

    def _signal_lac(self, ledger_id: LedgerId) -> None:
        moved = self._lac_moved.pop(ledger_id, None)
        if moved is not None:
            moved.set()

    # -- info ------------------------------------------------------------------

    def _flushed(self, stats: FlushStats) -> None:
        # Per group commit, not per add: a record per add cost each entry as much as its fsync's share.
        if stats.longest_add_seconds:
            _add_latency.record(stats.longest_add_seconds)
        _sync_latency.record(stats.sync_seconds)
        _batch_entries.record(stats.entries)
        self.counters.bytes_written += stats.size_bytes
        self._recent_flushes.append(stats)

    def info(self) -> BookieInfo:
        """Disk as of the last check, and load over the last minute."""
        disk = self.disk
        now = time.time()
        recent = [f for f in self._recent_flushes if now - f.at <= LOAD_WINDOW_SECONDS]
        syncs_ms = sorted(1000 * f.sync_seconds for f in recent)
        return BookieInfo(
            total_disk_bytes=disk.total_bytes,
            free_disk_bytes=disk.free_bytes,
            used_bytes=disk.used_bytes,
            read_only=self.read_only,
            read_only_reason=self.read_only_reason,
            adds_per_second=sum(f.entries for f in recent) / LOAD_WINDOW_SECONDS,
            add_bytes_per_second=sum(f.size_bytes for f in recent) / LOAD_WINDOW_SECONDS,
            sync_latency_ms=sum(syncs_ms) / len(syncs_ms) if syncs_ms else 0.0,
            sync_latency_p50_ms=percentile(syncs_ms, 0.50),
            sync_latency_p99_ms=percentile(syncs_ms, 0.99),
            sync_disabled=not self.settings.sync,
        )


MASTER_KEY_BYTES = 20  # a SHA-1


def check_master_key_length(master_key: bytes) -> None:
    if len(master_key) != MASTER_KEY_BYTES:
        raise InvalidArgument(f"master_key must be {MASTER_KEY_BYTES} bytes (SHA-1), got {len(master_key)}")
