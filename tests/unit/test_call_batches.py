"""The gateway's call gatherer (quire_gateway/call_batches.py): a lone call
leaves at once, calls arriving while a batch is in flight share the next
one, and one item's error fails that item alone."""

from __future__ import annotations

import asyncio

import pytest

from quire_api.errors import AlreadyExists, QuireError, Unavailable
from quire_gateway.call_batches import CallGatherer


class Recorder:
    """A send that records its batches and waits for `release` before answering."""

    def __init__(self, hold: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()
        self.sent = asyncio.Event()
        if not hold:
            self.release.set()

    async def send(self, items: list[int]) -> list[int | QuireError]:
        self.batches.append(list(items))
        self.sent.set()
        await self.release.wait()
        return [AlreadyExists(f"item {i} exists") if i < 0 else i * 10 for i in items]


async def test_a_lone_call_leaves_at_once_in_a_batch_of_its_own():
    recorder = Recorder(hold=True)
    gatherer = CallGatherer(recorder.send, max_batch=50, what="test")
    lone = asyncio.create_task(gatherer.submit(1))
    for _ in range(3):  # a few turns of the event loop, no timer: nothing waits for company
        await asyncio.sleep(0)
    assert recorder.batches == [[1]]
    recorder.release.set()
    assert await asyncio.wait_for(lone, 10) == 10


async def test_calls_arriving_while_a_batch_is_in_flight_share_the_next_one():
    recorder = Recorder(hold=True)
    gatherer = CallGatherer(recorder.send, max_batch=50, what="test")
    first = asyncio.create_task(gatherer.submit(1))
    await asyncio.wait_for(recorder.sent.wait(), 10)
    waiting = [asyncio.create_task(gatherer.submit(i)) for i in range(2, 18)]
    await asyncio.sleep(0)
    assert recorder.batches == [[1]], "nothing more is sent while a batch is unanswered"
    recorder.release.set()
    assert await asyncio.wait_for(asyncio.gather(first, *waiting), 10) == [i * 10 for i in range(1, 18)]
    assert recorder.batches == [[1], list(range(2, 18))]
    assert gatherer.batches_sent == 2


async def test_a_batch_holds_at_most_max_batch_items():
    recorder = Recorder(hold=True)
    gatherer = CallGatherer(recorder.send, max_batch=4, what="test")
    first = asyncio.create_task(gatherer.submit(0))
    await asyncio.wait_for(recorder.sent.wait(), 10)
    waiting = [asyncio.create_task(gatherer.submit(i)) for i in range(1, 11)]
    await asyncio.sleep(0)
    recorder.release.set()
    await asyncio.wait_for(asyncio.gather(first, *waiting), 10)
    assert recorder.batches == [[0], [1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]


async def test_one_items_error_fails_that_item_alone():
    recorder = Recorder(hold=True)
    gatherer = CallGatherer(recorder.send, max_batch=50, what="test")
    first = asyncio.create_task(gatherer.submit(1))
    await asyncio.wait_for(recorder.sent.wait(), 10)
    good, bad, other = (asyncio.create_task(gatherer.submit(i)) for i in (2, -3, 4))
    await asyncio.sleep(0)
    recorder.release.set()
    assert await asyncio.wait_for(first, 10) == 10
    assert await asyncio.wait_for(good, 10) == 20
    assert await asyncio.wait_for(other, 10) == 40
    with pytest.raises(AlreadyExists, match="item -3 exists"):
        await asyncio.wait_for(bad, 10)
    assert recorder.batches == [[1], [2, -3, 4]]


async def test_a_failed_call_fails_every_item_of_its_batch_and_the_next_batch_still_goes():
    calls: list[list[int]] = []

    async def send(items: list[int]) -> list[int | QuireError]:
        calls.append(list(items))
        if len(calls) == 1:
            raise Unavailable("registry down")
        return list(items)

    gatherer = CallGatherer(send, max_batch=50, what="test")
    results = await asyncio.gather(gatherer.submit(1), gatherer.submit(2), return_exceptions=True)
    assert [type(r) for r in results] == [Unavailable, Unavailable]
    assert calls == [[1, 2]]
    assert await asyncio.wait_for(gatherer.submit(3), 10) == 3


async def test_a_caller_that_gives_up_does_not_cancel_the_others():
    recorder = Recorder(hold=True)
    gatherer = CallGatherer(recorder.send, max_batch=50, what="test")
    first = asyncio.create_task(gatherer.submit(1))
    await asyncio.wait_for(recorder.sent.wait(), 10)
    first.cancel()
    second = asyncio.create_task(gatherer.submit(2))
    await asyncio.sleep(0)
    recorder.release.set()
    assert await asyncio.wait_for(second, 10) == 20
    assert first.cancelled()
    assert recorder.batches == [[1], [2]]
