"""A gateway's registry session and the liveness of ledger owners (pure
logic; the registry is a fake that answers Campaign and GetLeader)."""

from __future__ import annotations

import re

from quire.common.v1 import common_pb2
from quire_gateway.sessions import GatewaySession, session_role


class FakeRegistry:
    def __init__(self) -> None:
        self.holders: dict[str, tuple[str, int]] = {}
        self.next_lease = 100

    async def campaign(self, role, candidate, ttl_seconds, lease_id, properties):  # type: ignore[no-untyped-def]
        holder = self.holders.get(role)
        if holder is None:
            self.next_lease += 1
            self.holders[role] = (candidate, self.next_lease)
            return True, candidate, self.next_lease, ttl_seconds
        return holder == (candidate, lease_id), holder[0], lease_id if holder[1] == lease_id else 0, ttl_seconds

    async def get_leader(self, role: str) -> tuple[str, int]:
        return self.holders.get(role, ("", 0))


def test_session_roles_are_valid_registry_roles_and_differ_per_name():
    names = ["gateway-1", "Gateway 1", "host.example:7000", "ü" * 200]
    roles = {session_role(name) for name in names}
    assert len(roles) == len(names)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", role) for role in roles)


async def test_an_owner_lives_while_its_session_does():
    registry = FakeRegistry()
    first = GatewaySession(registry, "gw-a", "10.0.0.1:7000", 10)  # type: ignore[arg-type]
    other = GatewaySession(registry, "gw-b", "10.0.0.2:7000", 10)  # type: ignore[arg-type]
    assert first.owner() is None
    await first.holder.campaign_once()
    owner = await first.current_owner()
    assert (owner.gateway, owner.address, owner.session_id) == ("gw-a", "10.0.0.1:7000", 101)
    assert first.is_me(owner) and not other.is_me(owner)
    assert await other.alive(owner)
    registry.holders.pop(session_role("gw-a"))  # the lease lapsed
    assert not await other.alive(owner)
    registry.holders[session_role("gw-a")] = ("gw-a", 202)  # restarted under the same name: a new session
    assert not await other.alive(owner)


async def test_the_positive_control_trusts_every_owner():
    registry = FakeRegistry()
    trusting = GatewaySession(registry, "gw-b", "10.0.0.2:7000", 10, trust_owners=True)  # type: ignore[arg-type]
    gone = common_pb2.LedgerOwner(gateway="gw-a", address="10.0.0.1:7000", session_id=7)
    assert await trusting.alive(gone)
