"""Group commit and ledger-state rules against a fake store (no RocksDB)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable

import pytest

from quire_api.errors import FailedPrecondition, PermissionDenied, Reason, ResourceExhausted, Unavailable
from quire_api.ids import LedgerId
from quire_bookie.journal import AddOp, FenceOp, GroupCommitter, LacOp, apply
from quire_bookie.ledger_states import LedgerStates
from quire_bookie.storage import LedgerState

LEDGER = LedgerId(1, 1)
KEY = b"k" * 20
OTHER_KEY = b"o" * 20


class FakeStore:
    """Records each write and keeps the states written; a write can be held
    until the test releases it."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[LedgerId, int, bytes]]] = []
        self.synced: list[bool] = []  # per write, whether it was to be synced
        self.states: dict[LedgerId, LedgerState] = {}
        self.release = threading.Event()
        self.release.set()

    def write(self, entries, states, sync=True) -> None:  # type: ignore[no-untyped-def]
        self.release.wait(10)
        self.batches.append(list(entries))
        self.synced.append(sync)
        self.states.update(states)

    def read_state(self, ledger_id: LedgerId) -> LedgerState | None:
        return self.states.get(ledger_id)

    def count_states(self) -> int:
        return len(self.states)

    def state_ledger_ids(self) -> list[LedgerId]:
        return sorted(self.states)


def committer_on(store: FakeStore, **settings) -> GroupCommitter:  # type: ignore[no-untyped-def]
    return GroupCommitter(store, LedgerStates(store, 100), **settings)  # type: ignore[arg-type]


def add(entry_id: int, size: int = 10) -> tuple[int, int, bytes]:
    return entry_id, entry_id - 1, b"x" * size


def future() -> asyncio.Future:  # type: ignore[type-arg]
    return asyncio.get_running_loop().create_future()


async def test_state_rules_master_key_fence_and_explicit_lac():
    state = apply(AddOp(LEDGER, KEY, [add(0), add(1)], False, future()), LedgerState())
    assert (state.master_key, state.last_entry_id, state.last_add_confirmed) == (KEY, 1, 0)
    with pytest.raises(PermissionDenied):
        apply(AddOp(LEDGER, OTHER_KEY, [add(2)], False, future()), state)
    with pytest.raises(PermissionDenied):
        apply(FenceOp(LEDGER, OTHER_KEY, future()), state)
    state = apply(LacOp(LEDGER, KEY, 5, future()), state)
    assert state.lac == 5
    assert apply(LacOp(LEDGER, KEY, 3, future()), state).lac == 5  # the LAC never goes back
    fenced = apply(FenceOp(LEDGER, KEY, future()), state)
    assert fenced.fenced
    with pytest.raises(FailedPrecondition):
        apply(AddOp(LEDGER, KEY, [add(2)], False, future()), fenced)
    with pytest.raises(FailedPrecondition):
        apply(LacOp(LEDGER, KEY, 6, future()), fenced)
    assert apply(AddOp(LEDGER, KEY, [add(2)], True, future()), fenced).last_entry_id == 2


async def test_an_add_is_acknowledged_only_after_the_write_returns():
    store = FakeStore()
    store.release.clear()
    committer = committer_on(store)
    committer.start()
    adding = asyncio.create_task(committer.add(LEDGER, KEY, [add(0)], False))
    await asyncio.sleep(0.05)
    assert not adding.done(), "acknowledged before its write completed"
    store.release.set()
    await adding
    assert store.batches == [[(LEDGER, 0, b"x" * 10)]]
    await committer.stop()


async def test_adds_arriving_during_a_sync_share_the_next_one():
    store = FakeStore()
    store.release.clear()
    committer = committer_on(store)
    committer.start()
    first = asyncio.create_task(committer.add(LEDGER, KEY, [add(0)], False))
    await asyncio.sleep(0.05)  # the first write is now in progress
    rest = [asyncio.create_task(committer.add(LEDGER, KEY, [add(i)], False)) for i in range(1, 50)]
    await asyncio.sleep(0.05)
    store.release.set()
    await asyncio.gather(first, *rest)
    assert [len(batch) for batch in store.batches] == [1, 49]
    await committer.stop()


