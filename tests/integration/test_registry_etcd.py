"""The registry's domain logic against a real etcd."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from quire_api.errors import Aborted, AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2
from quire_registry.bookies import Registration
from quire_registry.ledger_records import IdMode
from quire_registry.registry import Registry
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


async def test_ledger_ids_page_through_every_scope_in_id_order(registry):
    made = [LedgerId(4, 1), LedgerId(3, 9), LedgerId(3, 2), LedgerId(0, 7), LedgerId(2**64 - 1, 2**64 - 1)]
    for ledger_id in made:
        await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=ledger_id)
    await registry.delete_ledger(LedgerId(3, 9))
    seen, token, pages = [], "", 0
    while True:
        page, token = await registry.list_ledger_ids(2, token)
        assert len(page) <= 2
        seen += page
        pages += 1
        if not token:
            break
    assert seen == sorted(set(made) - {LedgerId(3, 9)}, key=lambda ledger_id: ledger_id.value)
    assert pages == 2
    with pytest.raises(InvalidArgument):
        await registry.list_ledger_ids(2, "garbage")


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
    record, _ = await registry.get_bookie("127.0.0.1:3181")
    assert record.read_only

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
    assert (await registry.get_bookie("bookie-x"))[0].bookie_id == "bookie-x"
    deadline = asyncio.get_running_loop().time() + 10
    while asyncio.get_running_loop().time() < deadline:
        try:
            await registry.get_bookie("bookie-x")
        except NotFound:
            return
        await asyncio.sleep(0.25)
    pytest.fail("registration outlived its lease")


async def test_an_expired_registration_ends_with_not_found_not_an_internal_error(registry):
    # NET-4: a bookie cut off from the registry past its TTL. Its session's next heartbeat
    # says NOT_FOUND, and the session's end revokes a lease etcd no longer has: that must
    # not turn the NOT_FOUND into an internal error.
    info = common_pb2.BookieServiceInfo(
        endpoints=[common_pb2.Endpoint(id="rpc", host="h", port=1, protocol="bookie-rpc")]
    )
    registration = await registry.register_bookie("bookie-y", False, info, 2)
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            await registry.heartbeat(registration, False, info)
        except NotFound:
            break
        assert asyncio.get_running_loop().time() < deadline, "the lease never expired"
        await asyncio.sleep(2.5)  # longer than the TTL: the next heartbeat finds it expired
    await registry.unregister_bookie(registration)  # the lease is gone: nothing to revoke, no error


async def registered_ids(registry) -> list[str]:
    records, _ = await registry.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
    return [record.bookie_id for record in records]


async def test_a_registration_whose_lease_runs_out_before_etcd_applies_it_is_unavailable(registry):
    # etcd slower than a fresh lease's TTL: the lease is gone when the registration's
    # transaction arrives, and etcd answers NOT_FOUND "requested lease not found". The bookie
    # must get a retryable UNAVAILABLE (not INTERNAL), nothing may be written, and its next
    # attempt registers it.
    store = registry.bookies.store
    real_grant = store.grant_lease

    async def grant_then_lose(ttl_seconds: int) -> tuple[int, int]:
        lease_id, ttl = await real_grant(ttl_seconds)
        await store.revoke_lease(lease_id)  # as if the TTL ran out in transit
        return lease_id, ttl

    real_txn = store._kv.txn
    attempts = 0

    async def counted_txn(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal attempts
        attempts += 1
        return await real_txn(*args, **kwargs)

    store.grant_lease = grant_then_lose
    store._kv.txn = counted_txn
    with pytest.raises(Unavailable) as refused:
        await registry.register_bookie("bookie-l", False, two_endpoints(), 5)
    assert refused.value.reason == Reason.METADATA_STORE_UNAVAILABLE
    assert "lease" in refused.value.message
    assert attempts == 1  # not tried again: no attempt can bring the lease back
    store.grant_lease, store._kv.txn = real_grant, real_txn
    assert await registered_ids(registry) == []
    registration = await registry.register_bookie("bookie-l", False, two_endpoints(), 5)
    assert await registered_ids(registry) == ["bookie-l"]
    await registry.unregister_bookie(registration)


async def test_empty_record_resolves_from_host_port_id(registry):
    await registry.register_bookie("10.0.0.5:3181", False, common_pb2.BookieServiceInfo(), 2)
    record, effective = await registry.get_bookie("10.0.0.5:3181")
    assert record.service_info == common_pb2.BookieServiceInfo()  # stored verbatim
    (endpoint,) = effective.endpoints
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
    kind, _ = await next_event()
    assert kind == registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE
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


def two_endpoints(port: int = 3181) -> common_pb2.BookieServiceInfo:
    info = common_pb2.BookieServiceInfo(
        endpoints=[
            common_pb2.Endpoint(id="rpc", host="10.1.2.3", port=port, protocol="bookie-rpc", auth=["tls"]),
            common_pb2.Endpoint(id="http", host="10.1.2.3", port=8181, protocol="http", extensions=["metrics"]),
        ]
    )
    info.properties["topology.rack"] = "/r1"
    return info


async def test_service_info_round_trips_verbatim(registry):
    info = two_endpoints()
    await registry.register_bookie("bookie-a", False, info, 5)
    record, effective = await registry.get_bookie("bookie-a")
    assert record.service_info == info and effective == info
    listed, revision = await registry.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
    assert [r.service_info for r in listed] == [info]
    assert revision >= record.version > 0


async def test_same_session_same_record_is_a_no_op(registry):
    registration = await registry.register_bookie("bookie-b", False, two_endpoints(), 5)
    version = registration.version
    again = await registry.heartbeat(registration, False, two_endpoints())
    assert again.version == version
    assert (await registry.get_bookie("bookie-b"))[0].version == version


async def test_a_new_session_resumes_its_own_live_lease_only(registry):
    first = await registry.register_bookie("bookie-c", False, two_endpoints(), 5)
    with pytest.raises(AlreadyExists):  # someone else claiming the live id
        await registry.register_bookie("bookie-c", False, two_endpoints(), 5, resume_lease_id=first.lease_id + 1)
    # The same bookie reconnecting (say the registry restarted) adopts its registration.
    resumed = await registry.register_bookie("bookie-c", True, two_endpoints(), 5, resume_lease_id=first.lease_id)
    assert resumed.lease_id == first.lease_id and resumed.read_only
    writable, _ = await registry.list_bookies(registry_pb2.BOOKIE_STATE_WRITABLE)
    read_only, _ = await registry.list_bookies(registry_pb2.BOOKIE_STATE_READ_ONLY)
    assert writable == [] and [r.bookie_id for r in read_only] == ["bookie-c"]
    await registry.unregister_bookie(resumed)
    # Once the lease is gone, resuming it falls back to a fresh registration.
    fresh = await registry.register_bookie("bookie-c", False, two_endpoints(), 5, resume_lease_id=first.lease_id)
    assert fresh.lease_id != first.lease_id
    await registry.unregister_bookie(fresh)


async def test_invalid_bookie_ids_are_refused_everywhere(registry):
    for bad in ("", "readonly", "ReadOnly", "has space:1", "a/b", "x" * 256):
        with pytest.raises(InvalidArgument):
            await registry.register_bookie(bad, False, two_endpoints(), 5)
        with pytest.raises(InvalidArgument):
            await registry.get_bookie(bad)
        with pytest.raises(InvalidArgument):
            await registry.get_cookie(bad)
    record = metadata()
    record.ensembles[0].bookie_ids[1] = "readonly"
    with pytest.raises(InvalidArgument, match="readonly"):
        await registry.create_ledger(IdMode.FRESH, record)
    with pytest.raises(InvalidArgument):
        await registry.list_bookies(42)


async def test_metadata_with_a_malformed_ensemble_is_refused(registry):
    short = metadata()
    del short.ensembles[0].bookie_ids[2]
    repeated = metadata()
    repeated.ensembles[0].bookie_ids[2] = "a:1"
    backwards = metadata()
    backwards.ensembles.add(first_entry_id=-5, bookie_ids=["a:1", "b:1", "c:1"])
    for record in (short, repeated, backwards):
        with pytest.raises(InvalidArgument):
            await registry.create_ledger(IdMode.FRESH, record)


async def test_cas_conflicts_change_nothing(registry):
    created, version = await registry.create_ledger(IdMode.FRESH, metadata())
    ledger_id = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
    closed = common_pb2.LedgerMetadata()
    closed.CopyFrom(created)
    closed.state = common_pb2.LEDGER_STATE_CLOSED
    new_version = await registry.update_ledger(ledger_id, closed, version)

    stale = common_pb2.LedgerMetadata()
    stale.CopyFrom(created)
    stale.ensembles[0].bookie_ids[0] = "intruder:1"
    with pytest.raises(Aborted):
        await registry.update_ledger(ledger_id, stale, version)
    with pytest.raises(Aborted):
        await registry.delete_ledger(ledger_id, version)
    stored, stored_version = await registry.get_ledger(ledger_id)
    assert stored == closed and stored_version == new_version
    await registry.delete_ledger(ledger_id, new_version)
    with pytest.raises(NotFound):
        await registry.get_ledger(ledger_id)


async def test_scope_zero_keys_read_like_a_64_bit_system(registry):
    created, _ = await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=LedgerId(0, 1))
    key = registry.keys.ledger(LedgerId(0, 1))
    assert key.endswith(b"/ledgers/00000000-0000-0000-0000-000000000001")
    stored = await registry.store.get(key)
    assert stored is not None and common_pb2.LedgerMetadata.FromString(stored.value) == created
    listed, _ = await registry.list_ledgers(0, 10, "")
    assert [m.ledger_id.ledger_id for m in listed] == [1]


async def test_fresh_and_scoped_ids(registry):
    fresh = [await registry.create_ledger(IdMode.FRESH, metadata()) for _ in range(5)]
    values = [LedgerId(m.ledger_id.scope_id, m.ledger_id.ledger_id).value for m, _ in fresh]
    assert len(set(values)) == 5
    assert all((value >> 76) & 0xF == 7 for value in values)  # UUIDv7 layout
    scoped = [await registry.create_ledger(IdMode.SCOPED, metadata(), scope_id=99) for _ in range(5)]
    assert {m.ledger_id.scope_id for m, _ in scoped} == {99}
    assert len({m.ledger_id.ledger_id for m, _ in scoped}) == 5


async def test_legacy_ids_ten_clients_at_once_take_every_number_once(etcd, registry):
    """Ten separate etcd clients create legacy ledgers all at once: no id
    twice, and no id burned (the sequence moves only with a ledger created)."""
    stores = [EtcdStore([etcd.endpoint]) for _ in range(10)]
    for store in stores:
        await store.connect()
    try:
        clients = [Registry(store, registry.keys.root.decode().split("/")[2]) for store in stores]

        async def create(client: Registry) -> list[int]:
            return [(await client.create_ledger(IdMode.LEGACY, metadata()))[0].ledger_id.ledger_id for _ in range(40)]

        drawn = await asyncio.gather(*(create(client) for client in clients))
    finally:
        for store in stores:
            await store.close()
    every = sorted(value for batch in drawn for value in batch)
    assert every == list(range(1, 401))
    assert all(batch == sorted(batch) for batch in drawn)
    listed, _ = await registry.list_ledgers(0, 1000, "")
    assert sorted(m.ledger_id.ledger_id for m in listed) == every


async def test_legacy_ids_step_past_ids_created_exactly(registry):
    for taken in (1, 3):
        await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=LedgerId(0, taken))
    ids = [(await registry.create_ledger(IdMode.LEGACY, metadata()))[0].ledger_id.ledger_id for _ in range(3)]
    assert ids == [2, 4, 5]


async def test_watch_relists_after_a_compaction(etcd, registry, caplog):
    """A watch whose history was compacted away relists and reports the
    difference: the leave it missed and the join it missed."""
    import etcd3aio

    gone = await registry.register_bookie("gone:1", False, two_endpoints(), 10)
    stays = await registry.register_bookie("stays:1", False, two_endpoints(), 10)
    real_list = registry.store.list_prefix
    calls = 0

    async def list_then_change_history(prefix, **kwargs):
        # After the watcher's first listing, change the bookies and compact
        # etcd, so the watch that follows starts inside compacted history.
        nonlocal calls
        calls += 1
        result = await real_list(prefix, **kwargs)
        if calls == 1:
            await registry.unregister_bookie(gone)
            await registry.register_bookie("joined:1", False, two_endpoints(), 10)
            admin = etcd3aio.Etcd3Client([etcd.endpoint])
            await admin.connect()
            revision = (await admin.kv.get(b"/")).header.revision
            await admin.kv.compact(revision)
            await admin.close()
        return result

    registry.store.list_prefix = list_then_change_history
    events = registry.watch_bookies()
    seen = []
    try:
        while len(seen) < 5:
            kind, record = await asyncio.wait_for(anext(events), timeout=10)
            seen.append((kind, record.bookie_id))
    finally:
        await events.aclose()
        registry.store.list_prefix = real_list
    assert seen[:3] == [
        (registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT, "gone:1"),
        (registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT, "stays:1"),
        (registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE, ""),
    ]
    assert sorted(seen[3:]) == sorted(
        [(registry_pb2.BOOKIE_EVENT_TYPE_LEFT, "gone:1"), (registry_pb2.BOOKIE_EVENT_TYPE_JOINED, "joined:1")]
    )
    assert "relisting" in caplog.text  # the difference came from a relist, not from history
    await registry.unregister_bookie(stays)


async def test_a_cookie_is_deleted_only_when_unregistered_and_unchanged(registry):
    bookie_id = "127.0.0.1:3190"
    version = await registry.put_cookie(bookie_id, registry_pb2.Cookie(instance_id="one", data_dirs=["/d"]), 0)
    registration = await registry.register_bookie(bookie_id, True, common_pb2.BookieServiceInfo(), 5)
    with pytest.raises(FailedPrecondition, match="is registered"):  # read-only counts as registered too
        await registry.delete_cookie(bookie_id, version)
    await registry.unregister_bookie(registration)
    with pytest.raises(Aborted):
        await registry.delete_cookie(bookie_id, version + 1000)
    await registry.delete_cookie(bookie_id, version)
    with pytest.raises(NotFound):
        await registry.get_cookie(bookie_id)
    with pytest.raises(NotFound):
        await registry.delete_cookie(bookie_id, version)


async def test_ledger_records_in_etcd_hold_no_password_unless_kept(registry):
    """What etcd holds, read straight from it. The control: with
    QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS (an upgrade's window) the password shows."""
    password = b"only-the-client-knows-this"
    given = metadata()
    given.password = password
    registry.keep_ledger_passwords = True
    kept, version = await registry.create_ledger(IdMode.FRESH, given)
    ledger_id = LedgerId(kept.ledger_id.scope_id, kept.ledger_id.ledger_id)
    key = registry.keys.ledger(ledger_id)
    raw = await registry.store.get(key)
    assert password in raw.value and kept.HasField("secrets")

    registry.keep_ledger_passwords = False
    closed = common_pb2.LedgerMetadata()
    closed.CopyFrom(kept)
    closed.state = common_pb2.LEDGER_STATE_CLOSED
    await registry.update_ledger(ledger_id, closed, version)  # the next write drops it
    raw = await registry.store.get(key)
    assert password not in raw.value
    fresh, _ = await registry.create_ledger(IdMode.FRESH, given)
    raw = await registry.store.get(registry.keys.ledger(LedgerId(fresh.ledger_id.scope_id, fresh.ledger_id.ledger_id)))
    assert password not in raw.value and not fresh.password


def registration_request(bookie_id: str, read_only: bool = False) -> registry_pb2.RegisterBookieRequest:
    info = common_pb2.BookieServiceInfo()
    info.endpoints.add(id="rpc", host="127.0.0.1", port=3181, protocol="bookie-rpc")
    return registry_pb2.RegisterBookieRequest(
        bookie_id=bookie_id, read_only=read_only, service_info=info, ttl_seconds=30
    )


async def test_a_registration_stream_registers_renews_and_unregisters_when_it_ends(registry):
    """The RegisterBookie stream's domain side: the first message registers,
    the next renews (here moving the bookie to read-only), and the end of the
    stream unregisters at once, long before the 30 s lease would expire."""

    async def requests():
        yield registration_request("bookie-s")
        yield registration_request("bookie-s", read_only=True)

    seen = []
    async with contextlib.aclosing(registry.registration_stream(requests())) as registrations:
        async for registration in registrations:
            record, _ = await registry.get_bookie("bookie-s")
            seen.append((registration.read_only, record.read_only))
    assert seen == [(False, False), (True, True)]
    with pytest.raises(NotFound):
        await registry.get_bookie("bookie-s")


async def test_a_registration_stream_cut_off_unregisters_its_bookie(registry):
    """The stream usually ends by cancellation (the bookie stopped, its
    connection dropped): the registration goes with it, not 30 s later."""
    registered = asyncio.Event()

    async def requests():
        yield registration_request("bookie-c")
        await asyncio.Event().wait()  # the bookie sends nothing more

    async def follow():
        async with contextlib.aclosing(registry.registration_stream(requests())) as registrations:
            async for _ in registrations:
                registered.set()

    task = asyncio.create_task(follow())
    await asyncio.wait_for(registered.wait(), 30)
    assert (await registry.get_bookie("bookie-c"))[0].bookie_id == "bookie-c"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(NotFound):
        await registry.get_bookie("bookie-c")


async def test_a_registration_stream_cut_by_a_stopping_registry_leaves_the_lease_to_resume(registry):
    """A registry that stops cuts every session; the bookies reconnect and
    resume their leases. So a session cut once the stop began revokes
    nothing: the bookie stays registered, and its next session adopts the
    same lease. (Revoking would drop every bookie on each rolling restart.)"""
    registered: list[Registration] = []
    first = asyncio.Event()

    async def requests():
        yield registration_request("bookie-r")
        await asyncio.Event().wait()

    async def follow():
        async with contextlib.aclosing(registry.registration_stream(requests())) as registrations:
            async for registration in registrations:
                registered.append(registration)
                first.set()

    task = asyncio.create_task(follow())
    await asyncio.wait_for(first.wait(), 30)
    registry.bookies.leave_leases_to_resume()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await registry.get_bookie("bookie-r"))[0].bookie_id == "bookie-r"
    resumed = await registry.register_bookie(
        "bookie-r", False, two_endpoints(), 30, resume_lease_id=registered[0].lease_id
    )
    assert resumed.lease_id == registered[0].lease_id
    await registry.unregister_bookie(resumed)


async def test_a_registration_stream_refuses_another_bookie_id_and_unregisters(registry):
    async def requests():
        yield registration_request("bookie-a")
        yield registration_request("bookie-b")

    with pytest.raises(InvalidArgument, match="belongs to bookie bookie-a"):
        async with contextlib.aclosing(registry.registration_stream(requests())) as registrations:
            async for _ in registrations:
                pass
    with pytest.raises(NotFound):
        await registry.get_bookie("bookie-a")
