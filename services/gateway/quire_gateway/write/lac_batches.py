"""Explicit LAC writes, gathered per bookie.

A writer whose ledger goes quiet writes its LAC to the ledger's bookies
(handle.py), so readers elsewhere see the last entries without a new one.
Sent one unary call per ledger and bookie, a gateway with many quiet ledgers
paid three calls and three syncs per add: adds spread over 1,000 open ledgers
ran at 0.39x the rate of adds to 16. Here the writes to one bookie leave
together in one WriteLastAddConfirmedBatch call, at most one call in flight
per bookie: while it is answered, the next writes gather behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from quire_api.errors import QuireError, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_common.tasks import cancel_and_wait

# The bookie's limit per call (bookie.MAX_LAC_WRITES).
MAX_WRITES_PER_CALL = 10_000


@dataclass(frozen=True)
class LacWrite:
    ledger_id: LedgerId
    master_key: bytes
    last_add_confirmed: int


# Sends one batch to a bookie: each write's outcome (the bookie's LAC, or why
# not) in order; raises when the call as a whole failed.
SendBatch = Callable[[str, list[LacWrite]], Awaitable[list[int | QuireError]]]


@dataclass
class _Waiting:
    write: LacWrite
    futures: list[asyncio.Future[int]] = field(default_factory=list)


class LacBatches:
    def __init__(self, send: SendBatch) -> None:
        self._send = send
        self._waiting: dict[str, dict[LedgerId, _Waiting]] = {}
        self._senders: dict[str, asyncio.Task[None]] = {}

    async def write(self, bookie_id: str, ledger_id: LedgerId, master_key: bytes, lac: int) -> int:
        """Record `lac` on the bookie; its LAC of the ledger then."""
        return await self.submit(bookie_id, ledger_id, master_key, lac)

    def submit(self, bookie_id: str, ledger_id: LedgerId, master_key: bytes, lac: int) -> asyncio.Future[int]:
        """`write`, as a future of its answer. A write of the same ledger
        still waiting is replaced by the higher LAC, and both callers get its
        answer."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.setdefault(bookie_id, {})
        earlier = waiting.get(ledger_id)
        if earlier is not None:
            lac = max(lac, earlier.write.last_add_confirmed)
        entry = waiting[ledger_id] = _Waiting(
            LacWrite(ledger_id, master_key, lac), earlier.futures if earlier is not None else []
        )
        entry.futures.append(future)
        if bookie_id not in self._senders:
            self._senders[bookie_id] = asyncio.create_task(self._drain(bookie_id), name=f"lac-batches-{bookie_id}")
        return future

    async def close(self) -> None:
        for task in list(self._senders.values()):
            await cancel_and_wait(task)

    async def _drain(self, bookie_id: str) -> None:
        """Send what waits for the bookie, a call at a time, until nothing does."""
        try:
            while waiting := self._waiting.pop(bookie_id, None):
                ready = list(waiting.values())
                if len(ready) > MAX_WRITES_PER_CALL:  # the rest go in the next call
                    self._waiting[bookie_id] = {w.write.ledger_id: w for w in ready[MAX_WRITES_PER_CALL:]}
                    ready = ready[:MAX_WRITES_PER_CALL]
                try:
                    outcomes: list[int | QuireError] = await self._send(bookie_id, [w.write for w in ready])
                except QuireError as exc:
                    outcomes = [exc] * len(ready)
                except Exception as exc:  # a bug here must not leave writers waiting for good
                    failure = Unavailable(
                        f"writing LACs on bookie {bookie_id} failed: {exc!r}", Reason.BOOKIE_UNAVAILABLE
                    )
                    outcomes = [failure] * len(ready)
                for entry, outcome in zip(ready, outcomes, strict=True):
                    for future in entry.futures:
                        if future.done():  # its caller gave up waiting
                            continue
                        if isinstance(outcome, QuireError):
                            future.set_exception(outcome)
                        else:
                            future.set_result(outcome)
        finally:
            del self._senders[bookie_id]