async def test_the_time_bound_waits_for_more_until_the_byte_bound_is_reached():
    store = FakeStore()
    # A long delay: only a full batch may end the wait.
    committer = committer_on(store, max_batch_bytes=100, max_delay_seconds=60)
    committer.start()
    first = asyncio.create_task(committer.add(LEDGER, KEY, [add(0, 40)], False))
    await asyncio.sleep(0.05)
    assert store.batches == [] and not first.done()  # waiting to gather more
    second = asyncio.create_task(committer.add(LEDGER, KEY, [add(1, 60)], False))
    await asyncio.gather(first, second)
    assert [len(batch) for batch in store.batches] == [2]
    await committer.stop()


async def test_without_a_delay_a_lone_add_is_written_at_once():
    store = FakeStore()
    committer = committer_on(store, max_batch_bytes=100, max_delay_seconds=0.0)
    committer.start()
    await committer.add(LEDGER, KEY, [add(0, 10)], False)
    assert len(store.batches) == 1
    await committer.stop()


async def test_the_byte_bound_splits_batches():
    store = FakeStore()
    store.release.clear()
    committer = committer_on(store, max_batch_bytes=100)
    committer.start()
    first = asyncio.create_task(committer.add(LEDGER, KEY, [add(0)], False))
    await asyncio.sleep(0.05)
    rest = [asyncio.create_task(committer.add(LEDGER, KEY, [add(i, 30)], False)) for i in range(1, 11)]
    await asyncio.sleep(0.05)
    store.release.set()
    await asyncio.gather(first, *rest)
    assert [len(batch) for batch in store.batches] == [1, 3, 3, 3, 1]
    await committer.stop()


async def test_stop_writes_everything_queued_then_refuses_new_adds():
    store = FakeStore()
    store.release.clear()
    committer = committer_on(store)
    committer.start()
    adds = [asyncio.create_task(committer.add(LEDGER, KEY, [add(i)], False)) for i in range(20)]
    await asyncio.sleep(0.05)
    stopping = asyncio.create_task(committer.stop())
    await asyncio.sleep(0.05)
    store.release.set()
    await stopping
    await asyncio.gather(*adds)  # every queued add was written and acknowledged
    assert sum(len(batch) for batch in store.batches) == 20
    assert committer.states.get(LEDGER).last_entry_id == 19
    with pytest.raises(Unavailable):
        await committer.add(LEDGER, KEY, [add(20)], False)


async def test_a_failed_write_fails_its_adds_and_stores_no_state():
    class BrokenStore(FakeStore):
        def write(self, entries, states, sync=True) -> None:  # type: ignore[no-untyped-def]
            raise OSError("disk gone")

    committer = committer_on(BrokenStore())
    committer.start()
    with pytest.raises(Unavailable, match="disk gone"):
        await committer.add(LEDGER, KEY, [add(0)], False)
    assert committer.states.get(LEDGER) is None and len(committer.states) == 0
    await committer.stop()


async def test_lac_moves_are_signalled_once_written():
    moved: list[LedgerId] = []
    committer = committer_on(FakeStore(), on_lac_moved=moved.append)
    committer.start()
    await committer.add(LEDGER, KEY, [add(0)], False)  # lac -1 in the header: no move
    assert moved == []
    await committer.add(LEDGER, KEY, [add(1)], False)  # lac 0
    assert moved == [LEDGER]
    await committer.write_lac(LEDGER, KEY, 7)
    assert moved == [LEDGER, LEDGER]
    await committer.stop()


async def test_explicit_lacs_alone_are_written_without_a_sync_of_their_own():
    """Adds and fences are synced before they are answered; a batch of explicit
    LACs alone is not (best effort: the next synced write covers it), and one
    that rides with an add is synced with it."""
    store = FakeStore()
    committer = committer_on(store)
    committer.start()
    await committer.add(LEDGER, KEY, [add(0)], False)
    await committer.write_lac(LEDGER, KEY, 0)
    await committer.fence(LedgerId(1, 2), KEY)
    store.release.clear()
    holding = asyncio.create_task(committer.add(LEDGER, KEY, [add(1)], False))
    await asyncio.sleep(0.05)  # that write is in progress: the next two share one batch
    together = [
        asyncio.create_task(committer.write_lac(LEDGER, KEY, 1)),
        asyncio.create_task(committer.add(LEDGER, KEY, [add(2)], False)),
    ]
    await asyncio.sleep(0.05)
    store.release.set()
    await asyncio.gather(holding, *together)
    assert store.synced == [True, False, True, True, True]
    await committer.stop()


