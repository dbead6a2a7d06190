"""The weight map's refresh rules, with a scripted info source and clock."""

from __future__ import annotations

import contextlib

import pytest

from quire_api.errors import Unavailable
from quire_placement.tracker import WeightSettings, WeightTracker
from tests.unit.fakes import ManualClock


class ScriptedInfo:
    def __init__(self) -> None:
        self.free: dict[str, int] = {}
        self.failing: set[str] = set()
        self.asked: list[str] = []

    async def disk(self, bookie_id: str, timeout_seconds: float) -> tuple[int, int]:
        self.asked.append(bookie_id)
        if bookie_id in self.failing:
            raise Unavailable(f"bookie {bookie_id} is down")
        return self.free[bookie_id], 1000


class ScriptedLoads:
    def __init__(self) -> None:
        self.factors: dict[str, tuple[float, float]] = {}

    async def load_factors(self) -> dict[str, tuple[float, float]]:
        return dict(self.factors)


SETTINGS = WeightSettings(enabled=True, info_interval_seconds=60, info_retry_interval_seconds=10)


@pytest.fixture
def parts():
    info, loads, clock = ScriptedInfo(), ScriptedLoads(), ManualClock(1_000_000.0)
    failures: list[str] = []
    tracker = WeightTracker(SETTINGS, info, loads, clock=clock, on_poll_failure=failures.append)
    return tracker, info, loads, clock, failures


async def test_everyone_is_polled_then_only_newcomers_until_the_interval(parts):
    tracker, info, _, clock, _ = parts
    info.free = {"a": 100, "b": 300, "c": 600}
    assert tracker.membership(["a", "b"]) == {"a", "b"}
    await tracker.poll(tracker.due())
    assert sorted(info.asked) == ["a", "b"] and tracker.due() == []

    assert tracker.membership(["a", "b", "c"]) == {"c"}  # a join is polled at once
    assert tracker.due() == ["c"]
    await tracker.poll(tracker.due())
    clock.now += 61
    assert tracker.due() == ["a", "b", "c"]


async def test_a_bookie_that_leaves_is_dropped_at_once(parts):
    tracker, info, _, _, _ = parts
    info.free = {"a": 100, "b": 300}
    tracker.membership(["a", "b"])
    await tracker.poll(tracker.due())
    tracker.membership(["a"])
    assert set(tracker.disk) == {"a"} and set(tracker.draw_weights()) == {"a"}


async def test_unreadable_info_drops_the_bookie_until_a_retry_succeeds(parts):
    tracker, info, _, clock, failures = parts
    info.free = {"a": 100, "b": 300}
    tracker.membership(["a", "b"])
    await tracker.poll(tracker.due())
    clock.now += 61
    info.failing = {"b"}
    await tracker.poll(tracker.due())
    assert set(tracker.disk) == {"a"} and failures == ["b"] and tracker.unknown() == ["b"]
    assert tracker.due() == []  # not before the retry interval
    clock.now += 10
    assert tracker.due() == ["b"]
    info.failing = set()
    await tracker.poll(tracker.due())
    assert set(tracker.disk) == {"a", "b"}


async def test_weights_follow_free_space_with_fresh_load_factors_only(parts):
    tracker, info, loads, clock, _ = parts
    info.free = {"a": 100, "b": 300}
    loads.factors = {"b": (0.5, clock.now - 10), "a": (0.1, clock.now - 10_000)}  # a's is stale
    tracker.membership(["a", "b"])
    await tracker.poll(tracker.due())
    weights = tracker.draw_weights()
    assert weights["a"] == pytest.approx(0.25) and weights["b"] == pytest.approx(0.75 * 0.5)
    (row_a, _), (row_b, _) = tracker.table()
    assert (row_a.load_factor, row_b.load_factor) == (1.0, 0.5)
    assert row_a.probability + row_b.probability == pytest.approx(1.0)


async def test_disabled_disk_weights_draw_uniformly(parts):
    _, info, _, clock, _ = parts
    tracker = WeightTracker(WeightSettings(enabled=False), info, None, clock=clock)
    info.free = {"a": 1, "b": 1000}
    tracker.membership(["a", "b"])
    await tracker.poll(tracker.due())
    assert tracker.draw_weights() == {}


async def test_a_join_during_a_round_wakes_the_next_round():
    """A membership change that lands while a round runs must not be lost:
    the newcomer is polled at once, not at the next full interval (60 s)."""
    import asyncio

    info = ScriptedInfo()
    tracker = WeightTracker(SETTINGS, info, ScriptedLoads(), clock=ManualClock(1_000_000.0))  # made in the test's loop
    info.free = {"a": 100, "b": 300}
    calls = 0

    async def writable() -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            tracker.wake()  # "b" joins while this round is reading the membership
            return ["a"]
        return ["a", "b"]

    polled_b = asyncio.Event()
    disk = info.disk

    async def watched_disk(bookie_id: str, timeout_seconds: float) -> tuple[int, int]:
        if bookie_id == "b":
            polled_b.set()
        return await disk(bookie_id, timeout_seconds)

    info.disk = watched_disk  # type: ignore[method-assign]
    running = asyncio.create_task(tracker.run(writable))
    try:
        await asyncio.wait_for(polled_b.wait(), 5)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
