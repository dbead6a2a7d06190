"""The registry's WatchLedgerMetadata against a real etcd: puts and deletes in
order, resuming from a revision, RESET where history cannot be replayed, and
heartbeats."""

from __future__ import annotations

import asyncio

import etcd3aio
import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.channels import open_channel
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2 as R
from quire_proto.registry.v1 import registry_pb2_grpc
from quire_registry.ledger_records import IdMode

pytestmark = pytest.mark.integration

WAIT_SECONDS = 30  # generous: a busy CI machine


def metadata() -> common_pb2.LedgerMetadata:
    return common_pb2.LedgerMetadata(
        format_version=1,
        ensemble_size=3,
        write_quorum_size=2,
        ack_quorum_size=2,
        state=common_pb2.LEDGER_STATE_OPEN,
        last_entry_id=-1,
        ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=["a:1", "b:1", "c:1"])],
    )


class Watch:
    """One WatchLedgerMetadata stream; `next()` skips PROGRESS unless asked."""

    def __init__(self, stub: registry_pb2_grpc.RegistryServiceStub, start_revision: int, heartbeat_ms: int = 0):
        self.call = stub.WatchLedgerMetadata(
            R.WatchLedgerMetadataRequest(start_revision=start_revision, heartbeat_interval_ms=heartbeat_ms)
        )

    async def next(self, *, progress: bool = False) -> R.WatchLedgerMetadataResponse:
        while True:
            response = await asyncio.wait_for(self.call.read(), WAIT_SECONDS)
            assert response is not grpc.aio.EOF
            if progress or response.type != R.LEDGER_METADATA_EVENT_TYPE_PROGRESS:
                return response

    def close(self) -> None:
        self.call.cancel()


@pytest.fixture
async def stub(registry_server):
    _, target = registry_server
    channel = open_channel(target)
    yield registry_pb2_grpc.RegistryServiceStub(channel)
    await channel.close()


async def create(stub) -> tuple[LedgerId, common_pb2.LedgerMetadata, int]:
    response = await stub.CreateLedgerMetadata(R.CreateLedgerMetadataRequest(metadata=metadata()))
    stored = response.metadata
    return LedgerId(stored.ledger_id.scope_id, stored.ledger_id.ledger_id), stored, response.version


async def close(stub, ledger_id: LedgerId, stored: common_pb2.LedgerMetadata, version: int) -> int:
    closed = common_pb2.LedgerMetadata()
    closed.CopyFrom(stored)
    closed.state = common_pb2.LEDGER_STATE_CLOSED
    response = await stub.UpdateLedgerMetadata(
        R.UpdateLedgerMetadataRequest(
            ledger_id=ledger_id_to_proto(ledger_id), metadata=closed, expected_version=version
        )
    )
    return response.version


async def delete(stub, ledger_id: LedgerId) -> None:
    await stub.DeleteLedgerMetadata(R.DeleteLedgerMetadataRequest(ledger_id=ledger_id_to_proto(ledger_id)))


def ledger_of(response: R.WatchLedgerMetadataResponse) -> LedgerId:
    return LedgerId(response.ledger_id.scope_id, response.ledger_id.ledger_id)


async def test_puts_and_deletes_arrive_in_order_with_their_versions(stub):
    watch = Watch(stub, 0)
    try:
        started = await watch.next()
        assert started.type == R.LEDGER_METADATA_EVENT_TYPE_STARTED and started.revision > 0
        ledger_id, stored, created_version = await create(stub)
        put = await watch.next()
        assert (put.type, ledger_of(put), put.revision) == (
            R.LEDGER_METADATA_EVENT_TYPE_PUT,
            ledger_id,
            created_version,
        )
        assert put.metadata == stored and put.revision > started.revision
        closed_version = await close(stub, ledger_id, stored, created_version)
        put = await watch.next()
        assert (put.type, put.revision, put.metadata.state) == (
            R.LEDGER_METADATA_EVENT_TYPE_PUT,
            closed_version,
            common_pb2.LEDGER_STATE_CLOSED,
        )
        await delete(stub, ledger_id)
        deleted = await watch.next()
        assert (deleted.type, ledger_of(deleted)) == (R.LEDGER_METADATA_EVENT_TYPE_DELETED, ledger_id)
        assert deleted.revision > closed_version and not deleted.HasField("metadata")
    finally:
        watch.close()


