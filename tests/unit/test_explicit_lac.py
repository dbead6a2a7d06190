"""The explicit-LAC policy (write/explicit_lac.py) with a fake ledger and fake bookie writes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from quire_api.errors import Reason, Unavailable
from quire_api.ids import LedgerId
from quire_gateway.write.explicit_lac import ExplicitLacs

KEY = b"k" * 20


@dataclass(eq=False)
class FakeLedger:
    ledger_id: LedgerId
    ensemble: list[str] = field(default_factory=lambda: ["b1", "b2", "b3"])
    master_key: bytes = KEY
    lac: int = 0
    submits: int = 1
    published: list[int] = field(default_factory=list)

    def lac_to_publish(self, submits_when_quiet: int) -> int | None:
        return self.lac if self.submits == submits_when_quiet else None

    def lac_published(self, lac: int) -> None:
        self.published.append(lac)


class FakeBookies:
    def __init__(self, failing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.writes: list[tuple[str, LedgerId, int]] = []
        self.failing = failing

    def submit(self, bookie_id: str, ledger_id: LedgerId, master_key: bytes, lac: int) -> asyncio.Future[int]:
        self.writes.append((bookie_id, ledger_id, lac))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if bookie_id in self.failing:
            future.set_exception(Unavailable("down", Reason.BOOKIE_UNAVAILABLE))
        else:
            future.set_result(lac)
        return future


async def test_a_quiet_ledgers_lac_goes_to_each_bookie_after_the_pause_and_counts_as_published():
    bookies = FakeBookies()
    lacs = ExplicitLacs(0.05, bookies.submit)
    ledger = FakeLedger(LedgerId(1, 1), lac=7)
    lacs.quiet(ledger)
    assert bookies.writes == []  # not before the pause
    await asyncio.sleep(0.2)
    assert bookies.writes == [("b1", ledger.ledger_id, 7), ("b2", ledger.ledger_id, 7), ("b3", ledger.ledger_id, 7)]
    assert ledger.published == [7]


async def test_a_ledger_written_to_during_the_pause_is_not_published():
    bookies = FakeBookies()
    lacs = ExplicitLacs(0.05, bookies.submit)
    busy, idle = FakeLedger(LedgerId(1, 1)), FakeLedger(LedgerId(1, 2), lac=3)
    lacs.quiet(busy)
    lacs.quiet(idle)
    busy.submits += 1  # a new entry: it carries the LAC, no explicit write needed
    await asyncio.sleep(0.2)
    assert {ledger for _, ledger, _ in bookies.writes} == {idle.ledger_id}
    assert busy.published == [] and idle.published == [3]


async def test_published_once_any_bookie_has_it_and_not_when_none_has():
    some = FakeBookies(failing={"b1", "b2"})
    lacs = ExplicitLacs(0.01, some.submit)
    ledger = FakeLedger(LedgerId(1, 1), lac=5)
    lacs.quiet(ledger)
    await asyncio.sleep(0.1)
    assert ledger.published == [5]
    none = FakeBookies(failing={"b1", "b2", "b3"})
    lacs = ExplicitLacs(0.01, none.submit)
    ledger = FakeLedger(LedgerId(1, 2), lac=5)
    lacs.quiet(ledger)
    await asyncio.sleep(0.1)
    assert len(none.writes) == 3 and ledger.published == []


async def test_many_quiet_ledgers_share_one_timer_and_go_in_order():
    bookies = FakeBookies()
    lacs = ExplicitLacs(0.05, bookies.submit)
    ledgers = [FakeLedger(LedgerId(1, n), ensemble=["b1"], lac=n) for n in range(100)]
    for ledger in ledgers:
        lacs.quiet(ledger)
    lacs.quiet(ledgers[0])  # quiet again (its submits unchanged): now due last
    await asyncio.sleep(0.3)
    assert [lac for _, _, lac in bookies.writes] == [*range(1, 100), 0]
    assert all(ledger.published for ledger in ledgers)


async def test_zero_seconds_never_publishes():
    bookies = FakeBookies()
    lacs = ExplicitLacs(0, bookies.submit)
    lacs.quiet(FakeLedger(LedgerId(1, 1)))
    await asyncio.sleep(0.05)
    assert bookies.writes == []


async def test_ledgers_due_within_a_quarter_of_the_pause_leave_together():
    """Timer boundaries a quarter of the pause apart: ledgers falling due
    within one quarter are published in one firing, so their writes to each
    bookie can share one call."""
    loop = asyncio.get_running_loop()
    bookies = FakeBookies()
    lacs = ExplicitLacs(1.0, bookies.submit)
    step = lacs._granularity
    assert lacs._boundary(10 * step + step / 3) == lacs._boundary(10 * step + 2 * step / 3) == 11 * step
    firings: list[int] = []  # how many ledgers each firing published
    publish_due = lacs._publish_due

    def counted() -> None:
        before = len(bookies.writes)
        publish_due()
        firings.append(len(bookies.writes) - before)

    lacs._publish_due = counted  # type: ignore[method-assign]
    # Start just past a boundary's due window, then go quiet 5 ms apart: all within one quarter (0.25 s).
    start = loop.time()
    await asyncio.sleep(lacs._boundary(start + 1.0) - 1.0 - start + 0.001)
    ledgers = [FakeLedger(LedgerId(1, n), ensemble=["b1"]) for n in range(5)]
    for ledger in ledgers:
        lacs.quiet(ledger)
        await asyncio.sleep(0.005)
    await asyncio.sleep(1.5)
    assert firings == [5]
    assert all(ledger.published for ledger in ledgers)
