"""Registry writes whose answer is lost after etcd committed them, against a
real etcd: the store's transaction call is wrapped so that chosen attempts
reach etcd and commit, and then fail UNAVAILABLE as a lost answer does. The
fault suite's RTY rows do the same with a real proxy between two processes."""

from __future__ import annotations

import asyncio
import uuid

import etcd3aio
import pytest

from quire_api.errors import AlreadyExists, InvalidArgument, NotFound, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_proto.registry.v1 import registry_pb2
from quire_registry.ledger_records import IdMode
from quire_registry.registry import Registry
from quire_registry.store import EtcdStore
from tests.integration.test_registry_etcd import metadata, two_endpoints

pytestmark = pytest.mark.integration


class AnswerLoss:
    """Drops the answer of the next `count` transactions after etcd applied them."""

    def __init__(self, store: EtcdStore) -> None:
        self.count = 0
        self.dropped = 0
        self.calls = 0
        kv = store._kv
        real_txn = kv.txn

        async def txn(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls += 1
            response = await real_txn(*args, **kwargs)
            if self.count > 0:
                self.count -= 1
                self.dropped += 1
                raise etcd3aio.errors.EtcdConnectionError("KV.Txn failed after 1 attempts: UNAVAILABLE (answer lost)")
            return response

        kv.txn = txn  # type: ignore[method-assign]

    def next(self, count: int = 1) -> None:
        self.count = count


async def open_registry(etcd, cluster: str, safe: bool = True) -> tuple[Registry, AnswerLoss]:
    store = EtcdStore([etcd.endpoint], recognise_own_commits=safe)
    await store.connect()
    return Registry(store, cluster, default_ttl_seconds=5, recognise_request_ids=safe), AnswerLoss(store)


@pytest.fixture
async def lossy(etcd):
    registry, loss = await open_registry(etcd, f"lost-{uuid.uuid4().hex[:8]}")
    yield registry, loss
    await registry.store.close()


@pytest.fixture
async def unsafe(etcd):
    registry, loss = await open_registry(etcd, f"lost-{uuid.uuid4().hex[:8]}", safe=False)
    yield registry, loss
    await registry.store.close()


async def ledgers(registry: Registry) -> list[LedgerId]:
    listed, _ = await registry.list_ledgers(0, 1000, "", all_scopes=True)
    return [LedgerId(m.ledger_id.scope_id, m.ledger_id.ledger_id) for m in listed]


@pytest.mark.parametrize("mode", [IdMode.FRESH, IdMode.SCOPED, IdMode.LEGACY])
async def test_create_with_a_server_chosen_id_makes_one_ledger(lossy, mode):
    registry, loss = lossy
    loss.next()
    created, version = await registry.create_ledger(mode, metadata(), scope_id=7)
    assert loss.dropped == 1
    ledger_id = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
    assert await ledgers(registry) == [ledger_id]
    assert (await registry.get_ledger(ledger_id)) == (created, version)


async def test_legacy_create_burns_no_id(lossy):
    registry, loss = lossy
    loss.next()
    first, _ = await registry.create_ledger(IdMode.LEGACY, metadata())
    second, _ = await registry.create_ledger(IdMode.LEGACY, metadata())
    assert [first.ledger_id.ledger_id, second.ledger_id.ledger_id] == [1, 2]


async def test_create_with_a_client_chosen_id_succeeds(lossy):
    registry, loss = lossy
    loss.next()
    created, _ = await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=LedgerId(5, 6))
    assert created.ledger_id.ledger_id == 6 and await ledgers(registry) == [LedgerId(5, 6)]
    with pytest.raises(AlreadyExists):  # a real second create is still refused
        await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=LedgerId(5, 6))


async def test_request_id_after_every_attempt_lost_returns_the_same_ledger(lossy):
    registry, loss = lossy
    loss.next(3)
    with pytest.raises(Unavailable):
        await registry.create_ledger(IdMode.FRESH, metadata(), request_id="req-1")
    [made] = await ledgers(registry)
    again, version = await registry.create_ledger(IdMode.FRESH, metadata(), request_id="req-1")
    assert LedgerId(again.ledger_id.scope_id, again.ledger_id.ledger_id) == made
    assert again.create_request_id == "req-1"
    assert await ledgers(registry) == [made]
    assert (await registry.get_ledger(made)) == (again, version)


