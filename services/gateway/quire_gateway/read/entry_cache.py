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

Bounded by bytes of payload (least recently used out first), and by time:
an entry nobody has written or read for `idle_seconds` leaves, as a Pulsar
broker evicts entries past a time threshold. The readers it serves are at
the tail or reading back what they just wrote; one further behind reads from
the bookies, whose own caches hold what is read often, and an idle gateway
gives its cache's memory back (`expire_idle_entries`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from quire_api.ids import LedgerId
from quire_common.memory import WORTH_GIVING_BACK_BYTES, give_back_free_memory
from quire_proto.common.v1 import common_pb2

DEFAULT_ENTRY_CACHE_BYTES = 64 * 1024 * 1024
DEFAULT_IDLE_SECONDS = 60.0
# Per cached entry beyond its payload: key, value tuple and dict slot.
ENTRY_OVERHEAD_BYTES = 200


def incarnation(metadata: common_pb2.LedgerMetadata) -> int:
    """Which life of a ledger id the metadata describes (its creation time, ns)."""
    return metadata.create_time.seconds * 1_000_000_000 + metadata.create_time.nanos


class CachedEntry(NamedTuple):
    """A cached entry as the cache hands it out."""

    payload: bytes
    length: int  # the ledger's cumulative length including this entry


# Entries let go (idle, or of a deleted ledger) per turn of the event loop: about 2 ms
# of it for 1 KiB entries, where a full cache let go at once held the loop for 48 ms.
SLICE_ENTRIES = 2048

# Inside, a key is (scope id, ledger id, the ledger's incarnation, entry id) and a value
# (payload, length, when it was last put or read by the cache's clock): plain tuples of
# numbers and bytes, which the garbage collector stops tracking after its first pass over
# them. A cache of 64 MiB of 1 KiB entries is tens of thousands of them, and as objects
# of a class the collector walked them all in every full pass (docs/decisions.md,
# "Startup objects frozen out of the collector").
_Key = tuple[int, int, int, int]
_Value = tuple[bytes, int, float]


@dataclass
class EntryCacheStats:
    hits: int = 0
    misses: int = 0
    inserts: int = 0
    evictions: int = 0
    expired: int = 0


