"""The registry's domain logic against a real etcd."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from quire.common.v1 import common_pb2
from quire.registry.v1 import registry_pb2
from quire_common.errors import Aborted, AlreadyExists, InvalidArgument, NotFound
from quire_common.ids import LedgerId
from quire_registry.registry import IdMode, Registry
from quire_registry.store import EtcdStore

pytestmark = pytest.mark.integration


@pytest.fixture
async def registry(etcd):
    store = EtcdStore([etcd.endpoint])
    await store.connect()
    # A fresh cluster name per test keeps tests apart inside one etcd.
    yield Registry(store, f"test-{uuid.uuid4().hex[:8]}", default_ttl_seconds=2)
    await store.close()


def metadata(e=3, w=2, a=2) -> common_pb2.LedgerMetadata:
    return common_pb2.LedgerMetadata(
        format_version=1,
        ensemble_size=e,
        write_quorum_size=w,
        ack_quorum_size=a,
        state=common_pb2.LEDGER_STATE_OPEN,
        last_entry_id=-1,
        ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=["a:1", "b:1", "c:1"][:e])],
    )


async def test_create_get_update_delete_with_versions(registry):
    created, version = await registry.create_ledger(IdMode.FRESH, metadata())
    ledger_id = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
    stored, stored_version = await registry.get_ledger(ledger_id)
    assert stored == created and stored_version == version

    closed = common_pb2.LedgerMetadata()
    closed.CopyFrom(stored)
    closed.state = common_pb2.LEDGER_STATE_CLOSED
    new_version = await registry.update_ledger(ledger_id, closed, version)
    assert new_version > version
    with pytest.raises(Aborted):  # the old version lost
        await registry.update_ledger(ledger_id, closed, version)

    await registry.delete_ledger(ledger_id)
    with pytest.raises(NotFound):
        await registry.get_ledger(ledger_id)
    with pytest.raises(NotFound):
        await registry.update_ledger(ledger_id, closed, new_version)


async def test_exact_ids_are_taken_once(registry):
    ledger_id = LedgerId(7, 12345)
    record, _ = await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=ledger_id)
    assert (record.ledger_id.scope_id, record.ledger_id.ledger_id) == (7, 12345)
    with pytest.raises(AlreadyExists):
        await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=ledger_id)


async def test_bad_quorums_are_refused(registry):
    with pytest.raises(InvalidArgument):
        await registry.create_ledger(IdMode.FRESH, metadata(e=2, w=3, a=2))


async def test_legacy_ids_never_repeat_under_concurrency(registry):
    results = await asyncio.gather(*(registry.create_ledger(IdMode.LEGACY, metadata()) for _ in range(30)))
    ids = [r.ledger_id.ledger_id for r, _ in results]
    assert all(r.ledger_id.scope_id == 0 for r, _ in results)
    assert sorted(ids) == list(range(1, 31))


async def test_list_pages_through_one_scope(registry):
    for ledger in range(1, 8):
        await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=LedgerId(3, ledger))
    await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=LedgerId(4, 1))
    seen, token = [], ""
    while True:
        page, token = await registry.list_ledgers(3, 3, token)
        assert len(page) <= 3
        seen += [m.ledger_id.ledger_id for m in page]
        if not token:
            break
    assert seen == list(range(1, 8))
    everything, _ = await registry.list_ledgers(0, 100, "", all_scopes=True)
    assert len(everything) == 8
    with pytest.raises(InvalidArgument):
        await registry.list_ledgers(3, 3, "garbage")


async def test_bookie_registration_lifecycle(registry):
    info = common_pb2.BookieServiceInfo()
    info.endpoints.add(id="rpc", host="127.0.0.1", port=3181, protocol="bookie-rpc")
    registration = await registry.register_bookie("127.0.0.1:3181", False, info, 2)
    with pytest.raises(AlreadyExists):  # never two live registrations of one id
        await registry.register_bookie("127.0.0.1:3181", True, info, 2)

    writable, _ = await registry.list_bookies(registry_pb2.BOOKIE_STATE_WRITABLE)
    assert [r.bookie_id for r in writable] == ["127.0.0.1:3181"]

    await registry.heartbeat(registration, True, info)  # move to read-only in one transaction
    assert (await registry.list_bookies(registry_pb2.BOOKIE_STATE_WRITABLE))[0] == []
    read_only, _ = await registry.list_bookies(registry_pb2.BOOKIE_STATE_READ_ONLY)
    assert [r.bookie_id for r in read_only] == ["127.0.0.1:3181"]
    assert (await registry.get_bookie("127.0.0.1:3181")).read_only

    await registry.unregister_bookie(registration)
    with pytest.raises(NotFound):
        await registry.get_bookie("127.0.0.1:3181")


async def test_registration_expires_without_heartbeats(registry):
    await registry.register_bookie(
        "bookie-x",
        False,
        common_pb2.BookieServiceInfo(
            endpoints=[common_pb2.Endpoint(id="rpc", host="h", port=1, protocol="bookie-rpc")]
        ),
        2,
    )
    assert (await registry.get_bookie("bookie-x")).bookie_id == "bookie-x"
    deadline = asyncio.get_running_loop().time() + 10
    while asyncio.get_running_loop().time() < deadline:
        try:
            await registry.get_bookie("bookie-x")
        except NotFound:
            return
        await asyncio.sleep(0.25)
    pytest.fail("registration outlived its lease")


async def test_empty_record_resolves_from_host_port_id(registry):
    await registry.register_bookie("10.0.0.5:3181", False, common_pb2.BookieServiceInfo(), 2)
    record = await registry.get_bookie("10.0.0.5:3181")
    (endpoint,) = record.service_info.endpoints
    assert (endpoint.host, endpoint.port, endpoint.protocol) == ("10.0.0.5", 3181, "bookie-rpc")
    await registry.register_bookie("opaque-id", False, common_pb2.BookieServiceInfo(), 2)
    with pytest.raises(NotFound, match="cannot be resolved"):
        await registry.get_bookie("opaque-id")


async def test_watch_sees_snapshot_join_move_and_leave(registry):
    info = common_pb2.BookieServiceInfo(
        endpoints=[common_pb2.Endpoint(id="rpc", host="h", port=1, protocol="bookie-rpc")]
    )
    first = await registry.register_bookie("first:1", False, info, 5)
    events = registry.watch_bookies()

    async def next_event():
        return await asyncio.wait_for(anext(events), timeout=10)

    kind, record = await next_event()
    assert (kind, record.bookie_id) == (registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT, "first:1")
    second = await registry.register_bookie("second:1", False, info, 5)
    kind, record = await next_event()
    assert (kind, record.bookie_id) == (registry_pb2.BOOKIE_EVENT_TYPE_JOINED, "second:1")
    await registry.heartbeat(second, True, info)
    kind, record = await next_event()
    assert (kind, record.bookie_id, record.read_only) == (registry_pb2.BOOKIE_EVENT_TYPE_CHANGED, "second:1", True)
    await registry.unregister_bookie(first)
    kind, record = await next_event()
    assert (kind, record.bookie_id) == (registry_pb2.BOOKIE_EVENT_TYPE_LEFT, "first:1")
    await events.aclose()
    await registry.unregister_bookie(second)
