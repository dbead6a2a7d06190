"""Durable group commit.

Every state-changing operation (add, fence) goes through one queue and one
flusher task, so operations take effect in arrival order. The flusher takes
everything queued (up to a byte bound), checks each operation against the
ledger states as they stand at that point, writes the accepted ones in ONE
synced WriteBatch, and only then resolves their futures. While a sync runs new
operations queue up and share the next one: that is where throughput comes
from, and no add is ever acknowledged before a sync covering it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from quire_bookie.storage import EntryStore, LedgerState
from quire_common.errors import FailedPrecondition, PermissionDenied, QuireError, Reason, Unavailable
from quire_common.ids import LedgerId

log = logging.getLogger(__name__)


@dataclass
class AddOp:
    ledger_id: LedgerId
    master_key: bytes
    entries: list[tuple[int, int, bytes]]  # (entry id, lac from header, packed bytes)
    recovery: bool
    future: asyncio.Future[None] = field(repr=False)

    @property
    def size_bytes(self) -> int:
        return sum(len(data) for _, _, data in self.entries)


@dataclass
class FenceOp:
    ledger_id: LedgerId
    master_key: bytes
    future: asyncio.Future[LedgerState] = field(repr=False)
    size_bytes: int = 0


Op = AddOp | FenceOp


def check_master_key(ledger_id: LedgerId, state: LedgerState, master_key: bytes) -> None:
    if state.master_key and not hmac.compare_digest(state.master_key, master_key):
        raise PermissionDenied(f"wrong master key for ledger {ledger_id}", Reason.WRONG_PASSWORD)


@dataclass
class FlushStats:
    """One synced write, for GetBookieInfo and telemetry."""

    at: float
    entries: int
    size_bytes: int
    sync_seconds: float


class GroupCommitter:
    def __init__(
        self,
        store: EntryStore,
        states: dict[LedgerId, LedgerState],
        *,
        max_batch_bytes: int = 4 * 1024 * 1024,
        max_queued_bytes: int = 64 * 1024 * 1024,
        on_flush: Callable[[FlushStats], None] | None = None,
    ) -> None:
        self._store = store
        self.states = states
        self._max_batch_bytes = max_batch_bytes
        self._queue: deque[Op] = deque()
        self._queued_bytes = 0
        self._wakeup = asyncio.Event()
        # Bounded: producers wait here instead of growing memory without limit.
        self._space = asyncio.Condition()
        self._max_queued_bytes = max_queued_bytes
        self._on_flush = on_flush
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="group-commit")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _enqueue(self, op: Op) -> None:
        async with self._space:
            await self._space.wait_for(
                lambda: self._queued_bytes == 0 or self._queued_bytes + op.size_bytes <= self._max_queued_bytes
            )
            self._queue.append(op)
            self._queued_bytes += op.size_bytes
        self._wakeup.set()

    async def add(
        self, ledger_id: LedgerId, master_key: bytes, entries: list[tuple[int, int, bytes]], recovery: bool
    ) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._enqueue(AddOp(ledger_id, master_key, entries, recovery, future))
        await future

    async def fence(self, ledger_id: LedgerId, master_key: bytes) -> LedgerState:
        future: asyncio.Future[LedgerState] = asyncio.get_running_loop().create_future()
        await self._enqueue(FenceOp(ledger_id, master_key, future))
        return await future

    def _take_batch(self) -> list[Op]:
        batch: list[Op] = []
        size = 0
        while self._queue and (not batch or size + self._queue[0].size_bytes <= self._max_batch_bytes):
            op = self._queue.popleft()
            batch.append(op)
            size += op.size_bytes
        self._queued_bytes -= size
        return batch

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                batch = self._take_batch()
                async with self._space:
                    self._space.notify_all()
                await self._flush(batch)

    async def _flush(self, batch: list[Op]) -> None:
        pending = dict[LedgerId, LedgerState]()  # states as they will be after this batch
        writes: list[tuple[LedgerId, int, bytes]] = []
        accepted: list[tuple[Op, object]] = []
        for op in batch:
            state = pending.get(op.ledger_id) or self.states.get(op.ledger_id) or LedgerState()
            try:
                check_master_key(op.ledger_id, state, op.master_key)
                if isinstance(op, FenceOp):
                    state = LedgerState(
                        op.master_key, True, state.last_entry_id, state.last_add_confirmed, state.explicit_lac
                    )
                    result: object = state
                else:
                    if state.fenced and not op.recovery:
                        raise FailedPrecondition(
                            f"ledger {op.ledger_id} is fenced: a recovery has taken it over",
                            Reason.LEDGER_FENCED,
                        )
                    if not state.master_key:
                        state = LedgerState(
                            op.master_key,
                            state.fenced,
                            state.last_entry_id,
                            state.last_add_confirmed,
                            state.explicit_lac,
                        )
                    for entry_id, lac, data in op.entries:
                        writes.append((op.ledger_id, entry_id, data))
                        state = state.with_entry(entry_id, lac)
                    result = None
            except QuireError as exc:
                if not op.future.done():
                    op.future.set_exception(exc)
                continue
            pending[op.ledger_id] = state
            accepted.append((op, result))
        if not accepted:
            return
        started = time.monotonic()
        try:
            await asyncio.to_thread(self._store.write, writes, pending)
        except Exception as exc:  # the write failed: nothing in it was stored
            log.error("synced write of %d entries failed", len(writes), exc_info=exc)
            failure = Unavailable(f"bookie storage write failed: {exc}", Reason.BOOKIE_UNAVAILABLE)
            for op, _ in accepted:
                if not op.future.done():
                    op.future.set_exception(failure)
            return
        sync_seconds = time.monotonic() - started
        self.states.update(pending)
        for op, result in accepted:
            if not op.future.done():
                op.future.set_result(result)  # type: ignore[arg-type]
        if self._on_flush is not None:
            self._on_flush(FlushStats(time.time(), len(writes), sum(len(d) for _, _, d in writes), sync_seconds))
