"""Durable group commit.

Every state-changing operation (add, fence, explicit LAC, delete) goes through one
queue and one flusher task, so operations take effect in arrival order. The
flusher takes what is queued (up to a byte bound), checks each operation
against the ledger states as they stand at that point, writes the accepted
ones in ONE synced WriteBatch, and only then resolves their futures. While a
sync runs new operations queue up and share the next one: that is where
throughput comes from, and no add is ever acknowledged before a sync covering
it. A time bound (max_delay_seconds) lets the flusher wait a little for more
work before syncing a small batch; 0 syncs as soon as the previous sync ends.
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
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, cast

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
from quire_bookie.storage import EntryStore, LedgerState, is_disk_full
from quire_common.telemetry import tracer, tracing_enabled

T = TypeVar("T")
log = logging.getLogger(__name__)
_tracer = tracer(__name__)

NO_STATE = LedgerState()


class AddWaiter(Protocol):
    """Who is told that an add is durable, or why not: a future for a single
    add, or an AddGroup's slot for each add of an AddStream message."""

    def done(self) -> bool: ...

    def set_result(self, result: None, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class AddGroup:
    """The adds of one AddStream message: queued together and answered
    together, with one call of `on_settled` once the last of them is settled,
    instead of a future, a callback and a wakeup per add."""

    __slots__ = ("_on_settled", "_unsettled", "errors")

    def __init__(self, count: int, on_settled: Callable[[AddGroup], None]) -> None:
        self.errors: list[BaseException | None] = [None] * count  # per add, in message order
        self._unsettled = count
        self._on_settled = on_settled

    def slot(self, index: int) -> _GroupSlot:
        return _GroupSlot(self, index)

    def settle(self, index: int, error: BaseException | None) -> None:
        self.errors[index] = error
        self._unsettled -= 1
        if not self._unsettled:
            self._on_settled(self)


class _GroupSlot:
    """One add's place in its AddGroup, told as a future would be."""

    __slots__ = ("_done", "_group", "_index")

    def __init__(self, group: AddGroup, index: int) -> None:
        self._group = group
        self._index = index
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: None, /) -> None:
        self._done = True
        self._group.settle(self._index, None)

    def set_exception(self, exception: BaseException, /) -> None:
        self._done = True
        self._group.settle(self._index, exception)


@dataclass
class AddOp:
    ledger_id: LedgerId
    master_key: bytes
    entries: list[tuple[int, int, bytes]]  # (entry id, lac from header, packed bytes)
    recovery: bool
    future: AddWaiter = field(repr=False)
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
    future: asyncio.Future[int] = field(repr=False)
    size_bytes: int = 0


Op = AddOp | FenceOp | LacOp | DeleteOp


def check_master_key(ledger_id: LedgerId, state: LedgerState, master_key: bytes) -> None:
    if state.master_key and not hmac.compare_digest(state.master_key, master_key):
        raise PermissionDenied(f"wrong master key for ledger {ledger_id}", Reason.WRONG_PASSWORD)


def check_not_fenced(ledger_id: LedgerId, state: LedgerState) -> None:
    if state.fenced:
        raise FailedPrecondition(f"ledger {ledger_id} is fenced: a recovery has taken it over", Reason.LEDGER_FENCED)


def apply(op: AddOp | FenceOp | LacOp, state: LedgerState, fences_hold: bool = True) -> LedgerState:
    """The ledger state after `op`, or a QuireError saying why `op` is refused.
    Pure: the flusher applies it to states as they will be after the batch.
    `fences_hold=False` is a test's positive control only: normal adds pass a fence."""
    check_master_key(op.ledger_id, state, op.master_key)
    if not state.master_key:
        state = replace(state, master_key=op.master_key)
    if isinstance(op, FenceOp):
        return replace(state, fenced=True)
    if isinstance(op, LacOp):
        check_not_fenced(op.ledger_id, state)
        return replace(state, explicit_lac=max(state.explicit_lac, op.last_add_confirmed))
    if not op.recovery and fences_hold:
        check_not_fenced(op.ledger_id, state)
    # One state update per op, not per entry: this runs for every add.
    return state.with_entry(max(e[0] for e in op.entries), max(e[1] for e in op.entries))


@dataclass
class FlushStats:
    """One synced write, for GetBookieInfo and metrics."""

    at: float
    entries: int
    size_bytes: int
    sync_seconds: float
    # From the arrival of the batch's oldest add to its sync: the longest an add of it waited.
    longest_add_seconds: float = 0.0


