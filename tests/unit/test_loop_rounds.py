"""The AddStream sender's wait of a few event-loop turns (bookie_streams._loop_rounds),
and how many it waits: writers whose requests are read join a message, a lone
writer's adds need not wait for them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from quire_api.ids import LedgerId
from quire_gateway.write.bookie_streams import (
    LONE_ADDS_BEFORE_SENDING_AT_ONCE,
    YIELDS_BEFORE_SENDING,
    AddRequest,
    BookieAddStream,
    _loop_rounds,
)
from quire_proto.bookie.v1 import bookie_pb2


async def test_loop_rounds_resumes_its_awaiter_in_the_turn_that_many_sleeps_would():
    order: list[str] = []

    async def after_sleeps(rounds: int) -> None:
        for _ in range(rounds):
            await asyncio.sleep(0)
        order.append(f"slept {rounds}")

    async def after_rounds(rounds: int) -> None:
        await _loop_rounds(asyncio.get_running_loop(), rounds)
        order.append(f"rounds {rounds}")

    async def ticks() -> None:
        for turn in range(8):
            order.append(f"turn {turn}")
            await asyncio.sleep(0)

    await asyncio.gather(ticks(), after_rounds(5), after_sleeps(5), after_rounds(2), after_sleeps(2))
    assert order.index("rounds 2") == order.index("turn 2") + 1 and order.index("slept 2") == order.index("turn 2") + 2
    assert order.index("rounds 5") == order.index("turn 5") + 1 and order.index("slept 5") == order.index("turn 5") + 2


async def test_loop_rounds_refuses_fewer_than_two():
    with pytest.raises(ValueError):
        _loop_rounds(asyncio.get_running_loop(), 1)


class _Turns:
    """Counts the event loop's turns while it runs."""

    def __init__(self) -> None:
        self.now = 0
        self._task = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            self.now += 1
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._task.cancel()


class _AnsweringCall:
    """A bookie's AddStream that notes the turn each message is written in and
    answers it on the next turn, every add stored."""

    def __init__(self, turns: _Turns) -> None:
        self._turns = turns
        self.written: list[tuple[int, int]] = []  # (turn, adds in the message)
        self._answers: asyncio.Queue[bookie_pb2.AddStreamResponse] = asyncio.Queue()

    async def write(self, message: bytes) -> None:
        request = bookie_pb2.AddStreamRequest.FromString(message)
        self.written.append((self._turns.now, len(request.adds)))
        answer = bookie_pb2.AddStreamResponse(stored_add_ids=[add.add_id for add in request.adds])
        asyncio.get_running_loop().call_soon(self._answers.put_nowait, answer)

    async def read(self) -> bookie_pb2.AddStreamResponse:
        return await self._answers.get()

    def cancel(self) -> bool:
        return True


@contextlib.asynccontextmanager
async def _one_stream() -> AsyncIterator[tuple[BookieAddStream, _AnsweringCall, _Turns]]:
    turns = _Turns()
    call = _AnsweringCall(turns)

    async def open_call() -> Any:
        return lambda: call

    stream = BookieAddStream("bookie-1", open_call, lambda: None)
    try:
        yield stream, call, turns
    finally:
        await stream.close()
        turns.stop()


async def _stored(stream: BookieAddStream, entry_ids: list[int]) -> None:
    """One add per entry id, queued in the same turn; returns once all are answered."""
    loop = asyncio.get_running_loop()
    answered = [loop.create_future() for _ in entry_ids]
    for entry_id, future in zip(entry_ids, answered, strict=True):
        request = AddRequest(LedgerId(1, 1), b"k" * 20, [(entry_id, b"entry")])
        stream.send(request, 30.0, lambda bookie_id, error, future=future: future.set_result(error))
    assert await asyncio.gather(*answered) == [None] * len(entry_ids)


async def _turns_before_sent(stream: BookieAddStream, call: _AnsweringCall, turns: _Turns, entry_ids: list[int]) -> int:
    queued_at = turns.now
    await _stored(stream, entry_ids)
    return call.written[-1][0] - queued_at


async def test_a_lone_writers_adds_stop_waiting_for_company():
    async with _one_stream() as (stream, call, turns):
        waits = [await _turns_before_sent(stream, call, turns, [entry_id]) for entry_id in range(8)]
    together = LONE_ADDS_BEFORE_SENDING_AT_ONCE
    assert all(wait >= YIELDS_BEFORE_SENDING for wait in waits[:together]), waits
    assert all(wait <= 1 for wait in waits[together:]), waits  # sent in the turn its send wakes the sender in
    assert [adds for _, adds in call.written] == [1] * 8


async def test_a_message_of_several_adds_brings_the_wait_back():
    async with _one_stream() as (stream, call, turns):
        for entry_id in range(LONE_ADDS_BEFORE_SENDING_AT_ONCE):
            await _stored(stream, [entry_id])
        first = LONE_ADDS_BEFORE_SENDING_AT_ONCE
        assert await _turns_before_sent(stream, call, turns, [first, first + 1]) < YIELDS_BEFORE_SENDING
        assert call.written[-1][1] == 2  # both went in one message
        assert await _turns_before_sent(stream, call, turns, [first + 2]) >= YIELDS_BEFORE_SENDING
