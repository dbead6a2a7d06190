"""The gateway's entry cache: bounded by bytes, least recently used out,
incarnations of a ledger id kept apart, runs stop at the first gap."""

from __future__ import annotations

import asyncio
import gc
import random

from quire_api.ids import LedgerId
from quire_common.memory import WORTH_GIVING_BACK_BYTES
from quire_common.tasks import cancel_and_wait
from quire_gateway.read import entry_cache
from quire_gateway.read.entry_cache import ENTRY_OVERHEAD_BYTES, EntryCache, incarnation
from quire_proto.common.v1 import common_pb2
from tests.unit.fakes import ManualClock

LEDGER = LedgerId(1, 2)
OTHER = LedgerId(1, 3)


def test_keeps_and_returns_entries_and_counts_hits_and_misses():
    cache = EntryCache(1 << 20)
    cache.put(LEDGER, 7, 0, b"zero", 4)
    assert cache.get(LEDGER, 7, 0).payload == b"zero"
    assert cache.get(LEDGER, 7, 1) is None
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)


def test_cached_entries_leave_the_garbage_collector_once_it_has_seen_them():
    """A full cache holds tens of thousands of entries; were each an object
    the collector tracks, every full collection would walk them all (about
    40 ms of a loaded gateway's event loop)."""
    cache = EntryCache(1 << 30)
    payloads = [b"p%d" % entry_id for entry_id in range(10_000)]  # made before counting: bytes are not tracked anyway
    gc.collect()
    tracked_before = len(gc.get_objects())
    for start in range(0, 10_000, 100):
        cache.put_run(LEDGER, 7, [(e, payloads[e], e) for e in range(start, start + 100)])
    cache.put_run(OTHER, 7, [(0, b"other", 5)])
    hit = cache.get(LEDGER, 7, 9_999)  # a read replaces its value (when it was last used)
    assert hit is not None and (hit.payload, hit.length) == (b"p9999", 9_999)
    gc.collect()
    assert len(cache) == 10_001
    assert len(gc.get_objects()) - tracked_before < 100


def test_bounded_by_bytes_least_recently_used_out():
    entry = 1000
    cache = EntryCache(3 * (entry + ENTRY_OVERHEAD_BYTES))
    for entry_id in range(3):
        cache.put(LEDGER, 7, entry_id, b"x" * entry, entry_id)
    assert cache.get(LEDGER, 7, 0) is not None  # 0 is now the most recently used
    cache.put(LEDGER, 7, 3, b"x" * entry, 3)
    assert cache.get(LEDGER, 7, 1) is None, "the least recently used entry goes first"
    assert all(cache.contains(LEDGER, 7, e) for e in (0, 2, 3))
    assert cache.size_bytes <= cache.capacity_bytes and cache.stats.evictions == 1


def test_an_entry_larger_than_the_cache_is_not_kept_and_evicts_nothing():
    cache = EntryCache(5000)
    cache.put(LEDGER, 7, 0, b"a", 1)
    cache.put(LEDGER, 7, 1, b"x" * 6000, 6001)
    assert cache.contains(LEDGER, 7, 0) and not cache.contains(LEDGER, 7, 1)


def test_a_new_incarnation_of_a_ledger_id_never_sees_the_old_entries():
    cache = EntryCache(1 << 20)
    cache.put(LEDGER, 7, 0, b"old life", 8)
    assert cache.get(LEDGER, 8, 0) is None


def test_incarnation_is_the_creation_time():
    created = common_pb2.LedgerMetadata()
    created.create_time.seconds, created.create_time.nanos = 5, 6
    assert incarnation(created) == 5_000_000_006


def test_run_stops_at_the_first_entry_not_cached():
    cache = EntryCache(1 << 20)
    for entry_id in (3, 4, 6):
        cache.put(LEDGER, 7, entry_id, b"p%d" % entry_id, entry_id)
    assert [e for e, _ in cache.run(LEDGER, 7, 3, 6)] == [3, 4]
    assert cache.run(LEDGER, 7, 5, 6) == []


