"""The registry's open-ended streams (a bookie's registration, the bookie and
ledger watches), ended by the registry itself when it stops.

A stopping server lets its calls drain for a grace period and then cancels
the ones still open; these never end on their own, so each waited out the
whole grace and was then cancelled, which gRPC logs as an unhandled error.
Ended here as the stop begins, each answers UNAVAILABLE (`SERVICE_UNAVAILABLE`)
at once, and its client opens it again at another replica, or at this one
when it is back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

from quire_api.errors import Reason, Unavailable

T = TypeVar("T")


class _OpenStream:
    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.waiting = False  # awaiting its next item (not sending one: that await is gRPC's own)
        self.ended = False  # the registry stopped it


class OpenStreams:
    def __init__(self) -> None:
        self._open: set[_OpenStream] = set()
        self._stopping = False

    def end_all(self) -> None:
        """End every open stream now (those waiting for their next item)
        or as soon as it next waits (those sending an item meanwhile), and
        every stream started from now on."""
        self._stopping = True
        for stream in self._open:
            if stream.waiting and not stream.ended:
                stream.ended = True
                stream.task.cancel()

    async def until_stopped(self, items: AsyncIterator[T]) -> AsyncIterator[T]:
        """`items`, until the registry stops: then UNAVAILABLE."""
        task = asyncio.current_task()
        assert task is not None
        stream = _OpenStream(task)
        self._open.add(stream)
        try:
            while True:
                if self._stopping:
                    raise _stopped()
                stream.waiting = True
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if not stream.ended:
                        raise  # the call itself went away
                    task.uncancel()
                    raise _stopped() from None
                finally:
                    stream.waiting = False
                yield item
        finally:
            self._open.discard(stream)


def _stopped() -> Unavailable:
    return Unavailable(
        "the registry is stopping; open the stream again (at another replica, or here once it is back)",
        Reason.SERVICE_UNAVAILABLE,
    )