class WriterThread:
    """One thread that runs the flusher's storage calls in order, so a synced
    write runs off the event loop without asyncio's default executor: a
    thread-pool submission and a copied context per flush cost the bookie
    about a sixth of its event loop's time at 16 one-entry writers."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], object], asyncio.Future[object]] | None] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._work, name="bookie-writer", daemon=True)
        self._thread.start()

    async def run(self, job: Callable[[], T]) -> T:
        if self._thread is None:
            return await asyncio.to_thread(job)  # not started (tests that drive the committer directly)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._jobs.put((job, future))
        return await future  # type: ignore[return-value]

    def _work(self) -> None:
        assert self._loop is not None
        while (item := self._jobs.get()) is not None:
            job, future = item
            try:
                result = job()
            except BaseException as exc:  # handed back to the flusher, which decides
                self._loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                self._loop.call_soon_threadsafe(_settle, future, result, None)

    def stop(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None


def _settle(future: asyncio.Future[object], result: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


# Deletes synced and compacted together: concurrent deletes share one synced
# write and one memtable flush, while a burst still lets adds in between.
MAX_DELETES_PER_BATCH = 64


class GroupCommitter:
    def __init__(
        self,
        store: EntryStore,
        states: dict[LedgerId, LedgerState],
        *,
        max_batch_bytes: int = 4 * 1024 * 1024,
        max_delay_seconds: float = 0.0,
        fault_sync_delay_seconds: float = 0.0,
        fences_hold: bool = True,
        max_queued_bytes: int = 64 * 1024 * 1024,
        on_flush: Callable[[FlushStats], None] | None = None,
        on_lac_moved: Callable[[LedgerId], None] | None = None,
    ) -> None:
        self._store = store
        self.states = states
        self._max_batch_bytes = max_batch_bytes
        self._max_delay_seconds = max_delay_seconds
        self._fault_sync_delay_seconds = fault_sync_delay_seconds
        self._fences_hold = fences_hold  # False only as a test's positive control
        self._queue: deque[Op] = deque()
        self._queued_bytes = 0
        self._wakeup = asyncio.Event()
        self._batch_full = asyncio.Event()
        # Bounded: producers wait here instead of growing memory without limit.
        self._space = asyncio.Condition()
        self._max_queued_bytes = max_queued_bytes
        self._waiting_for_space = 0  # producers waiting in _enqueue_many
        self._on_flush = on_flush
        self._on_lac_moved = on_lac_moved
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        # Set when a write failed: RocksDB refuses every later write until reopened.
        self._store_failed = False
        self._writer = WriterThread()
        self._traced = tracing_enabled()

    def start(self) -> None:
        self._writer.start()
        self._task = asyncio.create_task(self._run(), name="group-commit")

    async def stop(self) -> None:
        """Refuse new operations, write and sync everything already queued,
        then end the flusher."""
        self._closing = True
        self._wakeup.set()
        self._batch_full.set()
        if self._task is not None:
            await self._task
        self._writer.stop()

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
                async with self._space:
                    await self._space.wait_for(
                        lambda: (
                            self._closing
                            or self._queued_bytes == 0
                            or self._queued_bytes + size <= self._max_queued_bytes
                        )
                    )
            finally:
                self._waiting_for_space -= 1
        if self._closing:
            raise Unavailable("the bookie is shutting down; retry on another bookie", Reason.BOOKIE_UNAVAILABLE)
        self._queue.extend(ops)
        self._queued_bytes += size
        if self._queued_bytes >= self._max_batch_bytes:
            self._batch_full.set()
        self._wakeup.set()

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

    async def start_adds(self, adds: list[AddOp]) -> None:
        """Queue several adds at once, in order; each one's waiter is told as
        `start_add`'s future is."""
        await self._enqueue_many(adds)

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
        loop = asyncio.get_running_loop()
        ops = [LacOp(ledger_id, key, lac, loop.create_future()) for ledger_id, key, lac in writes]
        await self._enqueue_many(ops)
        outcomes = await asyncio.gather(*(op.future for op in ops), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, QuireError):
                raise outcome
        return cast(list[LedgerState | QuireError], outcomes)

    async def delete(self, ledger_id: LedgerId) -> int:
        """Delete a ledger after everything queued before; returns how many
        entries went."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        await self._enqueue(DeleteOp(ledger_id, future))
        return await future

    def _take_batch(self) -> list[Op]:
        """Queued operations up to the byte bound. Deletes go in batches of
        their own (up to MAX_DELETES_PER_BATCH), so the writes before them
        are flushed first and the ones after them follow."""
        batch: list[Op] = []
        size = 0
        while self._queue and (not batch or size + self._queue[0].size_bytes <= self._max_batch_bytes):
            if batch and isinstance(self._queue[0], DeleteOp) != isinstance(batch[0], DeleteOp):
                break
            if isinstance(self._queue[0], DeleteOp) and len(batch) == MAX_DELETES_PER_BATCH:
                break
            op = self._queue.popleft()
            batch.append(op)
            size += op.size_bytes
        self._queued_bytes -= size
        if self._queued_bytes < self._max_batch_bytes:
            self._batch_full.clear()
        return batch

    async def _gather_more(self) -> None:
        """Wait up to the time bound for a full batch, unless one is ready."""
        if self._max_delay_seconds <= 0 or self._queued_bytes >= self._max_batch_bytes or self._closing:
            return
        try:
            await asyncio.wait_for(self._batch_full.wait(), self._max_delay_seconds)
        except TimeoutError:
            pass

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                await self._gather_more()
                batch = self._take_batch()
                if self._waiting_for_space:
                    async with self._space:
                        self._space.notify_all()
                if isinstance(batch[0], DeleteOp):
                    await self._delete(cast(list[DeleteOp], batch))
                else:
                    await self._flush(batch)
            if self._closing:
                async with self._space:
                    self._space.notify_all()  # producers still waiting for space learn we are closing
                return

    async def _delete(self, ops: list[DeleteOp]) -> None:
        try:
            counts = await asyncio.to_thread(self._store.delete_ledgers, [op.ledger_id for op in ops])
        except Exception as exc:
            log.error("deleting ledgers %s failed", [str(op.ledger_id) for op in ops], exc_info=exc)
            for op in ops:
                if not op.future.done():
                    op.future.set_exception(
                        Unavailable(f"bookie storage delete failed: {exc}", Reason.BOOKIE_UNAVAILABLE)
                    )
            return
        for op, count in zip(ops, counts, strict=True):
            self.states.pop(op.ledger_id, None)
            if not op.future.done():
                op.future.set_result(count)

    def _fail(self, accepted: list[tuple[Op, LedgerState]], exc: Exception) -> None:
        if is_disk_full(exc):
            failure: QuireError = ResourceExhausted(
                f"bookie disk full, nothing stored: {exc}; write elsewhere", Reason.DISK_FULL
            )
        else:
            failure = Unavailable(f"bookie storage write failed: {exc}", Reason.BOOKIE_UNAVAILABLE)
        for op, _ in accepted:
            if not op.future.done():
                op.future.set_exception(failure)

    async def _reopen(self) -> Exception | None:
        """Reopen the store after a failed write and reload the ledger states
        from it (the failed batch may or may not have reached the WAL; it was
        not acknowledged either way). Returns the error while it still fails."""
        try:
            await asyncio.to_thread(self._store.reopen)
            states = await asyncio.to_thread(self._store.load_states)
        except Exception as exc:
            log.warning("storage still failing, not reopened: %s", exc)
            return exc
        self.states.clear()
        self.states.update(states)
        self._store_failed = False
        return None

    def _sync_span(
        self, writes: list[tuple[LedgerId, int, bytes]], pending: dict[LedgerId, LedgerState]
    ) -> AbstractContextManager[Any]:
        """The span of one synced write; nothing at all when tracing is off
        (even a no-op span and its attributes cost every commit)."""
        if not self._traced:
            return nullcontext()
        attributes: dict[str, AttributeValue] = {
            "quire.entries": len(writes),
            "quire.bytes": sum(len(d) for _, _, d in writes),
            "quire.ledgers": [str(ledger_id) for ledger_id in list(pending)[:16]],
        }
        return _tracer.start_as_current_span("bookie.sync", attributes=attributes)

    async def _flush(self, batch: list[Op]) -> None:
        if self._store_failed:
            still_failing = await self._reopen()
            if still_failing is not None:
                self._fail([(op, NO_STATE) for op in batch], still_failing)
                return
        pending = dict[LedgerId, LedgerState]()  # states as they will be after this batch
        writes: list[tuple[LedgerId, int, bytes]] = []
        accepted: list[tuple[Op, LedgerState]] = []
        for op in batch:
            assert not isinstance(op, DeleteOp), "deletes are flushed alone"
            before = pending.get(op.ledger_id) or self.states.get(op.ledger_id) or LedgerState()
            try:
                state = apply(op, before, self._fences_hold)
            except QuireError as exc:
                if not op.future.done():
                    op.future.set_exception(exc)
                continue
            if isinstance(op, AddOp):
                writes.extend((op.ledger_id, entry_id, data) for entry_id, _, data in op.entries)
            pending[op.ledger_id] = state
            accepted.append((op, state))
        if not accepted:
            return
        started = time.monotonic()
        try:
            with self._sync_span(writes, pending):
                await self._writer.run(lambda: self._store.write(writes, pending))
                if self._fault_sync_delay_seconds:
                    await asyncio.sleep(self._fault_sync_delay_seconds)  # injected slow disk (tests, drills)
        except Exception as exc:  # the write failed: nothing in it is acknowledged
            log.error("synced write of %d entries failed", len(writes), exc_info=exc)
            self._store_failed = True
            self._fail(accepted, exc)
            return
        sync_seconds = time.monotonic() - started
        oldest = min((op.received_at for op, _ in accepted if isinstance(op, AddOp) and op.received_at), default=0.0)
        moved = [
            ledger_id for ledger_id, state in pending.items() if state.lac != self.states.get(ledger_id, NO_STATE).lac
        ]
        self.states.update(pending)
        for op, state in accepted:
            if not op.future.done():
                op.future.set_result(None if isinstance(op, AddOp) else state)  # type: ignore[arg-type]
        if self._on_lac_moved is not None:
            for ledger_id in moved:
                self._on_lac_moved(ledger_id)
        if self._on_flush is not None:
            longest_add = time.perf_counter() - oldest if oldest else 0.0
            self._on_flush(
                FlushStats(time.time(), len(writes), sum(len(d) for _, _, d in writes), sync_seconds, longest_add)
            )