async def test_update_delete_cookie_registration_and_load_weights(lossy):
    registry, loss = lossy
    created, version = await registry.create_ledger(IdMode.FRESH, metadata())
    ledger_id = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
    closed = type(created)()
    closed.CopyFrom(created)
    closed.state = 3  # CLOSED
    loss.next()
    new_version = await registry.update_ledger(ledger_id, closed, version)
    assert (await registry.get_ledger(ledger_id)) == (closed, new_version)

    loss.next()
    await registry.delete_ledger(ledger_id, new_version)
    assert await ledgers(registry) == []

    loss.next()
    cookie = registry_pb2.Cookie(instance_id="one", data_dirs=["/d"])
    cookie_version = await registry.put_cookie("b:1", cookie, 0)
    assert await registry.get_cookie("b:1") == (cookie, cookie_version)
    loss.next()
    moved = registry_pb2.Cookie(instance_id="one", data_dirs=["/d", "/e"])
    cookie_version = await registry.put_cookie("b:1", moved, cookie_version)
    assert await registry.get_cookie("b:1") == (moved, cookie_version)
    loss.next()
    await registry.delete_cookie("b:1", cookie_version)

    loss.next()
    registration = await registry.register_bookie("b:1", False, two_endpoints(), 5)
    loss.next()
    registration = await registry.heartbeat(registration, True, two_endpoints())
    record, _ = await registry.get_bookie("b:1")
    assert record.read_only and record.version == registration.version
    await registry.unregister_bookie(registration)

    loss.next()
    await registry.put_load_weights([registry_pb2.LoadWeight(bookie_id="b:1", factor=0.5)])
    assert [w.factor for w in await registry.list_load_weights()] == [0.5]
    assert loss.dropped == 8


async def test_a_real_conflict_after_a_lost_answer_is_still_a_conflict(lossy):
    """Only the keys as this write would leave them count as its commit."""
    registry, loss = lossy
    await registry.create_ledger(IdMode.EXACT, metadata(e=3), ledger_id=LedgerId(1, 1))
    store = registry.store
    loss.next()  # this create's compare fails, and that answer is lost too
    with pytest.raises(AlreadyExists):
        await registry.create_ledger(IdMode.EXACT, metadata(e=2, w=2, a=2), ledger_id=LedgerId(1, 1))
    assert await store.get(registry.keys.ledger(LedgerId(1, 1))) is not None


async def test_without_the_commit_check_the_bugs_return(unsafe):
    """The positive control: with recognition off, a lost answer makes a
    second ledger, and a client-chosen id is told ALREADY_EXISTS."""
    registry, loss = unsafe
    loss.next()
    await registry.create_ledger(IdMode.FRESH, metadata())
    assert len(await ledgers(registry)) == 2
    loss.next()
    with pytest.raises(AlreadyExists):
        await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=LedgerId(5, 6))


async def test_a_request_id_reused_with_other_parameters_is_refused(lossy):
    registry, _ = lossy
    await registry.create_ledger(IdMode.FRESH, metadata(), request_id="req-2")
    with pytest.raises(AlreadyExists) as refused:
        await registry.create_ledger(IdMode.FRESH, metadata(e=2, w=2, a=2), request_id="req-2")
    assert refused.value.reason == Reason.REQUEST_ID_REUSED
    with pytest.raises(AlreadyExists) as refused:
        await registry.create_ledger(IdMode.SCOPED, metadata(), scope_id=3, request_id="req-2")
    assert refused.value.reason == Reason.REQUEST_ID_REUSED
    with pytest.raises(InvalidArgument, match="request_id"):
        await registry.create_ledger(IdMode.FRESH, metadata(), request_id="no/slash")
    assert len(await ledgers(registry)) == 1


async def test_concurrent_creates_with_one_request_id_make_one_ledger(lossy):
    registry, _ = lossy
    made = await asyncio.gather(
        *(registry.create_ledger(IdMode.LEGACY, metadata(), request_id="req-3") for _ in range(5))
    )
    assert len({m.ledger_id.ledger_id for m, _ in made}) == 1
    assert len(await ledgers(registry)) == 1


async def test_the_request_id_goes_with_the_ledger(lossy):
    registry, _ = lossy
    created, _ = await registry.create_ledger(IdMode.EXACT, metadata(), LedgerId(2, 2), request_id="req-4")
    assert await registry.store.get(registry.keys.create_request("req-4")) is not None
    await registry.delete_ledger(LedgerId(2, 2))
    assert await registry.store.get(registry.keys.create_request("req-4")) is None
    again, _ = await registry.create_ledger(IdMode.EXACT, metadata(), LedgerId(2, 2), request_id="req-4")
    assert again.create_time == created.create_time and again.ledger_id == created.ledger_id
    with pytest.raises(NotFound):
        await registry.delete_ledger(LedgerId(9, 9))
