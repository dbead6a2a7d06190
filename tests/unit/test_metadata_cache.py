"""The gateway's ledger metadata cache (services/gateway/quire_gateway/metadata_cache.py)
against a fake registry: what is trusted when, version order, deletes, the
LRU bound, races between a fetch and the watch, and the watch's reconnects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable

import pytest

from quire_api.errors import Aborted, NotFound, Unavailable
from quire_api.ids import LedgerId
from quire_gateway.ledgers import LedgerOperations
from quire_gateway.metadata_cache import LedgerMetadataCache
from quire_gateway.metadata_store import ChangeKind, MetadataChange
from quire_gateway.metadata_updates import update_metadata
from quire_proto.common.v1 import common_pb2

OPEN, CLOSED = common_pb2.LEDGER_STATE_OPEN, common_pb2.LEDGER_STATE_CLOSED
A, B, C, D = (LedgerId(1, n) for n in range(1, 5))


def record(ledger_id: LedgerId, state: int = OPEN, last_entry_id: int = -1) -> common_pb2.LedgerMetadata:
    return common_pb2.LedgerMetadata(
        ledger_id=common_pb2.LedgerId(scope_id=ledger_id.scope_id, ledger_id=ledger_id.ledger_id),
        ensemble_size=3,
        write_quorum_size=2,
        ack_quorum_size=2,
        state=state,
        last_entry_id=last_entry_id,
        ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=["a:1", "b:1", "c:1"])],
    )


class FakeRegistry:
    """GetLedgerMetadata and WatchLedgerMetadata of a registry, by hand."""

    def __init__(self) -> None:
        self.records: dict[LedgerId, tuple[common_pb2.LedgerMetadata, int]] = {}
        self.revision = 100  # of the last update made here
        self.fetches: list[LedgerId] = []
        self.down = False
        self.gate: asyncio.Event | None = None  # when set, fetches wait for it
        self.watch_starts: list[int] = []
        self._streams: list[asyncio.Queue[MetadataChange | BaseException]] = []

    def put(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, version: int) -> None:
        self.records[ledger_id] = (metadata, version)

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        self.fetches.append(ledger_id)
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise Unavailable("the registry is down")
        if ledger_id not in self.records:
            raise NotFound(f"ledger {ledger_id} does not exist")
        return self.records[ledger_id]

    async def update_ledger_metadata(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        """Compare-and-swap; the new version is the next revision (as in etcd)."""
        if ledger_id not in self.records:
            raise NotFound(f"ledger {ledger_id} does not exist")
        if self.records[ledger_id][1] != expected_version:
            raise Aborted(f"ledger {ledger_id}: version {expected_version} is not the current one")
        self.revision += 1
        self.records[ledger_id] = (metadata, self.revision)
        return self.revision

    async def delete_ledger_metadata(self, ledger_id: LedgerId) -> None:
        self.records.pop(ledger_id, None)

    async def watch_ledger_metadata(
        self, start_revision: int, heartbeat_seconds: float
    ) -> AsyncGenerator[MetadataChange, None]:
        self.watch_starts.append(start_revision)
        queue: asyncio.Queue[MetadataChange | BaseException] = asyncio.Queue()
        self._streams.append(queue)
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item

    def send(self, kind: ChangeKind, revision: int, ledger_id: LedgerId | None = None, metadata=None) -> None:
        self._streams[-1].put_nowait(MetadataChange(kind, revision, ledger_id, metadata))

    def break_stream(self) -> None:
        self._streams[-1].put_nowait(Unavailable("the registry went away"))


async def eventually(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry()


@pytest.fixture
async def cache(registry: FakeRegistry) -> AsyncGenerator[LedgerMetadataCache, None]:
    cache = LedgerMetadataCache(registry, capacity=3, silence_seconds=60)
    yield cache
    await cache.close()


async def connect(cache: LedgerMetadataCache, registry: FakeRegistry, revision: int = 10) -> None:
    """Start following the watch; the registry answers STARTED at `revision`."""
    streams = len(registry.watch_starts)
    cache.start()
    await eventually(lambda: len(registry.watch_starts) > streams)
    registry.send(ChangeKind.STARTED, revision)
    await eventually(lambda: cache.connected)


async def send(cache: LedgerMetadataCache, registry: FakeRegistry, kind: ChangeKind, revision: int, *args) -> None:
    registry.send(kind, revision, *args)
    await eventually(lambda: cache.revision >= revision)


async def test_a_miss_fetches_and_a_hit_does_not(cache, registry):
    registry.put(A, record(A), 5)
    await connect(cache, registry)
    assert await cache.recent_ledger_metadata(A) == (record(A), 5)
    assert await cache.recent_ledger_metadata(A) == (record(A), 5)
    assert registry.fetches == [A]
    assert (cache.stats()["hits"], cache.stats()["misses"]) == (1, 1)


async def test_a_hit_is_parsed_from_the_stored_record_not_shared(cache, registry):
    """Entries are kept serialized: what one reader was given cannot change what
    the next one gets."""
    registry.put(A, record(A, CLOSED, 9), 5)
    await cache.recent_ledger_metadata(A)
    first, _ = await cache.recent_ledger_metadata(A)
    first.last_entry_id = 1_000_000
    again, version = await cache.recent_ledger_metadata(A)
    assert again == record(A, CLOSED, 9) and again is not first and version == 5
    assert registry.fetches == [A]


async def test_concurrent_misses_share_one_fetch(cache, registry):
    registry.put(A, record(A), 5)
    await connect(cache, registry)
    registry.gate = asyncio.Event()
    readers = [asyncio.ensure_future(cache.recent_ledger_metadata(A)) for _ in range(5)]
    await eventually(lambda: registry.fetches == [A])
    registry.gate.set()
    assert [await r for r in readers] == [(record(A), 5)] * 5
    assert registry.fetches == [A]


async def test_open_ledgers_go_to_the_registry_until_the_watch_connects(cache, registry):
    registry.put(A, record(A), 5)
    registry.put(B, record(B, CLOSED, 9), 6)
    for _ in range(2):
        await cache.recent_ledger_metadata(A)
        await cache.recent_ledger_metadata(B)
    assert registry.fetches == [A, B, A]  # the closed ledger was kept; the open one was not trusted


async def test_puts_apply_only_when_newer(cache, registry):
    registry.put(A, record(A), 5)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(A)
    await send(cache, registry, ChangeKind.PUT, 11, A, record(A, last_entry_id=1))  # newer: applied
    assert await cache.recent_ledger_metadata(A) == (record(A, last_entry_id=1), 11)
    cache.apply(MetadataChange(ChangeKind.PUT, 7, A, record(A, last_entry_id=2)))  # older than 11: ignored
    assert await cache.recent_ledger_metadata(A) == (record(A, last_entry_id=1), 11)
    await send(cache, registry, ChangeKind.PUT, 12, B, record(B))  # not cached: ignored
    assert await cache.recent_ledger_metadata(A) == (record(A, last_entry_id=1), 11)
    assert registry.fetches == [A] and cache.stats()["ledgers"] == 1


async def test_a_delete_removes_the_entry_and_reads_get_not_found(cache, registry):
    registry.put(A, record(A, CLOSED, 3), 5)
    registry.put(B, record(B, CLOSED, 3), 20)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(A)
    await cache.recent_ledger_metadata(B)
    del registry.records[A]
    await send(cache, registry, ChangeKind.DELETED, 15, A)
    with pytest.raises(NotFound):
        await cache.recent_ledger_metadata(A)
    # A delete older than the cached record (the ledger was created again since) changes nothing.
    await send(cache, registry, ChangeKind.DELETED, 16, B)
    assert await cache.recent_ledger_metadata(B) == (record(B, CLOSED, 3), 20)
    assert registry.fetches == [A, B, A]


async def test_a_record_that_no_longer_parses_is_forgotten(cache, registry):
    registry.put(A, record(A), 5)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(A)
    await send(cache, registry, ChangeKind.PUT, 12, A, None)
    await cache.recent_ledger_metadata(A)
    assert registry.fetches == [A, A]


async def test_the_cache_holds_at_most_capacity_ledgers_least_recently_used_out(cache, registry):
    for version, ledger_id in enumerate((A, B, C, D), start=1):
        registry.put(ledger_id, record(ledger_id, CLOSED, 0), version)
    for ledger_id in (A, B, C):
        await cache.recent_ledger_metadata(ledger_id)
    await cache.recent_ledger_metadata(A)  # A is now the most recently used; B the least
    await cache.recent_ledger_metadata(D)
    assert cache.stats()["ledgers"] == 3 and cache.evictions == 1
    registry.fetches.clear()
    for ledger_id in (A, C, D):
        await cache.recent_ledger_metadata(ledger_id)
    assert registry.fetches == []
    await cache.recent_ledger_metadata(B)
    assert registry.fetches == [B]


async def test_closed_ledgers_stay_readable_while_disconnected_open_ones_do_not(cache, registry):
    registry.put(A, record(A), 5)
    registry.put(B, record(B, CLOSED, 7), 6)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(A)
    await cache.recent_ledger_metadata(B)
    registry.down = True
    registry.break_stream()
    await eventually(lambda: not cache.connected)
    assert await cache.recent_ledger_metadata(B) == (record(B, CLOSED, 7), 6)  # from the cache, registry down
    with pytest.raises(Unavailable):
        await cache.recent_ledger_metadata(A)  # an open ledger's entry is not trusted without the watch
    assert registry.fetches == [A, B, A]

    # The watch resumes where it left off: nothing was missed, the open entry is good again.
    registry.down = False
    await eventually(lambda: len(registry.watch_starts) == 2, within=10)
    assert registry.watch_starts == [0, 11]
    registry.send(ChangeKind.STARTED, 10)
    await eventually(lambda: cache.connected)
    registry.fetches.clear()
    assert await cache.recent_ledger_metadata(A) == (record(A), 5)
    assert registry.fetches == []


async def test_a_reset_drops_open_ledgers_and_rechecks_closed_ones(cache, registry):
    registry.put(A, record(A), 5)
    registry.put(B, record(B, CLOSED, 7), 6)
    registry.put(C, record(C, CLOSED, 7), 8)
    await connect(cache, registry)
    for ledger_id in (A, B, C):
        await cache.recent_ledger_metadata(ledger_id)
    registry.fetches.clear()
    del registry.records[C]  # deleted while the history was compacted away
    await send(cache, registry, ChangeKind.RESET, 40)
    assert cache.stats()["ledgers"] == 2 and cache.resets == 1
    assert await cache.recent_ledger_metadata(B) == (record(B, CLOSED, 7), 6)  # served at once...
    assert await cache.recent_ledger_metadata(C) == (record(C, CLOSED, 7), 8)
    await eventually(lambda: registry.fetches == [B, C])  # ...and checked behind the reader
    await eventually(lambda: cache.stats()["ledgers"] == 1)
    with pytest.raises(NotFound):
        await cache.recent_ledger_metadata(C)
    await cache.recent_ledger_metadata(B)
    await cache.recent_ledger_metadata(A)
    assert registry.fetches == [B, C, C, A]  # B confirmed once, no more checks


async def test_a_fetch_that_read_before_a_change_does_not_put_the_old_version_back(cache, registry):
    registry.put(A, record(A), 5)
    registry.put(B, record(B), 6)
    await connect(cache, registry)
    registry.gate = asyncio.Event()
    reading_a = asyncio.ensure_future(cache.recent_ledger_metadata(A))
    reading_b = asyncio.ensure_future(cache.recent_ledger_metadata(B))
    await eventually(lambda: registry.fetches == [A, B])
    # While both reads are in flight, A changes and B is deleted.
    await send(cache, registry, ChangeKind.PUT, 12, A, record(A, CLOSED, 4))
    await send(cache, registry, ChangeKind.DELETED, 13, B)
    registry.gate.set()
    assert await reading_a == (record(A), 5)  # what the registry answered then
    assert await reading_b == (record(B), 6)
    registry.gate = None
    assert await cache.recent_ledger_metadata(A) == (record(A, CLOSED, 4), 12)
    await cache.recent_ledger_metadata(B)
    assert registry.fetches == [A, B, B]  # B's old record was not kept


async def test_this_gateways_own_writes_update_or_drop_cached_entries(cache, registry):
    registry.put(A, record(A), 5)
    registry.put(B, record(B), 6)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(A)
    await cache.recent_ledger_metadata(B)
    cache.learned(A, record(A, CLOSED, 3), 14)  # a successful compare-and-swap
    assert await cache.recent_ledger_metadata(A) == (record(A, CLOSED, 3), 14)
    cache.learned(A, record(A), 9)  # an older read: ignored
    assert await cache.recent_ledger_metadata(A) == (record(A, CLOSED, 3), 14)
    cache.learned(C, record(C), 15)  # not cached: not stored
    cache.forget(B)  # a conflict: our version is stale
    registry.fetches.clear()
    await cache.recent_ledger_metadata(B)
    with pytest.raises(NotFound):
        await cache.recent_ledger_metadata(C)
    assert registry.fetches == [B, C]


async def test_forgetting_a_ledger_discards_its_fetch_in_flight(cache, registry):
    registry.put(A, record(A), 5)
    await connect(cache, registry)
    registry.gate = asyncio.Event()
    reading = asyncio.ensure_future(cache.recent_ledger_metadata(A))
    await eventually(lambda: registry.fetches == [A])
    cache.forget(A)
    registry.gate.set()
    await reading
    registry.gate = None
    await cache.recent_ledger_metadata(A)
    assert registry.fetches == [A, A]


async def test_a_silent_stream_is_broken_and_resumed_from_the_next_revision(registry):
    cache = LedgerMetadataCache(registry, capacity=3, heartbeat_seconds=0.05, silence_seconds=0.2)
    registry.put(A, record(A), 5)
    try:
        await connect(cache, registry)
        await send(cache, registry, ChangeKind.PUT, 21, B, record(B))
        await send(cache, registry, ChangeKind.PROGRESS, 30)
        await cache.recent_ledger_metadata(A)
        await eventually(lambda: not cache.connected)  # nothing more: after 0.2 s it counts as broken
        await eventually(lambda: len(registry.watch_starts) >= 2)
        assert registry.watch_starts[:2] == [0, 31]
        registry.send(ChangeKind.STARTED, 30)
        await eventually(lambda: cache.connected)
        await cache.recent_ledger_metadata(A)
        assert registry.fetches == [A]  # resumed without a gap: the open entry is still good
    finally:
        await cache.close()


async def test_the_first_start_from_now_drops_open_entries_read_before_it(cache, registry):
    registry.put(A, record(A), 5)
    registry.put(B, record(B, CLOSED, 1), 6)
    await cache.recent_ledger_metadata(A)
    await cache.recent_ledger_metadata(B)
    await connect(cache, registry, revision=50)
    registry.fetches.clear()
    await cache.recent_ledger_metadata(A)  # read before the watch covered it: fetched again
    await cache.recent_ledger_metadata(B)  # closed: served, and checked once
    await eventually(lambda: registry.fetches == [A, B])
    await cache.recent_ledger_metadata(A)
    await cache.recent_ledger_metadata(B)
    assert registry.fetches == [A, B]


async def test_the_ledger_operations_read_metadata_through_the_cache(cache, registry):
    registry.put(A, record(A, CLOSED, -1), 5)
    operations = LedgerOperations(registry, metadata_store=cache)  # type: ignore[arg-type]
    assert await operations.metadata(A) == (record(A, CLOSED, -1), 5)
    assert await operations.reads.last_add_confirmed(A) == -1
    assert registry.fetches == [A]


def close_at(last_entry_id: int):
    def close(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata:
        metadata.state, metadata.last_entry_id = CLOSED, last_entry_id
        return metadata

    return close


async def test_a_compare_and_swap_through_the_cache_is_kept_without_the_watch(cache, registry):
    """The cache is a layer in front of the registry's calls: the update loop
    writes through it, and what it wrote is what the next read gets, before
    the watch delivers it (nobody has to tell the cache)."""
    registry.put(A, record(A), 5)
    await connect(cache, registry)
    known = await cache.recent_ledger_metadata(A)
    updated = await update_metadata(cache, A, close_at(3), known)
    assert (updated.version, updated.metadata.state) == (101, CLOSED)
    assert await cache.recent_ledger_metadata(A) == (record(A, CLOSED, 3), 101)
    assert registry.fetches == [A]


async def test_a_conflict_or_a_delete_through_the_cache_drops_the_entry(cache, registry):
    registry.put(A, record(A), 5)
    registry.put(B, record(B, CLOSED, 2), 6)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(A)
    await cache.recent_ledger_metadata(B)
    registry.put(A, record(A, OPEN, 9), 7)  # changed elsewhere; the watch has not said so yet
    with pytest.raises(Aborted):
        await cache.update_ledger_metadata(A, record(A, CLOSED, 9), 5)
    await cache.delete_ledger_metadata(B)
    registry.fetches.clear()
    assert await cache.recent_ledger_metadata(A) == (record(A, OPEN, 9), 7)
    with pytest.raises(NotFound):
        await cache.recent_ledger_metadata(B)
    assert registry.fetches == [A, B]


async def test_a_fresh_read_through_the_cache_moves_a_cached_entry_on(cache, registry):
    registry.put(A, record(A), 5)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(A)
    registry.put(A, record(A, CLOSED, 4), 8)  # changed elsewhere; the watch has not said so yet
    assert await cache.get_ledger_metadata(A) == (record(A, CLOSED, 4), 8)  # e.g. the auditor's check
    registry.fetches.clear()
    assert await cache.recent_ledger_metadata(A) == (record(A, CLOSED, 4), 8)
    assert registry.fetches == []


def test_a_cache_holds_at_least_one_ledger(registry):
    with pytest.raises(ValueError):
        LedgerMetadataCache(registry, capacity=0)


async def test_a_write_learned_after_a_reset_counts_for_the_new_epoch_only_if_newer_than_it(cache, registry):
    registry.put(B, record(B, CLOSED, 7), 6)
    registry.put(C, record(C, CLOSED, 7), 8)
    await connect(cache, registry)
    await cache.recent_ledger_metadata(B)
    await cache.recent_ledger_metadata(C)
    await send(cache, registry, ChangeKind.RESET, 40)
    registry.fetches.clear()
    cache.learned(B, record(B, CLOSED, 7), 41)  # e.g. the auditor here replaced a bookie after the reset
    cache.learned(C, record(C, CLOSED, 7), 30)  # a version from before the reset: may predate a gap
    await cache.recent_ledger_metadata(B)
    await cache.recent_ledger_metadata(C)
    await eventually(lambda: registry.fetches == [C])


async def test_followers_hear_every_ledgers_changes_cached_or_not(cache, registry):
    heard: list[tuple[ChangeKind, object]] = []
    cache.follow(lambda change: heard.append((change.kind, change.ledger_id)))
    await connect(cache, registry)
    await send(cache, registry, ChangeKind.PUT, 11, B, record(B))  # not cached
    await send(cache, registry, ChangeKind.DELETED, 12, B)
    await send(cache, registry, ChangeKind.PROGRESS, 13)
    assert heard == [(ChangeKind.PUT, B), (ChangeKind.DELETED, B)]
