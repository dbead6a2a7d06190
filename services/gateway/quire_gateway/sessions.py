"""The gateway's session in the registry, and whether another gateway's
session still lives: what ledger ownership rests on.

Each gateway holds a role of its own (`gateway-<digest of its name>`) through
the registry's Campaign, the machinery the auditor role uses: the registry
records the gateway's name and advertised address on an etcd lease the
gateway renews. The lease id is the session id written into the metadata of
every ledger the gateway creates. When the gateway stops renewing (SIGKILL,
partition), the lease lapses and the key goes with it; a gateway restarted
under the same name gets a new lease, so it is a new session and owns none of
the old one's ledgers. It ends the old session as it starts, rather than
waiting for that lease to lapse.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from quire.common.v1 import common_pb2
from quire_api.errors import QuireError, Reason, Unavailable
from quire_gateway.leadership import RoleHolder
from quire_gateway.remote import Remote

log = logging.getLogger(__name__)

ADDRESS_PROPERTY = "address"


SESSION_ROLE_PREFIX = "gateway-"  # every gateway session's role starts so (ListLeaders finds them all)


def session_role(gateway_name: str) -> str:
    """The registry role a gateway's session is held as. Names may hold any
    printable characters and roles may not, so the role carries a digest."""
    return SESSION_ROLE_PREFIX + hashlib.sha256(gateway_name.encode()).hexdigest()[:48]


class GatewaySession:
    def __init__(
        self,
        remote: Remote,
        name: str,
        address: str,
        ttl_seconds: int,
        *,
        trust_owners: bool = False,
        wait_for_previous_session: bool = False,
    ) -> None:
        self.remote = remote
        self.name = name
        self.address = address
        self.ttl_seconds = ttl_seconds
        # Positive control (QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION): every
        # recorded owner counts as alive, so a dead owner's ledgers are never closed.
        self.trust_owners = trust_owners
        # Test-only (QUIRE_GATEWAY_FAULT_WAIT_FOR_PREVIOUS_SESSION): a restart under the same
        # name waits for the previous session's lease to lapse, as gateways once did.
        self.wait_for_previous_session = wait_for_previous_session
        self.holder = RoleHolder(remote, session_role(name), name, ttl_seconds, lambda: {ADDRESS_PROPERTY: address})

    def owner(self) -> common_pb2.LedgerOwner | None:
        """This gateway as a ledger owner, while its session holds."""
        if not self.holder.holds():
            return None
        return common_pb2.LedgerOwner(gateway=self.name, address=self.address, session_id=self.holder.lease_id)

    async def current_owner(self) -> common_pb2.LedgerOwner:
        """This gateway as a ledger owner, waiting (at most a session TTL) for
        the session to be held: a gateway restarted under the same name waits
        for its previous session's lease to lapse."""
        try:
            await asyncio.wait_for(self.holder.wait_until_held(), self.ttl_seconds * 2)
        except TimeoutError:
            raise Unavailable(
                f"gateway {self.name} holds no session in the registry yet; try again later", Reason.SERVICE_UNAVAILABLE
            ) from None
        owner = self.owner()
        if owner is None:
            raise Unavailable(f"gateway {self.name} lost its registry session; try again later")
        return owner

    def is_me(self, owner: common_pb2.LedgerOwner) -> bool:
        mine = self.owner()
        return mine is not None and mine.gateway == owner.gateway and mine.session_id == owner.session_id

    async def alive(self, owner: common_pb2.LedgerOwner) -> bool:
        """Whether `owner`'s session still lives, as the registry has it now."""
        if self.trust_owners:
            return True
        if self.is_me(owner):
            return True
        holder, lease_id = await self.remote.get_leader(session_role(owner.gateway))
        return holder == owner.gateway and lease_id == owner.session_id

    async def run(self) -> None:
        if not self.wait_for_previous_session:
            await self._end_previous_session()
        await self.holder.run()

    async def _end_previous_session(self) -> None:
        """A gateway restarted under its name (after a SIGKILL, a crash) finds
        its previous session still holding its role until that lease lapses,
        and with it the ownership of that session's ledgers: nothing could be
        created here, and writes to those ledgers would be relayed to a dead
        process, for up to a session TTL. Names are unique per process, so
        that session is dead: end it now, and every gateway sees its ledgers'
        owner gone at once (their next write recovers them)."""
        role = session_role(self.name)
        try:
            holder, lease_id = await self.remote.get_leader(role)
            if holder != self.name or not lease_id:
                return
            log.warning(
                "gateway %s: a previous session of this name (lease %x) still holds its role; ending it "
                "(a gateway name must be unique to one running process)",
                self.name,
                lease_id,
            )
            await self.remote.resign(role, self.name, lease_id)
        except QuireError as exc:  # the registry is not there yet: the old lease lapses on its own
            log.warning("gateway %s: could not end its previous session: %s", self.name, exc)

    async def end(self) -> None:
        """A clean stop ends the session at once (its ledgers were closed first)."""
        await self.holder.resign()

    def status(self) -> dict[str, object]:
        owner = self.owner()
        return {"name": self.name, "address": self.address, "session_id": owner.session_id if owner else 0}
