"""Gathering concurrent calls into batches: many creates in flight at once
share one placement call and one registry call. Domain code: no grpc here.

The shape is the one the bookie add streams keep (write/bookie_streams.py):
one batch unanswered at a time. An idle gatherer sends a lone item at once;
items that arrive while a batch is in flight wait and leave together in the
next one, so no timer is needed and a lone caller waits for nobody.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from quire_api.errors import QuireError

log = logging.getLogger(__name__)

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")

# Sends one batch; answers each item in order with its outcome or the error
# that item alone fails with. Raising fails every item of the batch.
SendBatch = Callable[[list[Item]], Awaitable[Sequence[Outcome | QuireError]]]


class CallGatherer(Generic[Item, Outcome]):
    def __init__(self, send: SendBatch[Item, Outcome], max_batch: int, what: str) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._send = send
        self.max_batch = max_batch
        self.what = what
        self._waiting: list[tuple[Item, asyncio.Future[Outcome]]] = []
        self._sender: asyncio.Task[None] | None = None
        self.batches_sent = 0

    async def submit(self, item: Item) -> Outcome:
        """The item's outcome, once the batch it leaves in is answered."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._sender is None:
            # A task of its own, so that a caller giving up does not cancel the others' batch.
            self._sender = asyncio.create_task(self._send_while_waiting())
        return await future

    async def _send_while_waiting(self) -> None:
        try:
            while self._waiting:
                batch = [(item, future) for item, future in self._waiting[: self.max_batch] if not future.done()]
                del self._waiting[: self.max_batch]
                if batch:
                    await self._send_one(batch)
        finally:
            self._sender = None

    async def _send_one(self, batch: list[tuple[Item, asyncio.Future[Outcome]]]) -> None:
        self.batches_sent += 1
        try:
            outcomes = await self._send([item for item, _ in batch])
            if len(outcomes) != len(batch):
                raise AssertionError(f"{self.what}: {len(outcomes)} answers to a batch of {len(batch)}")
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # the whole call failed: so did each item in it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its caller gave up
                continue
            if isinstance(outcome, QuireError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
