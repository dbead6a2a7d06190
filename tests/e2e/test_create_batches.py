"""Concurrent creates through a gateway process, which gathers them into
batches (one placement call, one registry call, one etcd transaction): each
create still gets its own outcome, and a request_id repeated within a batch
or across batches makes one ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from quire_api.ids import LedgerId
from quire_client.aio import AsyncQuireClient
from quire_client.cluster import LocalCluster
from quire_client.errors import AlreadyExistsError, UnavailableError
from quire_client.results import LedgerMetadata
from tests.e2e.conftest import running_cluster

CONCURRENT = 24


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("create-batches")) as local:
        yield local


async def listed(quire: AsyncQuireClient, scope_id: int) -> list[LedgerId]:
    return sorted([m.ledger_id async for m in quire.list_ledgers(scope_id)])


async def test_concurrent_creates_each_get_their_own_outcome(cluster: LocalCluster) -> None:
    async with AsyncQuireClient(cluster.gateway_target, timeout=60) as quire:
        taken = LedgerId(101, 1)
        await quire.create_ledger(ledger_id=taken)
        creates = [quire.create_ledger(scope_id=101, custom_metadata={"n": str(i)}) for i in range(CONCURRENT)]
        creates.append(quire.create_ledger(ledger_id=taken))  # the id exists
        creates.append(quire.create_ledger(scope_id=101, ensemble_size=5, write_quorum_size=5, attempts=1))  # 3 bookies
        outcomes = await asyncio.wait_for(asyncio.gather(*creates, return_exceptions=True), 120)

        made = outcomes[:CONCURRENT]
        assert all(isinstance(m, LedgerMetadata) for m in made), made
        assert [m.custom_metadata["n"] for m in made] == [str(i) for i in range(CONCURRENT)]  # type: ignore[union-attr]
        exists, unplaceable = outcomes[CONCURRENT:]
        assert isinstance(exists, AlreadyExistsError) and exists.reason == "ERROR_REASON_LEDGER_EXISTS"
        assert isinstance(unplaceable, UnavailableError) and unplaceable.reason == "ERROR_REASON_NOT_ENOUGH_BOOKIES"
        ids = [m.ledger_id for m in made]  # type: ignore[union-attr]
        assert len(set(ids)) == CONCURRENT
        assert await listed(quire, 101) == sorted([taken, *ids])


async def test_a_request_id_repeated_within_and_across_batches_makes_one_ledger(cluster: LocalCluster) -> None:
    async with AsyncQuireClient(cluster.gateway_target, timeout=60) as quire:
        first = await quire.create_ledger(scope_id=102, request_id="across")
        creates = [quire.create_ledger(scope_id=102) for _ in range(CONCURRENT)]
        creates += [quire.create_ledger(scope_id=102, request_id="across") for _ in range(3)]
        creates += [quire.create_ledger(scope_id=102, request_id="within") for _ in range(3)]
        outcomes = await asyncio.wait_for(asyncio.gather(*creates), 120)

        others, across, within = outcomes[:CONCURRENT], outcomes[CONCURRENT:-3], outcomes[-3:]
        assert {m.ledger_id for m in across} == {first.ledger_id}
        assert len({m.ledger_id for m in within}) == 1
        expected = {first.ledger_id, within[0].ledger_id, *(m.ledger_id for m in others)}
        assert len(expected) == CONCURRENT + 2
        assert await listed(quire, 102) == sorted(expected)
