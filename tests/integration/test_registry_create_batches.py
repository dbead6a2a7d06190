"""Registry.create_ledgers (CreateLedgerMetadataBatch) against a real etcd:
creates of a batch share one transaction, each gets the outcome it would
have had alone, and request_id keeps each retry-safe, within a batch and
across batches."""

from __future__ import annotations

import pytest

from quire_api.errors import AlreadyExists, InvalidArgument, QuireError, Reason
from quire_api.ids import LedgerId
from quire_registry.ledger_records import MAX_CREATES_PER_BATCH, CreateOrder, IdMode
from tests.integration.test_registry_etcd import metadata
from tests.integration.test_registry_lost_answers import ledgers, lossy  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration


def ledger_id_of(outcome: object) -> LedgerId:
    assert not isinstance(outcome, QuireError), outcome
    record, _ = outcome  # type: ignore[misc]
    return LedgerId(record.ledger_id.scope_id, record.ledger_id.ledger_id)


async def test_creates_of_a_batch_share_one_transaction(lossy):  # noqa: F811
    registry, loss = lossy
    orders = [CreateOrder(IdMode.FRESH, metadata()) for _ in range(4)]
    orders += [
        CreateOrder(IdMode.SCOPED, metadata(), scope_id=7),
        CreateOrder(IdMode.EXACT, metadata(), LedgerId(3, 9)),
    ]
    outcomes = await registry.create_ledgers(orders)
    assert loss.calls == 1
    assert len({version for _, version in outcomes}) == 1  # type: ignore[misc]
    created = [ledger_id_of(o) for o in outcomes]
    assert created[4].scope_id == 7 and created[5] == LedgerId(3, 9)
    assert sorted(await ledgers(registry)) == sorted(created)


async def test_a_legacy_create_goes_alone_and_still_gets_its_id(lossy):  # noqa: F811
    registry, _ = lossy
    outcomes = await registry.create_ledgers(
        [CreateOrder(IdMode.LEGACY, metadata()), CreateOrder(IdMode.FRESH, metadata())]
    )
    legacy = ledger_id_of(outcomes[0])
    assert legacy.scope_id == 0 and legacy.ledger_id >= 1
    assert len(await ledgers(registry)) == 2


async def test_one_bad_create_fails_alone(lossy):  # noqa: F811
    registry, _ = lossy
    taken = LedgerId(5, 1)
    await registry.create_ledger(IdMode.EXACT, metadata(), ledger_id=taken)
    outcomes = await registry.create_ledgers(
        [
            CreateOrder(IdMode.FRESH, metadata()),
            CreateOrder(IdMode.EXACT, metadata(), taken),
            CreateOrder(IdMode.FRESH, metadata(e=2, w=3, a=2)),
            CreateOrder(IdMode.FRESH, metadata(), request_id="bad id with spaces"),
            CreateOrder(IdMode.SCOPED, metadata(), scope_id=5, request_id="good-1"),
        ]
    )
    assert isinstance(outcomes[1], AlreadyExists) and outcomes[1].reason == Reason.LEDGER_EXISTS
    assert isinstance(outcomes[2], InvalidArgument)
    assert isinstance(outcomes[3], InvalidArgument)
    made = [ledger_id_of(outcomes[0]), ledger_id_of(outcomes[4])]
    assert sorted(await ledgers(registry)) == sorted([taken, *made])


async def test_one_request_id_twice_in_one_batch_makes_one_ledger(lossy):  # noqa: F811
    registry, _ = lossy
    outcomes = await registry.create_ledgers(
        [
            CreateOrder(IdMode.FRESH, metadata(), request_id="twice"),
            CreateOrder(IdMode.FRESH, metadata()),
            CreateOrder(IdMode.FRESH, metadata(), request_id="twice"),
            CreateOrder(IdMode.FRESH, metadata(e=2, w=2, a=2), request_id="twice"),
        ]
    )
    assert ledger_id_of(outcomes[0]) == ledger_id_of(outcomes[2])
    assert outcomes[0][0] == outcomes[2][0]  # type: ignore[index]  # the same record, as stored
    assert isinstance(outcomes[3], AlreadyExists) and outcomes[3].reason == Reason.REQUEST_ID_REUSED
    assert sorted(await ledgers(registry)) == sorted([ledger_id_of(outcomes[0]), ledger_id_of(outcomes[1])])


async def test_one_request_id_in_two_batches_makes_one_ledger_and_the_rest_are_created(lossy):  # noqa: F811
    registry, _ = lossy
    first = await registry.create_ledgers([CreateOrder(IdMode.SCOPED, metadata(), scope_id=4, request_id="again")])
    second = await registry.create_ledgers(
        [
            CreateOrder(IdMode.FRESH, metadata(), request_id="new-one"),
            CreateOrder(IdMode.SCOPED, metadata(), scope_id=4, request_id="again"),
            CreateOrder(IdMode.FRESH, metadata()),
        ]
    )
    assert ledger_id_of(second[1]) == ledger_id_of(first[0])
    made = {ledger_id_of(first[0]), ledger_id_of(second[0]), ledger_id_of(second[2])}
    assert len(made) == 3
    assert sorted(await ledgers(registry)) == sorted(made)


async def test_a_batch_whose_answer_was_lost_makes_each_ledger_once(lossy):  # noqa: F811
    registry, loss = lossy
    loss.next()
    outcomes = await registry.create_ledgers(
        [CreateOrder(IdMode.FRESH, metadata(), request_id=f"lost-{i}") for i in range(3)]
        + [CreateOrder(IdMode.FRESH, metadata())]
    )
    assert loss.dropped == 1
    created = [ledger_id_of(o) for o in outcomes]
    assert sorted(await ledgers(registry)) == sorted(created)


async def test_a_batch_over_the_cap_is_refused(lossy):  # noqa: F811
    registry, _ = lossy
    with pytest.raises(InvalidArgument, match="at most 50"):
        await registry.create_ledgers([CreateOrder(IdMode.FRESH, metadata())] * (MAX_CREATES_PER_BATCH + 1))
    assert await ledgers(registry) == []


async def test_a_full_batch_fits_one_etcd_transaction(lossy):  # noqa: F811
    registry, loss = lossy
    orders = [CreateOrder(IdMode.FRESH, metadata(), request_id=f"full-{i}") for i in range(MAX_CREATES_PER_BATCH)]
    outcomes = await registry.create_ledgers(orders)
    assert loss.calls == 1
    assert len({ledger_id_of(o) for o in outcomes}) == MAX_CREATES_PER_BATCH
