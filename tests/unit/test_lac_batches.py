"""Explicit LAC writes gathered per bookie (quire_gateway.write.lac_batches)."""

import asyncio

import pytest

from quire_api.errors import PermissionDenied, Unavailable
from quire_api.ids import LedgerId
from quire_gateway.write.lac_batches import LacBatches, LacWrite


class Bookies:
    """Answers each batch once `release` is set; records what each call carried."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[LacWrite]]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.refuse: set[LedgerId] = set()
        self.down = False

    async def send(self, bookie_id: str, writes: list[LacWrite]) -> list[int | Exception]:
        self.calls.append((bookie_id, writes))
        await self.release.wait()
        if self.down:
            raise Unavailable(f"bookie {bookie_id} is down")
        return [PermissionDenied("wrong key") if w.ledger_id in self.refuse else w.last_add_confirmed for w in writes]


async def test_writes_that_wait_together_leave_in_one_call_per_bookie():
    bookies = Bookies()
    batches = LacBatches(bookies.send)  # type: ignore[arg-type]
    ledgers = [LedgerId(1, n) for n in range(5)]
    answers = await asyncio.gather(
        *(batches.write(bookie, ledger, b"k", n) for n, ledger in enumerate(ledgers) for bookie in ("b1", "b2"))
    )
    assert answers == [n for n in range(5) for _ in ("b1", "b2")]
    assert sorted((bookie, len(writes)) for bookie, writes in bookies.calls) == [("b1", 5), ("b2", 5)]


async def test_while_a_call_is_answered_the_next_writes_gather_behind_it():
    bookies = Bookies()
    bookies.release.clear()
    batches = LacBatches(bookies.send)  # type: ignore[arg-type]
    first = asyncio.create_task(batches.write("b1", LedgerId(1, 1), b"k", 3))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    later = [asyncio.create_task(batches.write("b1", LedgerId(1, n), b"k", n)) for n in (2, 3)]
    again = asyncio.create_task(batches.write("b1", LedgerId(1, 2), b"k", 7))  # same ledger: the higher LAC
    await asyncio.sleep(0)
    assert len(bookies.calls) == 1
    bookies.release.set()
    assert await first == 3
    assert [await task for task in later] == [7, 3] and await again == 7
    assert [[(w.ledger_id.ledger_id, w.last_add_confirmed) for w in writes] for _, writes in bookies.calls] == [
        [(1, 3)],
        [(2, 7), (3, 3)],
    ]


async def test_each_write_gets_its_own_refusal_and_a_failed_call_fails_them_all():
    bookies = Bookies()
    bookies.refuse = {LedgerId(1, 2)}
    batches = LacBatches(bookies.send)  # type: ignore[arg-type]
    ok, refused = await asyncio.gather(
        batches.write("b1", LedgerId(1, 1), b"k", 1),
        batches.write("b1", LedgerId(1, 2), b"k", 1),
        return_exceptions=True,
    )
    assert ok == 1 and isinstance(refused, PermissionDenied)
    bookies.down = True
    with pytest.raises(Unavailable):
        await batches.write("b1", LedgerId(1, 1), b"k", 2)
    await batches.close()


async def test_an_unexpected_failure_of_the_call_fails_its_writes_rather_than_leaving_them_waiting():
    async def broken(bookie_id: str, writes: list[LacWrite]) -> list[int | Exception]:
        raise RuntimeError("a bug")

    batches = LacBatches(broken)  # type: ignore[arg-type]
    with pytest.raises(Unavailable, match="a bug"):
        await asyncio.wait_for(batches.write("b1", LedgerId(1, 1), b"k", 1), 10)
