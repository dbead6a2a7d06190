"""Durable group commit.

Every state-changing operation (add, fence, explicit LAC, delete) goes through one
queue to one writer thread, so operations take effect in arrival order. The
writer takes what is queued (up to a byte bound), checks each operation
against the ledger states as they stand at that point, writes the accepted
ones in ONE synced WriteBatch, and only then hands their outcomes back to the
event loop, which resolves their futures. While a sync runs new operations
queue up and share the next one: that is where throughput comes from, and no
add is ever acknowledged before a sync covering it. A time bound
(max_delay_seconds) lets the writer wait a little for more work before syncing
a small batch; 0 syncs as soon as the previous sync ends.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, cast

from opentelemetry.util.types import AttributeValue

from quire_api.errors import (
    FailedPrecondition,
    PermissionDenied,
    QuireError,
    Reason,
    ResourceExhausted,
    Unavailable,
)
from quire_api.ids import LedgerId
from quire_bookie.ledger_states import LedgerStates
from quire_bookie.storage import EntryStore, LedgerState, is_disk_full
from quire_common.telemetry import tracer, tracing_enabled
from quire_common.thread_names import name_native_thread

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

NO_STATE = LedgerState()


class StreamedAdd(NamedTuple):
    """One add of an AddStream message, as decoded on the writer thread (a
    writer's usual add is decoded as a OneEntryAdd instead, below)."""

    add_id: int
    ledger_id: LedgerId
    master_key: bytes
    entries: list[tuple[int, bytes]]
    recovery: bool
    refused: QuireError | None = None  # found invalid while decoding: answered with this, not stored
    traceparent: str = ""  # the writer's span, when it traces


# The usual add, in a plain tuple: one entry, of a ledger the stream named before, no recovery,
# no trace. (add id, ledger, master key, entry id, packed bytes): its first three fields are
# StreamedAdd's, so `add[0]` is the id of either. A codec decodes such an add into this form
# and the writer checks and stages it without a StreamedAdd, a list of its entries or a checked
# list: objects that cost each add about 4,500 instructions of 104,000 (docs/decisions.md, "The
# single pass, looked at again").
OneEntryAdd = tuple[int, LedgerId, bytes, int, bytes]
DecodedAdd = StreamedAdd | OneEntryAdd


def entries_of(add: DecodedAdd) -> list[tuple[int, bytes]]:
    """An add's entries as (id, packed bytes), whichever its form."""
    if isinstance(add, StreamedAdd):
        return add.entries
    return [(add[3], add[4])]


class AddMessageStream(Protocol):
    """The AddStream a message came on (add_stream.py). The writer thread
    decodes the message and builds its answer; the event loop delivers it."""

    def decode(self, message: object) -> list[DecodedAdd]: ...

    def answer(self, message: AddMessage, adds: list[DecodedAdd], errors: list[QuireError | None]) -> bytes: ...

    def deliver(self, answer: bytes) -> None: ...

    def broken(self, error: BaseException) -> None: ...


@dataclass(slots=True)
class AddMessage:
    """The adds of one AddStream message: decoded, checked, written and
    answered together on the writer thread, with no object per add on the
    event loop."""

    stream: AddMessageStream = field(repr=False)
    message: object = field(repr=False)
    size_bytes: int
    received_at: float  # time.perf_counter() when it arrived


# Checks an add before its ledger's state rules: (ledger, master key, entries as (id, packed
# bytes), recovery) -> entries as (id, LAC from the header, packed bytes), or a QuireError.
AddCheck = Callable[[LedgerId, bytes, list[tuple[int, bytes]], bool], list[tuple[int, int, bytes]]]
# The same checks of one entry of an add that is not a recovery's: (ledger, master key, entry
# id, packed bytes) -> the LAC its header carries, or a QuireError.
EntryCheck = Callable[[LedgerId, bytes, int, bytes], int]


@dataclass
class AddOp:
    ledger_id: LedgerId
    master_key: bytes
    entries: list[tuple[int, int, bytes]]  # (entry id, lac from header, packed bytes)
    recovery: bool
    future: asyncio.Future[None] = field(repr=False)
    received_at: float = 0.0  # time.perf_counter() when the add arrived (its latency, per flush)
    size_bytes: int = field(init=False)  # counted once: the queue's bounds look at it several times

    def __post_init__(self) -> None:
        self.size_bytes = sum(len(data) for _, _, data in self.entries)


@dataclass
class FenceOp:
    ledger_id: LedgerId
    master_key: bytes
    future: asyncio.Future[LedgerState] = field(repr=False)
    size_bytes: int = 0


@dataclass
class LacOp:
    """An explicit LAC from the writer (WriteLastAddConfirmed)."""

    ledger_id: LedgerId
    master_key: bytes
    last_add_confirmed: int
    future: asyncio.Future[LedgerState] = field(repr=False)
    size_bytes: int = 0


@dataclass
class DeleteOp:
    """Remove a ledger's entries and state, in queue order with its adds."""

    ledger_id: LedgerId
    # Once written: the call that counts the entries the ledger held (EntryStore.delete_ledgers).
    future: asyncio.Future[Callable[[], int]] = field(repr=False)
    size_bytes: int = 0


@dataclass
class LacWrites:
    """Many ledgers' explicit LACs (WriteLastAddConfirmedBatch), applied
    together with one future for all: each answered with its ledger's state
    or why it was refused, in order."""

    writes: list[tuple[LedgerId, bytes, int]]  # (ledger, master key, LAC)
    future: asyncio.Future[list[LedgerState | QuireError]] = field(repr=False)
    size_bytes: int = 0


Op = AddOp | AddMessage | FenceOp | LacOp | LacWrites | DeleteOp


def _count_for_nobody(count: Callable[[], int], ledger_id: LedgerId) -> None:
    """Count a deleted ledger whose caller gave up, only to let go of its view."""
    try:
        count()
    except Exception as exc:  # the store was reopened meanwhile: the view is let go already
        log.info("the count of deleted ledger %s was not taken: %s", ledger_id, exc)


def check_master_key(ledger_id: LedgerId, state: LedgerState, master_key: bytes) -> None:
    if state.master_key and not hmac.compare_digest(state.master_key, master_key):
        raise PermissionDenied(f"wrong master key for ledger {ledger_id}", Reason.WRONG_PASSWORD)


def check_not_fenced(ledger_id: LedgerId, state: LedgerState) -> None:
    if state.fenced:
        raise FailedPrecondition(f"ledger {ledger_id} is fenced: a recovery has taken it over", Reason.LEDGER_FENCED)


def apply(op: AddOp | FenceOp | LacOp, state: LedgerState, fences_hold: bool = True) -> LedgerState:
    """The ledger state after `op`, or a QuireError saying why `op` is refused.
    Pure: the writer applies it to states as they will be after the batch.
    `fences_hold=False` is a test's positive control only: normal adds pass a fence."""
    state = with_master_key(op.ledger_id, state, op.master_key)
    if isinstance(op, FenceOp):
        return state._replace(fenced=True)
    if isinstance(op, LacOp):
        return apply_lac(op.ledger_id, op.last_add_confirmed, state)
    return apply_add(op.ledger_id, op.entries, op.recovery, state, fences_hold)


def with_master_key(ledger_id: LedgerId, state: LedgerState, master_key: bytes) -> LedgerState:
    """`state` once `master_key` is checked against it (the first one sets it)."""
    check_master_key(ledger_id, state, master_key)
    return state if state.master_key else state._replace(master_key=master_key)


def apply_lac(ledger_id: LedgerId, last_add_confirmed: int, state: LedgerState) -> LedgerState:
    """`apply` for an explicit LAC, once `with_master_key` has checked its key."""
    check_not_fenced(ledger_id, state)
    return state._replace(explicit_lac=max(state.explicit_lac, last_add_confirmed))


def apply_add(
    ledger_id: LedgerId,
    entries: list[tuple[int, int, bytes]],
    recovery: bool,
    state: LedgerState,
    fences_hold: bool = True,
) -> LedgerState:
    """`apply` for an add, once `with_master_key` has checked its key."""
    if not recovery and fences_hold:
        check_not_fenced(ledger_id, state)
    return with_entries(state, entries)


def with_entries(state: LedgerState, entries: list[tuple[int, int, bytes]]) -> LedgerState:
    """`state` once `entries` (id, LAC from the header, bytes) are stored: one
    state update per add, not per entry. (The writer's fast path moves a
    one-entry add's state itself, in _stage_message.)"""
    top, top_lac = entries[0][0], entries[0][1]
    for entry_id, lac, _ in entries:
        if entry_id > top:
            top = entry_id
        if lac > top_lac:
            top_lac = lac
    return state.with_entry(top, top_lac)


@dataclass
class FlushStats:
    """One synced write, for GetBookieInfo and metrics."""

    at: float
    entries: int
    size_bytes: int
    sync_seconds: float
    # From the arrival of the batch's oldest add to its sync: the longest an add of it waited.
    longest_add_seconds: float = 0.0


# Deletes synced and compacted together: concurrent deletes share one synced
# write and one memtable flush, while a burst still lets adds in between.
MAX_DELETES_PER_BATCH = 64

_STOP = None  # put on the inbox by stop(): everything queued before it is written first


@dataclass(slots=True)
class _Written:
    """What the writer thread hands back to the event loop for one batch."""

    outcomes: list[tuple[Op, object]]  # (op, its result or the QuireError refusing it)
    released_bytes: int  # of the batch's ops: room for producers again
    lac_moved: list[LedgerId] = field(default_factory=list)
    stats: FlushStats | None = None


@dataclass(slots=True)
class _Staged:
    """One batch checked and staged for one write (GroupCommitter._stage)."""

    pending: dict[LedgerId, LedgerState]  # states as they will be after this batch
    # The ledgers whose stored record this batch changes (not just their entries).
    records: set[LedgerId]
    writes: list[tuple[LedgerId, int, bytes]]  # the entries to store
    refused: list[tuple[Op, object]]  # ops refused while staging, with their refusals
    accepted: list[tuple[Op, LedgerState]]  # single ops accepted, with their states after them
    # Per message: its adds and, per add, None while it is in this write, or its refusal.
    messages: list[tuple[AddMessage, list[DecodedAdd], list[QuireError | None]]]
    # Per batch of explicit LACs: each write's state after this batch, or its refusal.
    lac_writes: list[tuple[LacWrites, list[LedgerState | QuireError]]]
    oldest: float  # arrival of the batch's oldest add (0: none)

    def settled(self) -> list[tuple[Op, object]]:
        """Every op's outcome once the write is stored (or nothing was to be)."""
        answered: list[tuple[Op, object]] = [
            (op, op.stream.answer(op, adds, errors)) for op, adds, errors in self.messages
        ]
        if not (self.refused or self.accepted or self.lac_writes):
            return answered  # a loaded bookie's usual batch: AddStream messages alone
        outcomes = list(self.refused)
        outcomes.extend((op, None if isinstance(op, AddOp) else state) for op, state in self.accepted)
        outcomes.extend(answered)
        outcomes.extend(self.lac_writes)
        return outcomes

    def failed(self, failure: QuireError) -> list[tuple[Op, object]]:
        """Every op's outcome when the write failed: what staging refused
        keeps its refusal, the rest fail with `failure`."""
        outcomes = list(self.refused)
        outcomes.extend((op, failure) for op, _ in self.accepted)
        for op, adds, errors in self.messages:
            outcomes.append((op, op.stream.answer(op, adds, [e or failure for e in errors])))
        for lacs, results in self.lac_writes:
            outcomes.append((lacs, [r if isinstance(r, QuireError) else failure for r in results]))
        return outcomes


class GroupCommitter:
    """The bookie's one writer. Producers on the event loop put operations on
    an inbox (one put per message's adds); a writer thread takes everything
    queued, checks each operation against the ledger states as they will be
    after the batch, writes the accepted ones in one synced WriteBatch, updates
    the states and hands the outcomes back to the loop in one call, where
    futures are resolved. The loop only queues and answers: no flusher task,
    no future per flush, no thread hand-off per batch besides that one call.

    The thread alone changes `states` (ledger_states.py); the loop only reads
    single ledgers from it, which the GIL keeps consistent."""

    def __init__(
        self,
        store: EntryStore,
        states: LedgerStates,
        *,
        max_batch_bytes: int = 4 * 1024 * 1024,
        max_delay_seconds: float = 0.0,
        fault_sync_delay_seconds: float = 0.0,
        fences_hold: bool = True,
        max_queued_bytes: int = 64 * 1024 * 1024,
        on_flush: Callable[[FlushStats], None] | None = None,
        on_lac_moved: Callable[[LedgerId], None] | None = None,
        check_add: AddCheck | None = None,
        check_entry: EntryCheck | None = None,
    ) -> None:
        self._store = store
        # For AddMessages: the bookie's checks, run on the writer thread (check_entry for the
        # adds decoded as OneEntryAdds).
        self._check_add = check_add
        self._check_entry = check_entry
        self.states = states
        self._max_batch_bytes = max_batch_bytes
        self._max_delay_seconds = max_delay_seconds
        self._fault_sync_delay_seconds = fault_sync_delay_seconds
        self._fences_hold = fences_hold  # False only as a test's positive control
        self._on_flush = on_flush
        self._on_lac_moved = on_lac_moved
        self._traced = tracing_enabled()
        # Event loop side: bytes queued and not yet written, bounded; producers wait for room.
        self._inbox: queue.SimpleQueue[list[Op] | None] = queue.SimpleQueue()
        self._queued_bytes = 0
        self._max_queued_bytes = max_queued_bytes
        self._space_freed = asyncio.Event()  # set whenever room is given back (or on stop)
        self._waiting_for_space = 0  # producers waiting in _enqueue_many
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Future[None] | None = None
        # Writer thread side.
        self._backlog: deque[Op] = deque()
        self._backlog_bytes = 0
        self._stop_seen = False
        # Set when a write failed: RocksDB refuses every later write until reopened.
        self._store_failed = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        self._thread = threading.Thread(target=self._work, name="bookie-writer", daemon=True)
        self._thread.start()
        name_native_thread(self._thread, self._thread.name)

    async def stop(self) -> None:
        """Refuse new operations, write and sync everything already queued,
        then end the writer thread."""
        first = not self._closing
        self._closing = True
        self._space_freed.set()  # producers still waiting for space learn we are closing
        if self._thread is None or self._stopped is None:
            return
        if first:
            self._inbox.put(_STOP)
        await asyncio.shield(self._stopped)
        self._thread.join()

    async def _enqueue(self, op: Op) -> None:
        await self._enqueue_many([op])

    async def _enqueue_many(self, ops: Sequence[Op]) -> None:
        """Queue `ops` in order, waiting for space once for all of them (one
        message's adds arrive together, and go together)."""
        size = sum(op.size_bytes for op in ops)
        full = self._queued_bytes and self._queued_bytes + size > self._max_queued_bytes
        if full or self._waiting_for_space:  # wait behind those already waiting, in order
            self._waiting_for_space += 1
            try:
                while not (
                    self._closing or self._queued_bytes == 0 or self._queued_bytes + size <= self._max_queued_bytes
                ):
                    self._space_freed.clear()
                    await self._space_freed.wait()
            finally:
                self._waiting_for_space -= 1
        if self._closing:
            raise Unavailable("the bookie is shutting down; retry on another bookie", Reason.BOOKIE_UNAVAILABLE)
        self._queued_bytes += size
        self._inbox.put(list(ops))

    async def add(
        self, ledger_id: LedgerId, master_key: bytes, entries: list[tuple[int, int, bytes]], recovery: bool
    ) -> None:
        await (await self.start_add(ledger_id, master_key, entries, recovery))

    async def start_add(
        self, ledger_id: LedgerId, master_key: bytes, entries: list[tuple[int, int, bytes]], recovery: bool
    ) -> asyncio.Future[None]:
        """Queue an add (waiting only for queue space) and return the future
        that resolves once a synced write covers it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._enqueue(AddOp(ledger_id, master_key, entries, recovery, future, time.perf_counter()))
        return future

    async def take_message(self, message: AddMessage) -> None:
        """Queue an AddStream message (waiting only for queue space); its
        stream is given the answer once a synced write covers its adds."""
        await self._enqueue_many([message])

    async def fence(self, ledger_id: LedgerId, master_key: bytes) -> LedgerState:
        future: asyncio.Future[LedgerState] = asyncio.get_running_loop().create_future()
        await self._enqueue(FenceOp(ledger_id, master_key, future))
        return await future

    async def write_lac(self, ledger_id: LedgerId, master_key: bytes, last_add_confirmed: int) -> LedgerState:
        future: asyncio.Future[LedgerState] = asyncio.get_running_loop().create_future()
        await self._enqueue(LacOp(ledger_id, master_key, last_add_confirmed, future))
        return await future

    async def write_lacs(self, writes: list[tuple[LedgerId, bytes, int]]) -> list[LedgerState | QuireError]:
        """Many explicit LACs queued at once (no task per write); each
        answered with its ledger's state or why it was refused."""
        future: asyncio.Future[list[LedgerState | QuireError]] = asyncio.get_running_loop().create_future()
        await self._enqueue(LacWrites(writes, future))
        return await future

    async def delete(self, ledger_id: LedgerId) -> int:
        """Delete a ledger after everything queued before; returns how many
        entries went. They are counted after the delete, off the writer
        thread, from the view of them it kept: counted by the writer, the
        adds queued behind the delete waited for the count (about 37 ms for
        a ledger of 65,000 entries)."""
        future: asyncio.Future[Callable[[], int]] = asyncio.get_running_loop().create_future()
        await self._enqueue(DeleteOp(ledger_id, future))
        count = await future
        try:
            return await asyncio.to_thread(count)
        except Exception as exc:  # deleted, but not counted (the store was reopened or closed meanwhile)
            log.error("counting the entries of deleted ledger %s failed", ledger_id, exc_info=exc)
            raise Unavailable(
                f"ledger {ledger_id} was deleted, but its entries were not counted: {exc}", Reason.BOOKIE_UNAVAILABLE
            ) from exc

    # -- on the event loop, once per batch ---------------------------------------

    def _written(self, written: _Written) -> None:
        """A batch is done (written and synced, refused, or failed): resolve
        its waiters, give its room back, then tell who watches LACs and flushes."""
        for op, outcome in written.outcomes:
            if isinstance(op, AddMessage):
                if isinstance(outcome, BaseException):
                    op.stream.broken(outcome)
                else:
                    op.stream.deliver(cast(bytes, outcome))
                continue
            if op.future.done():  # its caller gave up
                if isinstance(op, DeleteOp) and callable(outcome):
                    # Counted all the same: until then its view of the ledger holds the deleted
                    # entries' files (and their space) open.
                    asyncio.get_running_loop().run_in_executor(None, _count_for_nobody, outcome, op.ledger_id)
                continue
            if isinstance(outcome, BaseException):
                op.future.set_exception(outcome)
            else:
                op.future.set_result(outcome)  # type: ignore[arg-type]
        self._queued_bytes -= written.released_bytes
        if self._waiting_for_space:
            self._space_freed.set()
        if self._on_lac_moved is not None:
            for ledger_id in written.lac_moved:
                self._on_lac_moved(ledger_id)
        if self._on_flush is not None and written.stats is not None:
            self._on_flush(written.stats)

    def _stopped_writing(self) -> None:
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    # -- on the writer thread ------------------------------------------------------

    def _hand_back(self, written: _Written) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._written, written)

    def _take(self, item: list[Op] | None) -> None:
        if item is _STOP:
            self._stop_seen = True
            return
        assert item is not None
        self._backlog.extend(item)
        self._backlog_bytes += sum(op.size_bytes for op in item)

    def _drain_inbox(self) -> None:
        """Take everything queued now, without waiting (asking first: an
        exception per commit costs more than the question)."""
        inbox = self._inbox
        while not self._stop_seen and not inbox.empty():
            self._take(inbox.get_nowait())

    def _gather_more(self) -> None:
        """Wait up to the time bound for a full batch, unless one is ready."""
        if self._max_delay_seconds <= 0:
            return
        deadline = time.monotonic() + self._max_delay_seconds
        while not self._stop_seen and self._backlog_bytes < self._max_batch_bytes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                self._take(self._inbox.get(timeout=remaining))
            except queue.Empty:
                return

    def _work(self) -> None:
        try:
            while True:
                if not self._backlog:
                    if self._stop_seen:
                        return
                    self._take(self._inbox.get())
                    continue
                self._drain_inbox()
                self._gather_more()
                batch, size = self._take_batch()
                try:
                    if isinstance(batch[0], DeleteOp):
                        written = self._delete(cast(list[DeleteOp], batch), size)
                    else:
                        written = self._flush(batch, size)
                except Exception as exc:  # a bug here must fail its batch, not stop the writer
                    log.exception("the bookie writer failed on a batch of %d operations", len(batch))
                    failure = Unavailable(f"bookie writer failed: {exc!r}", Reason.BOOKIE_UNAVAILABLE)
                    written = _Written([(op, failure) for op in batch], size)
                self._hand_back(written)
        finally:
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._stopped_writing)
            except RuntimeError:  # the loop closed first (a test tearing down): nobody waits
                pass

    def _take_batch(self) -> tuple[list[Op], int]:
        """Backlogged operations up to the byte bound, and their bytes. Deletes go in batches
        of their own (up to MAX_DELETES_PER_BATCH), so the writes before them
        are flushed first and the ones after them follow."""
        batch: list[Op] = []
        size = 0
        backlog = self._backlog
        while backlog and (not batch or size + backlog[0].size_bytes <= self._max_batch_bytes):
            if batch and isinstance(backlog[0], DeleteOp) != isinstance(batch[0], DeleteOp):
                break
            if isinstance(backlog[0], DeleteOp) and len(batch) == MAX_DELETES_PER_BATCH:
                break
            op = backlog.popleft()
            batch.append(op)
            size += op.size_bytes
        self._backlog_bytes -= size
        return batch, size

    def _delete(self, ops: list[DeleteOp], released: int) -> _Written:
        ledger_ids = [op.ledger_id for op in ops]
        existed = [self.states.get(ledger_id) is not None for ledger_id in ledger_ids]
        try:
            counts = self._store.delete_ledgers(ledger_ids)  # each counted later, off this thread
        except Exception as exc:
            log.error("deleting ledgers %s failed", [str(op.ledger_id) for op in ops], exc_info=exc)
            failure = Unavailable(f"bookie storage delete failed: {exc}", Reason.BOOKIE_UNAVAILABLE)
            return _Written([(op, failure) for op in ops], released)
        self.states.remove(ledger_ids, existed)
        return _Written(list(zip(ops, counts, strict=True)), released)

    @staticmethod
    def _failure(exc: Exception) -> QuireError:
        if is_disk_full(exc):
            return ResourceExhausted(f"bookie disk full, nothing stored: {exc}; write elsewhere", Reason.DISK_FULL)
        return Unavailable(f"bookie storage write failed: {exc}", Reason.BOOKIE_UNAVAILABLE)

    def _reopen(self) -> Exception | None:
        """Reopen the store after a failed write and reload the ledger states
        from it (the failed batch may or may not have reached the WAL; it was
        not acknowledged either way). Returns the error while it still fails."""
        try:
            self._store.reopen()
            self.states.reload()
        except Exception as exc:
            log.warning("storage still failing, not reopened: %s", exc)
            return exc
        self._store_failed = False
        return None

    def _write(
        self, writes: list[tuple[LedgerId, int, bytes]], records: dict[LedgerId, LedgerState], synced: bool
    ) -> None:
        self._store.write(writes, records, sync=synced)
        if self._fault_sync_delay_seconds:
            time.sleep(self._fault_sync_delay_seconds)  # injected slow disk (tests, drills)

    def _sync_span(
        self, writes: list[tuple[LedgerId, int, bytes]], pending: dict[LedgerId, LedgerState]
    ) -> AbstractContextManager[Any]:
        """The span of one synced write, when tracing is on (even a no-op
        span and its attributes cost every commit, so none is made otherwise)."""
        attributes: dict[str, AttributeValue] = {
            "quire.entries": len(writes),
            "quire.bytes": sum(len(d) for _, _, d in writes),
            "quire.ledgers": [str(ledger_id) for ledger_id in list(pending)[:16]],
        }
        return _tracer.start_as_current_span("bookie.sync", attributes=attributes)

    def _refused(self, batch: list[Op], failure: QuireError, released: int) -> _Written:
        """Every op of `batch` (of `released` bytes queued) refused with `failure` (each add of a message too)."""
        outcomes: list[tuple[Op, object]] = []
        for op in batch:
            if isinstance(op, AddMessage):
                adds = op.stream.decode(op.message)
                outcomes.append((op, op.stream.answer(op, adds, [failure] * len(adds))))
            else:
                outcomes.append((op, failure))
        return _Written(outcomes, released)

    def _flush(self, batch: list[Op], released: int) -> _Written:
        """Stage, write and sync `batch` (of `released` bytes queued)."""
        if self._store_failed:
            still_failing = self._reopen()
            if still_failing is not None:
                return self._refused(batch, self._failure(still_failing), released)
        staged = self._stage(batch)
        pending, writes = staged.pending, staged.writes
        if not pending:  # nothing to write: every op was refused
            self.states.update(pending)  # the states staging read back leave the cache again
            return _Written(staged.settled(), released)
        # A batch of explicit LACs alone is written without a sync of its own: an explicit LAC
        # only spares readers a wait, it is best effort on the writer's side too, and a bookie
        # that crashes before its next synced write comes back with the LAC its entries carry.
        synced = bool(writes) or any(isinstance(op, FenceOp) for op, _ in staged.accepted)
        records = {ledger_id: pending[ledger_id] for ledger_id in staged.records} if staged.records else {}
        started = time.monotonic()
        try:
            if self._traced:
                with self._sync_span(writes, pending):
                    self._write(writes, records, synced)
            else:  # not even a null context: this runs for every commit
                self._write(writes, records, synced)
        except Exception as exc:  # the write failed: nothing in it is acknowledged
            log.error("synced write of %d entries failed", len(writes), exc_info=exc)
            self._store_failed = True
            return _Written(staged.failed(self._failure(exc)), released)
        sync_seconds = time.monotonic() - started
        moved = self.states.update(pending)
        if not synced:  # explicit LACs alone: no entries, and no sync to count
            return _Written(staged.settled(), released, moved)
        stats = FlushStats(
            time.time(),
            len(writes),
            sum(len(d) for _, _, d in writes),
            sync_seconds,
            time.perf_counter() - staged.oldest if staged.oldest else 0.0,
        )
        return _Written(staged.settled(), released, moved, stats)

    def _stage(self, batch: list[Op]) -> _Staged:
        """Check each op of the batch against the ledgers' states as the ops
        before it leave them, and gather what one write will store."""
        pending = dict[LedgerId, LedgerState]()  # states as they will be after this batch
        records: set[LedgerId] = set()
        writes: list[tuple[LedgerId, int, bytes]] = []
        refused: list[tuple[Op, object]] = []
        accepted: list[tuple[Op, LedgerState]] = []
        messages: list[tuple[AddMessage, list[DecodedAdd], list[QuireError | None]]] = []
        lac_writes: list[tuple[LacWrites, list[LedgerState | QuireError]]] = []
        oldest = 0.0  # arrival of the batch's oldest add
        for op in batch:
            assert not isinstance(op, DeleteOp), "deletes are flushed alone"
            if isinstance(op, AddMessage):
                adds = op.stream.decode(op.message)
                errors = self._stage_message(adds, pending, records, writes)
                messages.append((op, adds, errors))
                if not oldest or op.received_at < oldest:
                    oldest = op.received_at
                continue
            if isinstance(op, LacWrites):
                lac_writes.append((op, self._stage_lacs(op.writes, pending, records)))
                continue
            before = pending.get(op.ledger_id) or self.states.get_for_write(op.ledger_id) or NO_STATE
            try:
                state = apply(op, before, self._fences_hold)
            except QuireError as exc:
                refused.append((op, exc))
                continue
            if isinstance(op, AddOp):
                writes.extend((op.ledger_id, entry_id, data) for entry_id, _, data in op.entries)
                if op.received_at and (not oldest or op.received_at < oldest):
                    oldest = op.received_at
            pending[op.ledger_id] = state
            if not state.same_record(before):
                records.add(op.ledger_id)
            accepted.append((op, state))
        return _Staged(pending, records, writes, refused, accepted, messages, lac_writes, oldest)

    def _stage_lacs(
        self, lacs: list[tuple[LedgerId, bytes, int]], pending: dict[LedgerId, LedgerState], records: set[LedgerId]
    ) -> list[LedgerState | QuireError]:
        """Apply each explicit LAC to `pending`, in order; per write, the
        ledger's state after it or why it was refused."""
        results: list[LedgerState | QuireError] = []
        for ledger_id, master_key, lac in lacs:
            before = pending.get(ledger_id) or self.states.get_for_write(ledger_id) or NO_STATE
            try:
                state = apply_lac(ledger_id, lac, with_master_key(ledger_id, before, master_key))
            except QuireError as exc:
                results.append(exc)
                continue
            pending[ledger_id] = state
            if not state.same_record(before):
                records.add(ledger_id)
            results.append(state)
        return results

    def _stage_message(
        self,
        adds: list[DecodedAdd],
        pending: dict[LedgerId, LedgerState],
        records: set[LedgerId],
        writes: list[tuple[LedgerId, int, bytes]],
    ) -> list[QuireError | None]:
        """Check each add of a message and the state rules, in order; the
        accepted ones join `writes` and `pending` (and `records`, a ledger's
        first add here). Returns, per add, None or why it was refused."""
        check_add, check_entry = self._check_add, self._check_entry
        assert check_add is not None and check_entry is not None, (
            "a committer that takes AddStream messages needs the bookie's add checks"
        )
        get_state = self.states.get_for_write
        fences_hold = self._fences_hold
        errors: list[QuireError | None] = []
        for add in adds:
            if not isinstance(add, StreamedAdd):  # a OneEntryAdd (this runs for every add: no call but the check)
                _, ledger_id, master_key, entry_id, data = add
                try:
                    lac = check_entry(ledger_id, master_key, entry_id, data)
                except QuireError as exc:
                    errors.append(exc)
                    continue
                before = pending.get(ledger_id) or get_state(ledger_id) or NO_STATE
                if before.master_key and not before.fenced and hmac.compare_digest(before.master_key, master_key):
                    # A ledger this bookie has, with this add's key and no fence: what
                    # with_master_key and apply_add would check passes, so their calls are
                    # skipped, and only the entry moves its state: its stored record serves.
                    pending[ledger_id] = before.with_entry(entry_id, lac)
                    writes.append((ledger_id, entry_id, data))
                    errors.append(None)
                    continue
                entries, recovery = [(entry_id, lac, data)], False
            else:
                if add.refused is not None:
                    errors.append(add.refused)
                    continue
                ledger_id, master_key, recovery = add.ledger_id, add.master_key, add.recovery
                try:
                    entries = check_add(ledger_id, master_key, add.entries, recovery)
                except QuireError as exc:
                    errors.append(exc)
                    continue
                before = pending.get(ledger_id) or get_state(ledger_id) or NO_STATE
            try:
                if before.master_key and not before.fenced and hmac.compare_digest(before.master_key, master_key):
                    state = with_entries(before, entries)  # as above, for an add of many entries
                else:
                    state = apply_add(
                        ledger_id, entries, recovery, with_master_key(ledger_id, before, master_key), fences_hold
                    )
                    if not state.same_record(before):  # a ledger's first add here: its master key
                        records.add(ledger_id)
            except QuireError as exc:
                errors.append(exc)
                continue
            for entry_id, _, data in entries:
                writes.append((ledger_id, entry_id, data))
            pending[ledger_id] = state
            errors.append(None)
        return errors