def test_dropping_a_ledger_frees_its_bytes_and_keeps_others():
    cache = EntryCache(1 << 20)
    cache.put(LEDGER, 7, 0, b"a" * 100, 100)
    cache.put(OTHER, 7, 0, b"b" * 100, 100)
    assert cache.drop_ledger(LEDGER) == 1
    assert not cache.contains(LEDGER, 7, 0) and cache.contains(OTHER, 7, 0)
    assert cache.size_bytes == 100 + ENTRY_OVERHEAD_BYTES


def test_a_run_is_kept_as_its_puts_one_by_one_would_keep_it():
    """put_run (a writer's LAC moving over many entries) leaves the cache as
    the same puts one at a time would: what fits, least recently used out,
    too large entries skipped, every key droppable with its ledger."""
    rng = random.Random(11)
    by_run, one_by_one = (EntryCache(capacity_bytes=12 * (100 + ENTRY_OVERHEAD_BYTES)) for _ in range(2))
    ledgers = [LedgerId(1, n) for n in range(3)]
    next_id = dict.fromkeys(ledgers, 0)
    for _ in range(200):
        ledger = rng.choice(ledgers)
        run = []
        for _ in range(rng.randrange(1, 20)):
            size = by_run.capacity_bytes if rng.random() < 0.05 else rng.randrange(50, 150)  # some too large
            run.append((next_id[ledger], b"x" * size, size))
            next_id[ledger] += 1
        by_run.put_run(ledger, 1, run)
        for entry_id, payload, length in run:
            one_by_one.put(ledger, 1, entry_id, payload, length)
        assert by_run.size_bytes == one_by_one.size_bytes <= by_run.capacity_bytes
        assert list(by_run._entries) == list(one_by_one._entries)
    assert by_run.stats.inserts == one_by_one.stats.inserts
    for ledger in ledgers:
        assert by_run.drop_ledger(ledger) == one_by_one.drop_ledger(ledger)
    assert len(by_run) == 0 and by_run.size_bytes == 0 and not by_run._keys_of


def test_a_zero_sized_cache_is_off():
    cache = EntryCache(0)
    cache.put(LEDGER, 7, 0, b"a", 1)
    assert not cache.enabled and len(cache) == 0


def test_dropping_after_evictions_and_refreshes_frees_exactly_what_is_left():
    rng = random.Random(7)
    cache = EntryCache(capacity_bytes=20 * (100 + ENTRY_OVERHEAD_BYTES))
    ledgers = [LedgerId(1, n) for n in range(4)]
    for _ in range(500):
        ledger = rng.choice(ledgers)
        if rng.random() < 0.05:
            cache.drop_ledger(ledger)
        else:
            cache.put(ledger, 1, rng.randrange(30), b"x" * 100, 0)
    for ledger in ledgers:
        held = sum(1 for entry_id in range(30) if cache.contains(ledger, 1, entry_id))
        assert cache.drop_ledger(ledger) == held
    assert len(cache) == 0 and cache.size_bytes == 0


def test_entries_unused_for_the_idle_time_leave_and_a_read_keeps_one():
    clock = ManualClock(1000.0)
    cache = EntryCache(1 << 20, idle_seconds=60, clock=clock)
    for entry_id in range(3):
        cache.put(LEDGER, 7, entry_id, b"x" * 100, entry_id)
    clock.now += 50
    assert cache.get(LEDGER, 7, 1) is not None  # read: its minute starts again
    cache.put(OTHER, 7, 0, b"y" * 100, 100)
    clock.now += 20  # 70 s since the first puts, 20 since the read and the put
    freed = cache.expire_idle()
    assert freed == 2 * (100 + ENTRY_OVERHEAD_BYTES) and cache.stats.expired == 2
    assert not cache.contains(LEDGER, 7, 0) and not cache.contains(LEDGER, 7, 2)
    assert cache.contains(LEDGER, 7, 1) and cache.contains(OTHER, 7, 0)
    assert cache.size_bytes == 2 * (100 + ENTRY_OVERHEAD_BYTES)
    clock.now += 60
    cache.expire_idle()
    assert len(cache) == 0 and cache.size_bytes == 0
    assert cache.drop_ledger(LEDGER) == 0, "an expired entry is forgotten by its ledger too"