class EntryCache:
    def __init__(
        self,
        capacity_bytes: int,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity_bytes = capacity_bytes
        self.idle_seconds = idle_seconds  # 0: entries leave only to make room
        self._clock = clock
        self.size_bytes = 0
        self.stats = EntryCacheStats()
        self._entries: OrderedDict[_Key, _Value] = OrderedDict()
        # Each ledger's keys, so that dropping a deleted ledger costs its own
        # entries, not a scan of the whole cache. Keyed by (scope id, ledger id),
        # which a LedgerId (a tuple of the two) finds as well.
        self._keys_of: dict[tuple[int, int], set[_Key]] = {}

    @property
    def enabled(self) -> bool:
        return self.capacity_bytes > 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, ledger_id: LedgerId, life: int, entry_id: int, payload: bytes, length: int) -> None:
        """Keep a confirmed, digest-checked entry (or refresh its place)."""
        self.put_run(ledger_id, life, [(entry_id, payload, length)])

    def put_run(self, ledger_id: LedgerId, life: int, entries: list[tuple[int, bytes, int]]) -> None:
        """`put` of each (entry id, payload, length) of one ledger, in that
        order: a writer's LAC moves over many entries at once, and the
        ledger's key set and the clock are looked up once for all of them."""
        capacity = self.capacity_bytes
        cached = self._entries
        keys = self._keys_of.get(ledger_id)
        if keys is None:
            keys = self._keys_of[ledger_id] = set()
        now = self._clock()
        scope_id, ledger = ledger_id
        added = 0
        for entry_id, payload, length in entries:
            cost = len(payload) + ENTRY_OVERHEAD_BYTES
            if cost > capacity:
                continue
            key = (scope_id, ledger, life, entry_id)
            old = cached.pop(key, None)
            if old is not None:
                self.size_bytes -= len(old[0]) + ENTRY_OVERHEAD_BYTES
            else:
                keys.add(key)
            cached[key] = (payload, length, now)
            self.size_bytes += cost
            added += 1
        self.stats.inserts += added
        if not keys:
            del self._keys_of[ledger_id]  # every entry was too large to keep
        while self.size_bytes > capacity:
            evicted_key, evicted = cached.popitem(last=False)
            self.size_bytes -= len(evicted[0]) + ENTRY_OVERHEAD_BYTES
            self._forget_key(evicted_key)
            self.stats.evictions += 1

    def _forget_key(self, key: _Key) -> None:
        ledger = (key[0], key[1])
        keys = self._keys_of[ledger]
        keys.discard(key)
        if not keys:
            del self._keys_of[ledger]

    def get(self, ledger_id: LedgerId, life: int, entry_id: int, *, count_miss: bool = True) -> CachedEntry | None:
        """The entry, or None; `count_miss` off when a miss here is counted
        where the read goes on (a look at what is at hand)."""
        key = (ledger_id[0], ledger_id[1], life, entry_id)
        entry = self._entries.get(key)
        if entry is None:
            if count_miss:
                self.stats.misses += 1
            return None
        payload, length, _ = entry
        self._entries[key] = (payload, length, self._clock())
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return CachedEntry(payload, length)

    def contains(self, ledger_id: LedgerId, life: int, entry_id: int) -> bool:
        return (ledger_id[0], ledger_id[1], life, entry_id) in self._entries

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

    def expire_idle(self, most: int = 0) -> int:
        """Let go of the entries unused for `idle_seconds`, at most `most` of
        them (0: all); the bytes freed. The least recently used come first, so
        this stops at the first entry still in use: it costs what it removes."""
        if self.idle_seconds <= 0:
            return 0
        horizon = self._clock() - self.idle_seconds
        freed = 0
        left = most or len(self._entries)
        while self._entries and left:
            key, (payload, _, used_at) = next(iter(self._entries.items()))
            if used_at > horizon:
                break
            left -= 1
            del self._entries[key]
            self._forget_key(key)
            freed += len(payload) + ENTRY_OVERHEAD_BYTES
            self.stats.expired += 1
        self.size_bytes -= freed
        return freed

    def drop_ledger(self, ledger_id: LedgerId, most: int = 0) -> int:
        """Forget the entries of a ledger (it was deleted), at most `most` of
        them (0: all); how many went."""
        keys = self._keys_of.get(ledger_id)
        if keys is None:
            return 0
        doomed = len(keys) if not most or most >= len(keys) else most
        for _ in range(doomed):
            self.size_bytes -= len(self._entries.pop(keys.pop())[0]) + ENTRY_OVERHEAD_BYTES
        if not keys:
            del self._keys_of[ledger_id]
        return doomed

    def status(self) -> dict[str, int]:
        return {
            "capacity_bytes": self.capacity_bytes,
            "size_bytes": self.size_bytes,
            "entries": len(self._entries),
            "hits": self.stats.hits,
            "misses": self.stats.misses,
            "inserts": self.stats.inserts,
            "evictions": self.stats.evictions,
            "expired": self.stats.expired,
        }


async def drop_ledger_entries(cache: EntryCache, ledger_id: LedgerId) -> int:
    """`cache.drop_ledger`, SLICE_ENTRIES at a time with the loop's other work
    between; how many went. The entries are right while the ledger's metadata
    exists and never served once it is gone (reads find no metadata; a ledger
    made again with its id is another incarnation), so they may go over
    several turns."""
    dropped = 0
    while True:
        went = cache.drop_ledger(ledger_id, most=SLICE_ENTRIES)
        dropped += went
        if went < SLICE_ENTRIES:
            return dropped
        await asyncio.sleep(0)


async def expire_idle_entries(cache: EntryCache) -> None:
    """Every few seconds, drop the entries left idle, and once that frees a
    megabyte or more, give the memory back to the OS (the gateway's RSS
    otherwise stays at the cache's high-water mark for good). They go
    SLICE_ENTRIES at a time, the loop's other work between."""
    if cache.idle_seconds <= 0 or not cache.enabled:
        return
    freed_since_given_back = 0
    while True:
        await asyncio.sleep(min(10.0, cache.idle_seconds / 4))
        while True:
            expired_before = cache.stats.expired
            freed_since_given_back += cache.expire_idle(most=SLICE_ENTRIES)
            if cache.stats.expired - expired_before < SLICE_ENTRIES:
                break  # no idle entry left
            await asyncio.sleep(0)
        if freed_since_given_back >= WORTH_GIVING_BACK_BYTES:
            freed_since_given_back = 0
            await asyncio.to_thread(give_back_free_memory)
