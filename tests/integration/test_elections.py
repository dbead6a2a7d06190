"""One holder per role, through the registry's elections against a real etcd."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from quire_api.errors import InvalidArgument
from quire_registry.elections import Elections
from quire_registry.keys import Keys
from quire_registry.store import EtcdStore

pytestmark = pytest.mark.integration


@pytest.fixture
async def elections(etcd):
    store = EtcdStore([etcd.endpoint])
    await store.connect()
    yield Elections(store, Keys(f"test-{uuid.uuid4().hex[:8]}"))
    await store.close()


async def test_one_holder_renewal_publishes_and_a_standby_takes_over_when_the_lease_lapses(elections):
    first = await elections.campaign("auditor", "gateway-a", 2, 0, {})
    assert first.elected and first.leader.holder == "gateway-a" and first.lease_id
    standby = await elections.campaign("auditor", "gateway-b", 2, 0, {})
    assert not standby.elected and standby.leader.holder == "gateway-a" and standby.lease_id == 0
    renewed = await elections.campaign("auditor", "gateway-a", 2, first.lease_id, {"scrubbed": "10"})
    assert renewed.elected and renewed.lease_id == first.lease_id
    assert dict((await elections.leader("auditor"))[0].properties) == {"scrubbed": "10"}
    # gateway-a stops renewing: its lease lapses and the key goes with it.
    for _ in range(100):
        taken = await elections.campaign("auditor", "gateway-b", 2, 0, {})
        if taken.elected:
            break
        await asyncio.sleep(0.2)
    assert taken.elected and (await elections.leader("auditor"))[0].holder == "gateway-b"
    stale = await elections.campaign("auditor", "gateway-a", 2, first.lease_id, {})
    assert not stale.elected and stale.leader.holder == "gateway-b"


async def test_resign_frees_the_role_at_once_and_only_for_the_holder(elections):
    held = await elections.campaign("auditor", "gateway-a", 30, 0, {})
    await elections.resign("auditor", "gateway-b", held.lease_id)  # not the holder: nothing changes
    assert (await elections.leader("auditor"))[0].holder == "gateway-a"
    await elections.resign("auditor", "gateway-a", held.lease_id)
    assert (await elections.leader("auditor"))[0].holder == ""
    assert (await elections.campaign("auditor", "gateway-b", 30, 0, {})).elected


async def test_roles_are_independent_and_bad_requests_are_refused(elections):
    assert (await elections.campaign("auditor", "a", 5, 0, {})).elected
    assert (await elections.campaign("compactor", "b", 5, 0, {})).elected
    for bad in (
        lambda: elections.campaign("Auditor!", "a", 5, 0, {}),
        lambda: elections.campaign("auditor", "", 5, 0, {}),
        lambda: elections.campaign("auditor", "a", 1, 0, {}),
        lambda: elections.campaign("auditor", "a", 5, 0, {str(i): "x" for i in range(65)}),
        lambda: elections.leader(""),
    ):
        with pytest.raises(InvalidArgument):
            await bad()


async def test_concurrent_candidates_elect_exactly_one(elections):
    outcomes = await asyncio.gather(*(elections.campaign("auditor", f"g{i}", 10, 0, {}) for i in range(8)))
    winners = [o.leader.holder for o in outcomes if o.elected]
    assert len(winners) == 1
    assert {o.leader.holder for o in outcomes} == set(winners)
