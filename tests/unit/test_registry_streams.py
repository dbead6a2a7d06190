"""A stopping registry ends its open-ended streams (quire_registry.streams):
one waiting for its next item at once, one busy sending when it next waits,
one opened later straight away; each with UNAVAILABLE, while a call that
goes away on its own is still a cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from quire_api.errors import Reason, Unavailable
from quire_registry.streams import OpenStreams


async def numbers(closed: list[str], gate: asyncio.Event | None = None) -> AsyncIterator[int]:
    """1, then waits for `gate` (forever without one) before each next number."""
    try:
        count = 1
        while True:
            yield count
            await (gate.wait() if gate else asyncio.Event().wait())
            if gate:
                gate.clear()
            count += 1
    finally:
        closed.append("closed")


async def outcome(task: asyncio.Task[None]) -> BaseException | None:
    """How `task` ended; fails (and cancels it) if it has not within 10 s."""
    await asyncio.wait({task}, timeout=10)
    if not task.done():
        task.cancel()
        pytest.fail("the stream did not end")
    return None if task.cancelled() else task.exception()


async def following(streams: OpenStreams) -> tuple[asyncio.Task[None], list[int], list[str]]:
    """A task following `numbers` through `streams`, once it has taken its
    first item and waits for the next; with the items seen and the source's
    clean-up."""
    seen: list[int] = []
    closed: list[str] = []
    first = asyncio.Event()

    async def follow() -> None:
        async for item in streams.until_stopped(numbers(closed)):
            seen.append(item)
            first.set()

    task = asyncio.create_task(follow())
    await first.wait()
    return task, seen, closed


async def test_a_stream_waiting_for_its_next_item_ends_at_once_with_unavailable():
    streams = OpenStreams()
    task, seen, closed = await following(streams)
    streams.end_all()
    ended = await outcome(task)
    assert isinstance(ended, Unavailable), ended
    assert ended.reason == Reason.SERVICE_UNAVAILABLE
    assert "registry is stopping" in ended.message
    assert seen == [1] and closed == ["closed"]  # the source's own clean-up ran
    assert task.cancelling() == 0  # the stop's cancellation was taken back, not left pending


async def test_a_stream_busy_sending_ends_before_it_waits_again():
    streams, closed, seen = OpenStreams(), [], []
    sending, sent = asyncio.Event(), asyncio.Event()

    async def follow() -> None:
        async for item in streams.until_stopped(numbers(closed, asyncio.Event())):
            seen.append(item)
            sending.set()
            await sent.wait()  # as if gRPC were still sending this item

    task = asyncio.create_task(follow())
    await sending.wait()
    streams.end_all()
    sent.set()
    assert isinstance(await outcome(task), Unavailable)
    assert seen == [1]


async def test_a_stream_opened_after_the_stop_began_ends_at_once():
    streams, closed = OpenStreams(), []
    streams.end_all()
    with pytest.raises(Unavailable):
        async for _ in streams.until_stopped(numbers(closed)):
            pytest.fail("a stream opened during the stop delivered an item")


async def test_a_call_that_goes_away_is_still_cancelled_not_unavailable():
    task, _, _ = await following(OpenStreams())
    task.cancel()
    assert await outcome(task) is None and task.cancelled()