class DeletingStore(FakeStore):
    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[tuple[LedgerId, int]] = []
        self.delete_batches: list[list[LedgerId]] = []

    def delete_ledgers(self, ledger_ids: list[LedgerId]) -> list[Callable[[], int]]:
        counts = []
        for ledger_id in ledger_ids:
            stored = sum(1 for batch in self.batches for entry in batch if entry[0] == ledger_id)
            self.deleted.append((ledger_id, stored))
            self.states.pop(ledger_id, None)
            counts.append(functools.partial(int, stored))  # counted as it was when deleted
        self.delete_batches.append(list(ledger_ids))
        return counts


async def test_a_delete_takes_effect_in_queue_order():
    store = DeletingStore()
    store.release.clear()
    committer = committer_on(store)
    committer.start()
    first = asyncio.create_task(committer.add(LEDGER, KEY, [add(0)], False))
    await asyncio.sleep(0.05)  # being written
    before = asyncio.create_task(committer.add(LEDGER, KEY, [add(1)], False))
    deleting = asyncio.create_task(committer.delete(LEDGER))
    after = asyncio.create_task(committer.add(LEDGER, OTHER_KEY, [add(0)], False))
    await asyncio.sleep(0.05)
    store.release.set()
    await asyncio.gather(first, before, after)
    assert await deleting == 2  # both earlier adds were written before the delete
    assert [len(batch) for batch in store.batches] == [1, 1, 1]  # the delete split the queue
    assert committer.states.get(LEDGER).master_key == OTHER_KEY  # the add after the delete started afresh
    await committer.stop()


async def test_deletes_queued_together_share_one_storage_call_and_keep_queue_order():
    store = DeletingStore()
    store.release.clear()
    others = [LedgerId(7, n) for n in range(3)]
    committer = committer_on(store)
    committer.start()
    first = asyncio.create_task(committer.add(LEDGER, KEY, [add(0)], False))
    await asyncio.sleep(0.05)  # being written
    deletes = [asyncio.create_task(committer.delete(ledger)) for ledger in [LEDGER, *others]]
    after = asyncio.create_task(committer.add(LEDGER, OTHER_KEY, [add(0)], False))
    await asyncio.sleep(0.05)
    store.release.set()
    await asyncio.gather(first, after)
    assert [await d for d in deletes] == [1, 0, 0, 0]
    assert store.delete_batches == [[LEDGER, *others]]  # one call for the four
    assert [len(batch) for batch in store.batches] == [1, 1]  # the add after them came after
    assert committer.states.get(LEDGER).master_key == OTHER_KEY
    await committer.stop()


async def test_a_delete_whose_count_is_lost_says_the_ledger_was_deleted():
    class LostCountStore(DeletingStore):
        def delete_ledgers(self, ledger_ids: list[LedgerId]) -> list[Callable[[], int]]:
            super().delete_ledgers(ledger_ids)

            def lost() -> int:
                raise RuntimeError("the store was closed or reopened after the delete; its count is lost")

            return [lost for _ in ledger_ids]

    store = LostCountStore()
    committer = committer_on(store)
    committer.start()
    await committer.add(LEDGER, KEY, [add(0)], False)
    with pytest.raises(Unavailable, match=f"ledger {LEDGER} was deleted, but its entries were not counted"):
        await committer.delete(LEDGER)
    assert [ledger for ledger, _ in store.deleted] == [LEDGER]
    await committer.stop()


class FullDiskStore(FakeStore):
    """Writes fail as RocksDB reports a full disk; reopening fails until `room` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.full = True
        self.room = False
        self.reopens = 0

    def write(self, entries, states, sync=True) -> None:  # type: ignore[no-untyped-def]
        if self.full:
            raise Exception("IO error: No space left on device: While appending to file: 000004.log")
        super().write(entries, states)

    def reopen(self) -> None:
        if not self.room:
            raise OSError(28, "No space left on device: 0 bytes free")
        self.reopens += 1
        self.full = False


async def test_a_full_disk_is_resource_exhausted_and_the_store_is_reopened_once_there_is_room():
    store = FullDiskStore()
    committer = committer_on(store)
    committer.start()
    try:
        for _ in range(2):  # the failed write, then the failed reopen
            with pytest.raises(ResourceExhausted) as refused:
                await committer.add(LEDGER, KEY, [add(0)], False)
            assert refused.value.reason == Reason.DISK_FULL
        assert store.batches == [] and store.reopens == 0
        store.room = True
        await committer.add(LEDGER, KEY, [add(0)], False)
        assert store.reopens == 1 and len(store.batches) == 1
    finally:
        await committer.stop()
