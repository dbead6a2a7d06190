"""The gateway's lease in the registry, and whether another gateway's
lease still lives: what ledger ownership rests on.

Each gateway holds a role of its own (`gateway-<digest of its name>`) through
the registry's Campaign, the machinery the auditor role uses: the registry
records the gateway's name and advertised address on an etcd lease the
gateway renews, with a random id of the process among what it publishes. The
lease id is the owner's `session_id` written into the metadata of every
ledger the gateway creates. When the gateway stops renewing (SIGKILL,
partition), the lease lapses and the key goes with it; a gateway restarted
under the same name gets a new lease, so it is a new owner and owns none of
the old lease's ledgers.

A name belongs to one running process, so a gateway restarted under its name
knows that any other lease of that name is a previous process's, dead
whatever the registry says yet: it recovers that lease's ledgers when they
are next written through it, and ends the lease in the registry as it
starts (so that other gateways see it gone too), rather than waiting for it
to lapse. Two processes wrongly given one name end and recover each
other's leases and ledgers; each recovery fences the bookies first, so the
ledgers stay safe (one writer's adds at most are taken after the fence, and
every ledger closes at one agreed end), and each process logs an error. A
lease of this name that carries this process's own id is not another
process: it is a campaign the registry granted whose answer was lost (across a
partition), and the gateway takes it up.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid

from quire_api.errors import QuireError, Reason, Unavailable
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.roles import RoleHolder
from quire_proto.common.v1 import common_pb2

log = logging.getLogger(__name__)

ADDRESS_PROPERTY = "address"
PROCESS_PROPERTY = "process"  # a random id per gateway process


GATEWAY_ROLE_PREFIX = "gateway-"  # every gateway's own role starts so (ListLeaders finds them all)


def gateway_role(gateway_name: str) -> str:
    """The registry role a gateway's lease is held as. Names may hold any
    printable characters and roles may not, so the role carries a digest."""
    return GATEWAY_ROLE_PREFIX + hashlib.sha256(gateway_name.encode()).hexdigest()[:48]


class GatewayLease:
    def __init__(
        self,
        remote: ClusterCalls,
        name: str,
        address: str,
        ttl_seconds: int,
        *,
        trust_owners: bool = False,
        wait_for_previous_lease: bool = False,
    ) -> None:
        self.remote = remote
        self.name = name
        self.address = address
        self.ttl_seconds = ttl_seconds
        # Positive control (QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION): every
        # recorded owner counts as alive, so a dead owner's ledgers are never closed.
        self.trust_owners = trust_owners
        # Test-only (QUIRE_GATEWAY_FAULT_WAIT_FOR_PREVIOUS_SESSION): a restart under the same
        # name takes its previous lease for alive until it lapses, as gateways once did.
        self.wait_for_previous_lease = wait_for_previous_lease
        # Told apart from another process of this name by what it publishes with its lease.
        self.process_id = uuid.uuid4().hex
        published = {ADDRESS_PROPERTY: address, PROCESS_PROPERTY: self.process_id}
        self.holder = RoleHolder(remote, gateway_role(name), name, ttl_seconds, lambda: published)
        self._lease_held = 0  # the lease this process last held its role on (0: none yet)

    def owner(self) -> common_pb2.LedgerOwner | None:
        """This gateway as a ledger owner, while its lease holds."""
        if not self.holder.holds():
            return None
        return common_pb2.LedgerOwner(gateway=self.name, address=self.address, session_id=self.holder.lease_id)

    async def current_owner(self) -> common_pb2.LedgerOwner:
        """This gateway as a ledger owner, waiting (at most two lease TTLs) for
        the lease to be held: a gateway restarted under the same name waits
        for its previous lease to lapse."""
        owner = self.owner()
        if owner is not None:  # the common case: no wait, and no task for one (this runs per create)
            return owner
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

    def is_a_previous_process(self, owner: common_pb2.LedgerOwner) -> bool:
        """Whether `owner` is a lease of this gateway's name that this
        process does not hold: a previous process's (killed, crashed), dead
        whatever the registry says, since a name belongs to one running
        process. A ledger this process writes is answered by its write handle
        before anyone asks; one it created on an earlier lease of its own and
        no longer writes has no writer left either."""
        if self.trust_owners or self.wait_for_previous_lease:
            return False
        return owner.gateway == self.name and owner.session_id != self.holder.lease_id

    async def alive(self, owner: common_pb2.LedgerOwner) -> bool:
        """Whether `owner`'s lease still lives, as the registry has it now."""
        if self.trust_owners:
            return True
        if self.is_me(owner):
            return True
        if self.is_a_previous_process(owner):
            return False
        holder, lease_id, _ = await self.remote.get_leader(gateway_role(owner.gateway))
        return holder == owner.gateway and lease_id == owner.session_id

    async def run(self) -> None:
        if not self.wait_for_previous_lease:
            await self._end_previous_lease()
        while True:
            await self.renew()
            await asyncio.sleep(self.ttl_seconds / 3)

    async def renew(self) -> None:
        """One campaign (RoleHolder.run's step): take or renew the lease,
        and notice a second process of this name taking it."""
        if await self.holder.campaign_once():
            self._lease_held = self.holder.lease_id
        elif self._lease_held and self.holder.leader == self.name:
            await self._notice_another_process()

    async def _notice_another_process(self) -> None:
        """This process held its lease, and now the registry has the role
        held under this name on another lease: a second process was started
        with this name (a misconfiguration that fencing keeps safe, but the two
        recover each other's ledgers). Said once per takeover. The lease is
        compared, not only the name: a lease of ours that just lapsed may
        linger for a moment."""
        try:
            holder, lease_id, published = await self.remote.get_leader(gateway_role(self.name))
        except QuireError:
            return
        if holder == self.name and lease_id and published.get(PROCESS_PROPERTY) == self.process_id:
            # This process's own campaign, granted by the registry but its answer lost (a
            # partition): take that lease up, and the next campaign renews it.
            self.holder.adopt(lease_id)
            return
        # A lease this process was granted itself, but too late to count as held (a campaign
        # answered after its TTL had passed, as across a partition), is not another process's.
        if holder != self.name or lease_id in (0, self._lease_held, self.holder.lease_id):
            return
        self._lease_held = 0
        log.error(
            "gateway %s: another process has taken this gateway's session (lease %x): two gateways run under "
            "one name. Each recovers (fences and closes) the ledgers the other writes; give each gateway a name "
            "of its own (QUIRE_GATEWAY_NAME)",
            self.name,
            lease_id,
        )

    async def _end_previous_lease(self) -> None:
        """A gateway restarted under its name (after a SIGKILL, a crash) finds
        its previous lease still holding its role until it lapses:
        nothing could be created here, and other gateways would relay writes
        of that lease's ledgers to a dead process, for up to a lease TTL.
        Names are unique per process, so that lease is dead: end it now, and
        every gateway sees its ledgers' owner gone at once (their next write
        recovers them). A registry not answering is asked again until the old
        lease would have lapsed on its own."""
        role = gateway_role(self.name)
        give_up_at = time.monotonic() + self.ttl_seconds
        while True:
            try:
                holder, lease_id, _ = await self.remote.get_leader(role)
                if holder != self.name or not lease_id:
                    return
                log.warning(
                    "gateway %s: a previous session of this name (lease %x) still holds its role; ending it "
                    "(a gateway name must be unique to one running process)",
                    self.name,
                    lease_id,
                )
                await self.remote.resign(role, self.name, lease_id)
                return
            except QuireError as exc:
                if time.monotonic() >= give_up_at:  # the old lease has lapsed on its own by now
                    log.warning("gateway %s: could not end its previous session: %s", self.name, exc)
                    return
            await asyncio.sleep(1.0)

    async def end(self) -> None:
        """A clean stop ends the lease at once (its ledgers were closed first)."""
        await self.holder.resign()

    def status(self) -> dict[str, object]:
        owner = self.owner()
        return {"name": self.name, "address": self.address, "session_id": owner.session_id if owner else 0}
