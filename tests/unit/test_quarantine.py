"""The gateway's bookie quarantine and choosing around it, with a fake clock
and fake choosers; and two write handles sharing one quarantine."""

from __future__ import annotations

import asyncio

import pytest

from quire_api.errors import Reason, Unavailable
from quire_gateway.write.handle import WriteHandle
from quire_gateway.write.quarantine import Quarantine, choose_avoiding
from tests.unit.fakes import FakeClusterCalls, ManualClock, new_metadata
from tests.unit.test_write_handle import FAST, LEDGER, write


def test_a_bookie_leaves_quarantine_after_its_time_or_when_lifted():
    clock = ManualClock()
    quarantine = Quarantine(30.0, clock)
    quarantine.add("a")
    quarantine.add("b")
    assert quarantine.members() == {"a", "b"}
    quarantine.lift("b", "registered again")
    assert quarantine.members() == {"a"}
    clock.now += 29.9
    assert quarantine.members() == {"a"}
    clock.now += 0.2
    assert quarantine.members() == set()


def test_a_zero_quarantine_holds_nobody():
    quarantine = Quarantine(0.0)
    quarantine.add("a")
    assert quarantine.members() == set()


def chooser(bookies: list[str], size: int, calls: list[list[str]]):  # type: ignore[no-untyped-def]
    async def choose(exclude: list[str]) -> list[str]:
        calls.append(exclude)
        left = [b for b in bookies if b not in exclude]
        if len(left) < size:
            raise Unavailable(f"needs {size}, {len(left)} are available", Reason.NOT_ENOUGH_BOOKIES)
        return left[:size]

    return choose


async def test_avoided_bookies_are_left_out_while_enough_others_remain():
    calls: list[list[str]] = []
    chosen = await choose_avoiding({"a"}, chooser(["a", "b", "c", "d"], 3, calls), "test")
    assert chosen == ["b", "c", "d"] and calls == [["a"]]


async def test_avoided_bookies_are_taken_again_when_too_few_remain_but_required_ones_never():
    calls: list[list[str]] = []
    chosen = await choose_avoiding({"a", "x"}, chooser(["a", "b", "c", "x"], 3, calls), "test", must_exclude={"x"})
    assert chosen == ["a", "b", "c"]
    assert calls == [["a", "x"], ["x"]]
    with pytest.raises(Unavailable):
        await choose_avoiding(set(), chooser(["a", "b"], 3, []), "test")


async def test_other_errors_are_not_retried():
    async def broken(exclude: list[str]) -> list[str]:
        raise Unavailable("placement is down", Reason.SERVICE_UNAVAILABLE)

    with pytest.raises(Unavailable) as caught:
        await choose_avoiding({"a"}, broken, "test")
    assert caught.value.reason == Reason.SERVICE_UNAVAILABLE


async def test_a_bookie_one_handle_replaced_is_avoided_by_another():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d", "e"])
    quarantine = Quarantine(60.0)
    first = WriteHandle(remote, remote, LEDGER, new_metadata(LEDGER, ["a", "b", "c"], 2, 2), 0, FAST, quarantine)  # type: ignore[arg-type]
    remote.metadata = first.metadata
    remote.bookies["b"].down = True
    await write(first, [b"x%d" % i for i in range(3)])
    assert quarantine.members() == {"b"}
    remote.bookies["b"].down = False  # reachable again, still in quarantine

    other = LEDGER.__class__(1, 3)
    second = WriteHandle(remote, remote, other, new_metadata(other, ["a", "c", "d"], 2, 2), 0, FAST, quarantine)  # type: ignore[arg-type]
    remote.metadata, remote.version = second.metadata, 0
    remote.bookies["d"].down = True
    await asyncio.gather(*await second.submit([b"y%d" % i for i in range(3)]))
    assert list(second.ensemble) == ["a", "c", "e"]  # not b: quarantined by the first handle
    assert quarantine.members() == {"b", "d"}


async def test_a_bookie_that_stores_entries_again_leaves_quarantine():
    remote = FakeClusterCalls(["a", "b", "c"])
    quarantine = Quarantine(60.0)
    quarantine.add("b")  # failed in some other ledger
    handle = WriteHandle(remote, remote, LEDGER, new_metadata(LEDGER, ["a", "b", "c"], 3, 3), 0, FAST, quarantine)  # type: ignore[arg-type]
    remote.metadata = handle.metadata
    await write(handle, [b"x"])
    assert quarantine.members() == set()