def test_with_no_idle_time_entries_stay_until_room_is_needed():
    clock = ManualClock(1000.0)
    cache = EntryCache(1 << 20, idle_seconds=0, clock=clock)
    cache.put(LEDGER, 7, 0, b"x", 1)
    clock.now += 1e6
    assert cache.expire_idle() == 0 and cache.contains(LEDGER, 7, 0)


async def test_the_expiry_task_empties_an_idle_cache_and_gives_the_memory_back(monkeypatch):
    given_back: list[bool] = []
    monkeypatch.setattr(entry_cache, "give_back_free_memory", lambda: given_back.append(True) or True)
    cache = EntryCache(1 << 22, idle_seconds=0.04)
    for entry_id in range(2):
        cache.put(LEDGER, 7, entry_id, b"x" * WORTH_GIVING_BACK_BYTES, entry_id)
    expiring = asyncio.create_task(entry_cache.expire_idle_entries(cache))
    try:
        for _ in range(200):  # until emptied, at most 10 s
            if len(cache) == 0 and given_back:
                break
            await asyncio.sleep(0.05)
    finally:
        await cancel_and_wait(expiring)
    assert len(cache) == 0 and cache.size_bytes == 0 and given_back


def test_idle_entries_expire_at_most_so_many_a_call():
    clock = ManualClock(1000.0)
    cache = EntryCache(1 << 20, idle_seconds=60, clock=clock)
    for entry_id in range(5):
        cache.put(LEDGER, 7, entry_id, b"x" * 100, entry_id)
    clock.now += 61
    assert cache.expire_idle(most=2) == 2 * (100 + ENTRY_OVERHEAD_BYTES)
    assert [cache.contains(LEDGER, 7, entry_id) for entry_id in range(5)] == [False, False, True, True, True]
    assert cache.expire_idle(most=2) and cache.expire_idle(most=2) and len(cache) == 0


async def note_sizes_every_turn(cache: EntryCache, sizes_seen: set[int]) -> None:
    """Other work on the loop: the cache's size at each turn it gets."""
    while True:
        sizes_seen.add(len(cache))
        await asyncio.sleep(0)


async def test_the_expiry_task_lets_the_loop_run_between_slices(monkeypatch):
    monkeypatch.setattr(entry_cache, "SLICE_ENTRIES", 2)
    monkeypatch.setattr(entry_cache, "give_back_free_memory", lambda: True)
    cache = EntryCache(1 << 22, idle_seconds=0.04)
    for entry_id in range(6):
        cache.put(LEDGER, 7, entry_id, b"x" * 100, entry_id)
    sizes_seen: set[int] = set()
    watching = asyncio.create_task(note_sizes_every_turn(cache, sizes_seen))
    expiring = asyncio.create_task(entry_cache.expire_idle_entries(cache))
    try:
        for _ in range(200):  # until emptied, at most 10 s
            if len(cache) == 0:
                break
            await asyncio.sleep(0.05)
    finally:
        await cancel_and_wait(expiring)
        await cancel_and_wait(watching)
    assert len(cache) == 0
    assert {4, 2} <= sizes_seen  # the loop ran between the slices


async def test_a_deleted_ledgers_entries_go_a_slice_at_a_time_and_no_other_ledgers(monkeypatch):
    monkeypatch.setattr(entry_cache, "SLICE_ENTRIES", 2)
    cache = EntryCache(1 << 22)
    for entry_id in range(5):
        cache.put(LEDGER, 7, entry_id, b"x" * 100, entry_id)
    cache.put(OTHER, 7, 0, b"y" * 100, 100)
    assert cache.drop_ledger(LEDGER, most=2) == 2 and len(cache) == 4
    sizes_seen: set[int] = set()
    watching = asyncio.create_task(note_sizes_every_turn(cache, sizes_seen))
    await asyncio.sleep(0)
    try:
        assert await entry_cache.drop_ledger_entries(cache, LEDGER) == 3
        await asyncio.sleep(0)
    finally:
        await cancel_and_wait(watching)
    assert 2 in sizes_seen  # the loop ran between the slices
    assert len(cache) == 1 and cache.contains(OTHER, 7, 0)
    assert cache.size_bytes == 100 + ENTRY_OVERHEAD_BYTES
    assert cache.drop_ledger(LEDGER) == 0
