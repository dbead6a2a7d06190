"""A gateway's registry lease and the liveness of ledger owners (pure
logic; the registry is a fake that answers Campaign and GetLeader)."""

from __future__ import annotations

import logging
import re

import pytest

from quire_api.errors import Unavailable
from quire_gateway.cluster_calls import RoleRecord
from quire_gateway.ownership.lease import GatewayLease, gateway_role
from quire_proto.common.v1 import common_pb2


class FakeRegistry:
    def __init__(self) -> None:
        self.holders: dict[str, tuple[str, int]] = {}
        self.published: dict[str, dict[str, str]] = {}
        self.next_lease = 100

    async def campaign(self, role, candidate, ttl_seconds, lease_id, properties):  # type: ignore[no-untyped-def]
        holder = self.holders.get(role)
        if holder is None:
            self.next_lease += 1
            self.holders[role] = (candidate, self.next_lease)
            self.published[role] = dict(properties)
            return True, candidate, self.next_lease, ttl_seconds
        return holder == (candidate, lease_id), holder[0], lease_id if holder[1] == lease_id else 0, ttl_seconds

    async def get_leader(self, role: str) -> RoleRecord:
        holder, lease_id = self.holders.get(role, ("", 0))
        return RoleRecord(holder, lease_id, self.published.get(role, {}) if holder else {})


def test_gateway_roles_are_valid_registry_roles_and_differ_per_name():
    names = ["gateway-1", "Gateway 1", "host.example:7000", "ü" * 200]
    roles = {gateway_role(name) for name in names}
    assert len(roles) == len(names)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", role) for role in roles)


async def test_an_owner_lives_while_its_lease_does():
    registry = FakeRegistry()
    first = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    other = GatewayLease(registry, "gw-b", "10.0.0.2:7000", 10)  # type: ignore[arg-type]
    assert first.owner() is None
    await first.holder.campaign_once()
    owner = await first.current_owner()
    assert (owner.gateway, owner.address, owner.session_id) == ("gw-a", "10.0.0.1:7000", 101)
    assert first.is_me(owner) and not other.is_me(owner)
    assert await other.alive(owner)
    registry.holders.pop(gateway_role("gw-a"))  # the lease lapsed
    assert not await other.alive(owner)
    registry.holders[gateway_role("gw-a")] = ("gw-a", 202)  # restarted under the same name: a new lease
    assert not await other.alive(owner)


async def test_the_positive_control_trusts_every_owner():
    registry = FakeRegistry()
    trusting = GatewayLease(registry, "gw-b", "10.0.0.2:7000", 10, trust_owners=True)  # type: ignore[arg-type]
    gone = common_pb2.LedgerOwner(gateway="gw-a", address="10.0.0.1:7000", session_id=7)
    assert await trusting.alive(gone)


def owner_of(name: str, session_id: int) -> common_pb2.LedgerOwner:
    return common_pb2.LedgerOwner(gateway=name, address="10.0.0.1:7000", session_id=session_id)


async def test_a_previous_process_of_this_name_is_dead_whatever_the_registry_says():
    registry = FakeRegistry()
    killed = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    await killed.holder.campaign_once()  # the killed process's lease, still held in the registry
    old_owner = owner_of("gw-a", killed.holder.lease_id)
    restarted = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    other = GatewayLease(registry, "gw-b", "10.0.0.2:7000", 10)  # type: ignore[arg-type]
    assert await other.alive(old_owner)  # others go by the registry
    assert restarted.is_a_previous_process(old_owner)
    assert not await restarted.alive(old_owner)  # before its own lease is held...
    registry.holders.pop(gateway_role("gw-a"))  # ended (or lapsed)
    assert await restarted.holder.campaign_once()
    assert not await restarted.alive(old_owner)  # ...and after
    assert not restarted.is_a_previous_process(owner_of("gw-a", restarted.holder.lease_id))
    assert not restarted.is_a_previous_process(owner_of("gw-b", 7))


async def test_the_previous_lease_control_takes_it_for_alive_while_the_registry_does():
    registry = FakeRegistry()
    killed = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    await killed.holder.campaign_once()
    old_owner = owner_of("gw-a", killed.holder.lease_id)
    waiting = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10, wait_for_previous_lease=True)  # type: ignore[arg-type]
    assert not waiting.is_a_previous_process(old_owner)
    assert await waiting.alive(old_owner)
    registry.holders.pop(gateway_role("gw-a"))  # the lease lapsed
    assert not await waiting.alive(old_owner)


