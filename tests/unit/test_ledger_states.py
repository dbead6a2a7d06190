"""The bookie's bounded cache of ledger states against a dict-backed store."""

from __future__ import annotations

from quire_api.ids import LedgerId
from quire_bookie.ledger_states import LedgerStates
from quire_bookie.storage import LedgerState


class DictStore:
    def __init__(self, states: dict[LedgerId, LedgerState] | None = None) -> None:
        self.states = dict(states or {})
        self.reads = 0

    def read_state(self, ledger_id: LedgerId) -> LedgerState | None:
        self.reads += 1
        return self.states.get(ledger_id)

    def count_states(self) -> int:
        return len(self.states)

    def state_ledger_ids(self) -> list[LedgerId]:
        return sorted(self.states)


def written(store: DictStore, cache: LedgerStates, states: dict[LedgerId, LedgerState]) -> None:
    """What the committer does per batch: read each state, store the batch, update."""
    for ledger_id in states:
        cache.get_for_write(ledger_id)
    store.states.update(states)
    cache.update(states)


def state(last_entry_id: int) -> LedgerState:
    return LedgerState(b"k", False, last_entry_id, last_entry_id - 1)


def test_the_cache_keeps_the_most_recently_written_up_to_its_capacity_and_reads_the_rest():
    store = DictStore({LedgerId(9, n): state(0) for n in range(5)})  # five ledgers from before a restart
    cache = LedgerStates(store, capacity=3)
    assert len(cache) == 5 and cache.cached == 0
    for n in range(10):
        written(store, cache, {LedgerId(1, n): state(n)})
    assert len(cache) == 15 and cache.cached == 3
    assert cache.get(LedgerId(1, 9)) == state(9) and cache.get(LedgerId(9, 4)) == state(0)
    reads = store.reads
    assert cache.get(LedgerId(1, 9)) == state(9) and store.reads == reads  # cached: no store read
    assert cache.get(LedgerId(1, 0)) == state(0) and store.reads == reads + 1  # evicted: read back
    assert cache.cached == 3  # a reader's miss caches nothing
    assert cache.get(LedgerId(2, 0)) is None


def test_a_ledger_written_again_is_counted_once_and_becomes_the_most_recent():
    store = DictStore()
    cache = LedgerStates(store, capacity=2)
    written(store, cache, {LedgerId(1, 1): state(0), LedgerId(1, 2): state(0)})
    written(store, cache, {LedgerId(1, 1): state(1)})  # 1 is now the most recent
    written(store, cache, {LedgerId(1, 3): state(0)})  # evicts 2, not 1
    assert len(cache) == 3
    reads = store.reads
    assert cache.get(LedgerId(1, 1)) == state(1) and store.reads == reads
    written(store, cache, {LedgerId(1, 2): state(1)})  # evicted, read back, written: not a new ledger
    assert len(cache) == 3


def test_a_batch_wider_than_the_capacity_counts_every_new_ledger():
    store = DictStore()
    cache = LedgerStates(store, capacity=2)
    written(store, cache, {LedgerId(1, n): state(0) for n in range(5)})
    assert len(cache) == 5 and cache.cached == 2
    written(store, cache, {LedgerId(1, n): state(1) for n in range(5)})  # all known already
    assert len(cache) == 5


def test_removed_ledgers_leave_the_count_and_a_reload_counts_the_store_again():
    store = DictStore()
    cache = LedgerStates(store, capacity=10)
    written(store, cache, {LedgerId(1, n): state(0) for n in range(4)})
    deleted = [LedgerId(1, 0), LedgerId(1, 7)]  # the second never had a state here
    existed = [cache.get(ledger_id) is not None for ledger_id in deleted]
    for ledger_id in deleted:
        store.states.pop(ledger_id, None)
    cache.remove(deleted, existed)
    assert len(cache) == 3 and cache.get(LedgerId(1, 0)) is None
    store.states[LedgerId(5, 5)] = state(3)  # the store, reopened, holds what it holds
    cache.reload()
    assert len(cache) == 4 and cache.cached == 0 and cache.ledger_ids() == sorted(store.states)


def test_an_update_names_the_ledgers_whose_lac_it_moved():
    """What long-polling readers are woken by: a new ledger with a LAC, a
    LAC that grew (from the entries or written explicitly), a state read
    back from the store; not a state whose LAC stayed."""
    store = DictStore({LedgerId(9, 1): state(4)})  # LAC 3, from before a restart
    cache = LedgerStates(store, capacity=8)
    first = {LedgerId(1, 1): state(1), LedgerId(1, 2): LedgerState(b"k", False, 0, -1)}
    for ledger_id in first:
        cache.get_for_write(ledger_id)
    assert cache.update(first) == [LedgerId(1, 1)]  # LAC -1 on a new ledger is no move
    again = {
        LedgerId(1, 1): LedgerState(b"k", False, 2, 0),  # a new entry whose header's LAC is the one known
        LedgerId(1, 2): LedgerState(b"k", False, 0, -1, explicit_lac=0),
        LedgerId(9, 1): state(5),
    }
    for ledger_id in again:
        cache.get_for_write(ledger_id)
    assert cache.update(again) == [LedgerId(1, 2), LedgerId(9, 1)]
    same = {LedgerId(9, 1): LedgerState(b"k", True, 5, 4)}  # fenced: the LAC did not move
    cache.get_for_write(LedgerId(9, 1))
    assert cache.update(same) == []
