"""The AddStream sender's wait of a few event-loop turns (bookie_streams._loop_rounds)."""

from __future__ import annotations

import asyncio

import pytest

from quire_gateway.write.bookie_streams import _loop_rounds


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