class FlakyRegistry(FakeRegistry):
    """Fails its first `failures` GetLeader calls; records resignations."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.resigned: list[tuple[str, str, int]] = []

    async def get_leader(self, role: str) -> RoleRecord:
        if self.failures:
            self.failures -= 1
            raise Unavailable("the registry is restarting")
        return await super().get_leader(role)

    async def resign(self, role: str, candidate: str, lease_id: int) -> None:
        self.resigned.append((role, candidate, lease_id))
        self.holders.pop(role, None)


async def test_a_restart_ends_its_previous_lease_once_the_registry_answers():
    registry = FlakyRegistry(failures=1)
    registry.holders[gateway_role("gw-a")] = ("gw-a", 101)
    restarted = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    await restarted._end_previous_lease()
    assert registry.resigned == [(gateway_role("gw-a"), "gw-a", 101)]
    await restarted.renew()
    assert restarted.owner() is not None


async def test_a_second_process_taking_this_name_is_logged_once(caplog: pytest.LogCaptureFixture):
    registry = FakeRegistry()
    first = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    await first.renew()
    assert first.owner() is not None
    registry.holders[gateway_role("gw-a")] = ("gw-a", 202)  # a second process ended it and took the name
    registry.published[gateway_role("gw-a")] = {"address": "10.0.0.2:7000", "process": "another process"}
    with caplog.at_level(logging.ERROR, logger="quire_gateway.ownership.lease"):
        await first.renew()
        await first.renew()
    taken = [r for r in caplog.records if "two gateways run under one name" in r.getMessage()]
    assert len(taken) == 1 and taken[0].levelno == logging.ERROR
    assert first.owner() is None


async def test_a_lapsed_lease_taken_again_by_nobody_else_is_not_logged(caplog: pytest.LogCaptureFixture):
    registry = FakeRegistry()
    first = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    await first.renew()
    registry.holders[gateway_role("gw-b")] = ("gw-b", 303)  # some other name: nothing to say
    registry.holders.pop(gateway_role("gw-a"))  # this process's lease lapsed (a partition)
    with caplog.at_level(logging.ERROR, logger="quire_gateway.ownership.lease"):
        await first.renew()  # a new lease of its own
    assert first.owner() is not None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


class SlowRegistry(FakeRegistry):
    """Answers a campaign only after `delay` of the clock has passed (the answer
    crossed a partition), so a lease granted then is already past its TTL here."""

    def __init__(self, clock: list[float], delay: float) -> None:
        super().__init__()
        self.clock, self.delay = clock, delay

    async def campaign(self, role, candidate, ttl_seconds, lease_id, properties):  # type: ignore[no-untyped-def]
        self.clock[0] += self.delay
        return await super().campaign(role, candidate, ttl_seconds, lease_id, properties)


async def test_a_new_lease_granted_too_late_to_hold_is_not_another_process(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    clock = [1000.0]
    monkeypatch.setattr("quire_gateway.roles.time.monotonic", lambda: clock[0])
    registry = SlowRegistry(clock, delay=0.0)
    first = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 3)  # type: ignore[arg-type]
    await first.renew()
    assert first.owner() is not None
    registry.holders.pop(gateway_role("gw-a"))  # cut off past its lease: the lease lapsed
    registry.delay = 5.0  # the next campaign's answer comes after more than the 3 s TTL
    with caplog.at_level(logging.ERROR, logger="quire_gateway.ownership.lease"):
        await first.renew()
    assert first.owner() is None  # granted, but too late to count as held
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "its own new lease taken for another's"
    registry.delay = 0.0
    await first.renew()  # the next campaign renews that lease in time
    assert first.owner() is not None


class AnswerLosingRegistry(FakeRegistry):
    """Grants campaigns but loses the answer of the next `lose` of them."""

    def __init__(self) -> None:
        super().__init__()
        self.lose = 0

    async def campaign(self, role, candidate, ttl_seconds, lease_id, properties):  # type: ignore[no-untyped-def]
        answer = await super().campaign(role, candidate, ttl_seconds, lease_id, properties)
        if self.lose:
            self.lose -= 1
            raise Unavailable("campaigning: Deadline Exceeded")
        return answer


async def test_its_own_lease_granted_with_the_answer_lost_is_taken_up_not_taken_for_another_process(
    caplog: pytest.LogCaptureFixture,
):
    registry = AnswerLosingRegistry()
    first = GatewayLease(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    await first.renew()
    registry.holders.pop(gateway_role("gw-a"))  # cut off past its lease: the lease lapsed
    registry.lose = 1  # the registry grants a new lease; its answer is lost on the way back
    with caplog.at_level(logging.ERROR, logger="quire_gateway.ownership.lease"):
        await first.renew()
        granted = registry.holders[gateway_role("gw-a")][1]
        await first.renew()  # refused (a lease it does not know), then finds the lease its own
        await first.renew()  # renews it
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "its own lease taken for another's"
    owner = first.owner()
    assert owner is not None and owner.session_id == granted
