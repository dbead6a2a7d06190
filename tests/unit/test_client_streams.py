"""answered_in_order (quire_gateway.client_streams), ReadEntryStream's engine:
answers in request order whatever order they complete in, at most `window`
at once, earlier answers before a failure of the request stream, and nothing
left running when the caller stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from quire_api.errors import PermissionDenied
from quire_gateway.client_streams import answered_in_order


async def requests_of(items: list[int], fail_at: int | None = None) -> AsyncIterator[int]:
    for index, item in enumerate(items):
        if index == fail_at:
            raise PermissionDenied("refused by the guard")
        yield item


async def test_answers_come_in_request_order_however_they_complete() -> None:
    async def answer(request: int) -> str:
        await asyncio.sleep(0.001 * (10 - request))  # the later requests finish first
        return f"answer {request}"

    got = [a async for a in answered_in_order(requests_of(list(range(10))), answer, window=4)]
    assert got == [f"answer {i}" for i in range(10)]


async def test_no_more_than_window_requests_are_worked_on_at_once() -> None:
    running = 0
    most = 0

    async def answer(request: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001)
        running -= 1
        return request

    assert [a async for a in answered_in_order(requests_of(list(range(50))), answer, window=3)] == list(range(50))
    assert most == 3


async def test_a_client_waiting_for_each_answer_gets_it_before_sending_the_next() -> None:
    """The requests are read in a task of their own: a request stream that
    waits for the previous answer does not stall the answers."""
    queue: asyncio.Queue[int | None] = asyncio.Queue()

    async def requests() -> AsyncIterator[int]:
        while (item := await queue.get()) is not None:
            yield item

    async def answer(request: int) -> int:
        return request * 10

    answers = answered_in_order(requests(), answer, window=16)
    for i in range(5):
        queue.put_nowait(i)
        assert await asyncio.wait_for(anext(answers), 5) == i * 10
    queue.put_nowait(None)  # the client half-closes
    assert [a async for a in answers] == []


async def test_a_failed_request_stream_ends_after_the_answers_before_it() -> None:
    async def answer(request: int) -> int:
        await asyncio.sleep(0.01)
        return request

    got: list[int] = []
    with pytest.raises(PermissionDenied, match="refused by the guard"):
        async for a in answered_in_order(requests_of([0, 1, 2, 3, 4], fail_at=3), answer, window=16):
            got.append(a)
    assert got == [0, 1, 2]


async def test_stopping_early_cancels_the_answers_still_running() -> None:
    started: list[int] = []
    cancelled: list[int] = []

    async def answer(request: int) -> int:
        started.append(request)
        try:
            if request > 0:
                await asyncio.sleep(60)
            return request
        except asyncio.CancelledError:
            cancelled.append(request)
            raise

    answers = answered_in_order(requests_of(list(range(4))), answer, window=4)
    assert await anext(answers) == 0
    await asyncio.sleep(0.01)
    await answers.aclose()
    await asyncio.sleep(0.01)
    assert sorted(cancelled) == [1, 2, 3] and sorted(started) == [0, 1, 2, 3]


async def test_requests_answered_at_once_take_no_task_and_keep_their_place() -> None:
    """Even requests are answered at once (ReadEntryStream's cached entries),
    odd ones the long way and slowly: the answers still come in request
    order, and `answer` runs only for the requests answered the long way."""
    asked: list[int] = []

    async def answer(request: int) -> str:
        asked.append(request)
        await asyncio.sleep(0.001 * (10 - request))
        return f"answer {request}"

    def answer_at_once(request: int) -> str | None:
        return f"answer {request}" if request % 2 == 0 else None

    got = [a async for a in answered_in_order(requests_of(list(range(10))), answer, 4, answer_at_once)]
    assert got == [f"answer {i}" for i in range(10)]
    assert sorted(asked) == [1, 3, 5, 7, 9]


async def test_answers_at_once_hold_the_window_too() -> None:
    """Requests answered at once count against the window like the others:
    with nobody taking the answers, the reader stops after `window` of them
    (holding the next it has read)."""
    pulled = 0

    async def requests() -> AsyncIterator[int]:
        nonlocal pulled
        for item in range(100):
            pulled += 1
            yield item

    async def answer(request: int) -> int:
        raise AssertionError("every request is answered at once")

    answers = answered_in_order(requests(), answer, 3, lambda request: request)
    assert await anext(answers) == 0
    await asyncio.sleep(0.01)
    assert pulled == 4
    assert [await anext(answers) for _ in range(5)] == [1, 2, 3, 4, 5]
    await asyncio.sleep(0.01)
    assert pulled == 9
    await answers.aclose()
