"""The ledger states a bookie keeps in memory: the most recently written,
up to a bound; any other is read from the store when asked for.

A bookie holds a state (master key, fence, last entry, LAC) for every ledger
it has a copy of, and every state is in the store: its record, written in
the same batch as the entries when its master key, fence or explicit LAC
changes, and its last entry and LAC, which the stored entries tell
(storage.py, `read_state`). Keeping all of them in memory made a bookie's
memory grow with what it holds (about 260 bytes per ledger: 26 MB at
100,000 ledgers, 26 GB at 100,000,000). The ledgers written now are few, and
their states are checked on every add; the rest are asked about rarely (a
read's existence check, a recovery's LAC). So the writer keeps the states it
last wrote, up to `capacity`, and a miss costs one read of the store's
ledger column (BookKeeper keeps its ledgers' index files open the same way,
up to a bound).

Threads: the committer's writer thread alone changes the cache (through
`get_for_write`, `update`, `remove` and `reload`); the event loop only reads,
and a miss on the loop reads the store without caching. A state leaves the
cache only after the write that stored it, so a reader who misses finds it in
the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from quire_api.ids import LedgerId
from quire_bookie.storage import NO_ENTRY, LedgerState


class StateStore(Protocol):
    def read_state(self, ledger_id: LedgerId) -> LedgerState | None: ...

    def count_states(self) -> int: ...

    def state_ledger_ids(self) -> list[LedgerId]: ...


class LedgerStates:
    def __init__(self, store: StateStore, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a ledger state cache holds at least one ledger, not {capacity}")
        self._store = store
        self.capacity = capacity
        # Insertion order is recency: a state written again moves to the end.
        self._recent: dict[LedgerId, LedgerState] = {}
        self._count = store.count_states()

    def __len__(self) -> int:
        """How many ledgers have a state (cached or not)."""
        return self._count

    @property
    def cached(self) -> int:
        return len(self._recent)

    def get(self, ledger_id: LedgerId) -> LedgerState | None:
        """The ledger's state, or None when this bookie has none. From any
        thread; a miss reads the store and caches nothing."""
        state = self._recent.get(ledger_id)
        return state if state is not None else self._store.read_state(ledger_id)

    def get_for_write(self, ledger_id: LedgerId) -> LedgerState | None:
        """The writer's get: a state read from the store joins the cache (not
        evicting anything until `update`, so that `update` can tell a new
        ledger from one read back)."""
        state = self._recent.get(ledger_id)
        if state is None:
            state = self._store.read_state(ledger_id)
            if state is not None:
                self._recent[ledger_id] = state
        return state

    def update(self, written: dict[LedgerId, LedgerState]) -> list[LedgerId]:
        """States just stored (every one of them read by `get_for_write`
        first, so those not cached are new ledgers); then the least recently
        written leave the cache. Called after every batch, written or not.
        Returns the ledgers whose LAC the written states moved."""
        recent = self._recent
        moved: list[LedgerId] = []
        for ledger_id, state in written.items():
            before = recent.pop(ledger_id, None)
            if before is None:
                self._count += 1
                if state.lac != NO_ENTRY:
                    moved.append(ledger_id)
            elif state.lac != before.lac:
                moved.append(ledger_id)
            recent[ledger_id] = state
        while len(recent) > self.capacity:
            del recent[next(iter(recent))]
        return moved

    def remove(self, ledger_ids: Iterable[LedgerId], existed: Iterable[bool]) -> None:
        """Ledgers deleted from the store; `existed` says which had a state."""
        for ledger_id, had_state in zip(ledger_ids, existed, strict=True):
            self._recent.pop(ledger_id, None)
            self._count -= int(had_state)

    def reload(self) -> None:
        """After the store was reopened (a failed write may or may not have
        reached it): forget the cache and count again."""
        self._recent.clear()
        self._count = self._store.count_states()

    def ledger_ids(self) -> list[LedgerId]:
        """Every ledger with a state, from the store (a scan: for the garbage
        collector's pass, not for a request's path)."""
        return self._store.state_ledger_ids()