async def test_a_watch_resumes_from_a_revision_and_replays_what_it_missed(stub):
    first = Watch(stub, 0)
    started = await first.next()
    first.close()  # the watcher goes away; changes happen meanwhile
    ledger_id, stored, created_version = await create(stub)
    closed_version = await close(stub, ledger_id, stored, created_version)
    await delete(stub, ledger_id)

    resumed = Watch(stub, started.revision + 1)
    try:
        again = await resumed.next()
        assert (again.type, again.revision) == (R.LEDGER_METADATA_EVENT_TYPE_STARTED, started.revision)
        replayed = [await resumed.next() for _ in range(3)]
        assert [(e.type, ledger_of(e)) for e in replayed] == [
            (R.LEDGER_METADATA_EVENT_TYPE_PUT, ledger_id),
            (R.LEDGER_METADATA_EVENT_TYPE_PUT, ledger_id),
            (R.LEDGER_METADATA_EVENT_TYPE_DELETED, ledger_id),
        ]
        assert [e.revision for e in replayed[:2]] == [created_version, closed_version]
        assert replayed[1].metadata.state == common_pb2.LEDGER_STATE_CLOSED
    finally:
        resumed.close()

    # Resuming after the last event replays nothing older.
    latest = Watch(stub, replayed[2].revision + 1)
    try:
        assert (await latest.next()).type == R.LEDGER_METADATA_EVENT_TYPE_STARTED
        other_id, _, _ = await create(stub)
        assert ledger_of(await latest.next()) == other_id
    finally:
        latest.close()


async def compact_now(endpoint: str) -> int:
    admin = etcd3aio.Etcd3Client([endpoint])
    await admin.connect()
    try:
        revision = (await admin.kv.get(b"/")).header.revision
        await admin.kv.compact(revision)
        return revision
    finally:
        await admin.close()


async def test_a_start_inside_compacted_history_or_in_the_future_is_a_reset(etcd, stub):
    watch = Watch(stub, 0)
    started = await watch.next()
    watch.close()
    await create(stub)
    await create(stub)
    compacted_at = await compact_now(etcd.endpoint)

    stale = Watch(stub, started.revision + 1)
    try:
        reset = await stale.next()
        assert reset.type == R.LEDGER_METADATA_EVENT_TYPE_RESET and reset.revision >= compacted_at
        # The watch carries on after the reset's revision.
        ledger_id, _, version = await create(stub)
        put = await stale.next()
        assert (ledger_of(put), put.revision) == (ledger_id, version)
    finally:
        stale.close()

    future = Watch(stub, version + 1_000_000)
    try:
        assert (await future.next()).type == R.LEDGER_METADATA_EVENT_TYPE_RESET
    finally:
        future.close()


async def test_a_watch_that_falls_behind_a_compaction_is_reset_mid_stream(etcd, registry_server):
    """The etcd watch behind a stream is cancelled by a compaction: the stream
    says RESET and goes on from the store's current revision. (The stream is
    made to start from a revision compacted meanwhile.)"""
    registry, _ = registry_server
    old = await registry.store.current_revision()
    for _ in range(2):  # compacted up to the second: the first is gone from history
        await registry.create_ledger(IdMode.FRESH, metadata())
    await compact_now(etcd.endpoint)
    real = registry.store.current_revision
    calls = 0

    async def old_revision_first():
        nonlocal calls
        calls += 1
        return old if calls == 1 else await real()

    registry.store.current_revision = old_revision_first
    events = registry.watch_ledgers(0, 0.1)
    try:
        started = await asyncio.wait_for(anext(events), WAIT_SECONDS)
        assert (started.type, started.revision) == (R.LEDGER_METADATA_EVENT_TYPE_STARTED, old)
        reset = await asyncio.wait_for(anext(events), WAIT_SECONDS)
        while reset.type == R.LEDGER_METADATA_EVENT_TYPE_PROGRESS:
            reset = await asyncio.wait_for(anext(events), WAIT_SECONDS)
        assert reset.type == R.LEDGER_METADATA_EVENT_TYPE_RESET and reset.revision > old
    finally:
        await events.aclose()
        registry.store.current_revision = real


async def test_a_quiet_watch_sends_progress_at_the_heartbeat(stub):
    watch = Watch(stub, 0, heartbeat_ms=100)
    try:
        started = await watch.next()
        beats = [await watch.next(progress=True) for _ in range(3)]
        assert all(b.type == R.LEDGER_METADATA_EVENT_TYPE_PROGRESS for b in beats)
        assert all(b.revision >= started.revision for b in beats)
    finally:
        watch.close()


async def test_a_negative_start_revision_is_invalid(stub):
    watch = Watch(stub, -1)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await watch.next()
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
