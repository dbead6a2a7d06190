"""Recently confirmed entries, kept in the gateway so read-after-write and
tailing readers need no bookie round trip (as a Pulsar broker's entry cache
or BookKeeper's read-ahead do). Domain code: no grpc here.

What goes in: only entries known to be confirmed, that is at or below a LAC
(the write handle's, a closed ledger's end, or one readers learned), with
their digests already checked (the gateway packed them itself, or unpacked
and checked them when it read them from a bookie). A confirmed entry's content
never changes, so a cached copy is never stale; the only thing that can
change is whether the ledger still exists. Keys therefore carry the ledger's
creation time: a ledger deleted and created again under the same id never
sees the old incarnation's entries. `drop_ledger` frees a deleted ledger's
entries at once. Whether a caller may see an entry (LAC rules) is decided
before the cache is asked, exactly as for a bookie read.

Bounded by bytes of payload (least recently used out first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from quire_api.ids import LedgerId
from quire_proto.common.v1 import common_pb2

DEFAULT_ENTRY_CACHE_BYTES = 64 * 1024 * 1024
# Per cached entry beyond its payload: key, value tuple and dict slot.
ENTRY_OVERHEAD_BYTES = 200


def incarnation(metadata: common_pb2.LedgerMetadata) -> int:
    """Which life of a ledger id the metadata describes (its creation time, ns)."""
    return metadata.create_time.seconds * 1_000_000_000 + metadata.create_time.nanos


@dataclass(frozen=True, slots=True)
class CachedEntry:
    payload: bytes
    length: int  # the ledger's cumulative length including this entry


@dataclass
class EntryCacheStats:
    hits: int = 0
    misses: int = 0
    inserts: int = 0
    evictions: int = 0


class EntryCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self.stats = EntryCacheStats()
        self._entries: OrderedDict[tuple[LedgerId, int, int], CachedEntry] = OrderedDict()
        # Each ledger's keys, so that dropping a deleted ledger costs its own
        # entries, not a scan of the whole cache.
        self._keys_of: dict[LedgerId, set[tuple[LedgerId, int, int]]] = {}

    @property
    def enabled(self) -> bool:
        return self.capacity_bytes > 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, ledger_id: LedgerId, life: int, entry_id: int, payload: bytes, length: int) -> None:
        """Keep a confirmed, digest-checked entry (or refresh its place)."""
        cost = len(payload) + ENTRY_OVERHEAD_BYTES
        if cost > self.capacity_bytes:
            return
        key = (ledger_id, life, entry_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.size_bytes -= len(old.payload) + ENTRY_OVERHEAD_BYTES
        else:
            self._keys_of.setdefault(ledger_id, set()).add(key)
        self._entries[key] = CachedEntry(payload, length)
        self.size_bytes += cost
        self.stats.inserts += 1
        while self.size_bytes > self.capacity_bytes:
            evicted_key, evicted = self._entries.popitem(last=False)
            self.size_bytes -= len(evicted.payload) + ENTRY_OVERHEAD_BYTES
            self._forget_key(evicted_key)
            self.stats.evictions += 1

    def _forget_key(self, key: tuple[LedgerId, int, int]) -> None:
        keys = self._keys_of[key[0]]
        keys.discard(key)
        if not keys:
            del self._keys_of[key[0]]

    def get(self, ledger_id: LedgerId, life: int, entry_id: int) -> CachedEntry | None:
        key = (ledger_id, life, entry_id)
        entry = self._entries.get(key)
        if entry is None:
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return entry

    def contains(self, ledger_id: LedgerId, life: int, entry_id: int) -> bool:
        return (ledger_id, life, entry_id) in self._entries

    def run(self, ledger_id: LedgerId, life: int, first: int, last: int) -> list[tuple[int, CachedEntry]]:
        """The cached entries first, first+1, ... up to `last`, stopping at the
        first one not cached (a read serves those and asks bookies for the rest)."""
        found: list[tuple[int, CachedEntry]] = []
        for entry_id in range(first, last + 1):
            entry = self.get(ledger_id, life, entry_id)
            if entry is None:
                break
            found.append((entry_id, entry))
        return found

    def drop_ledger(self, ledger_id: LedgerId) -> int:
        """Forget every entry of a ledger (it was deleted); how many went."""
        doomed = self._keys_of.pop(ledger_id, set())
        for key in doomed:
            self.size_bytes -= len(self._entries.pop(key).payload) + ENTRY_OVERHEAD_BYTES
        return len(doomed)

    def status(self) -> dict[str, int]:
        return {
            "capacity_bytes": self.capacity_bytes,
            "size_bytes": self.size_bytes,
            "entries": len(self._entries),
            "hits": self.stats.hits,
            "misses": self.stats.misses,
            "inserts": self.stats.inserts,
            "evictions": self.stats.evictions,
        }
