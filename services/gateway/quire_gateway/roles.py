"""Holding a cluster-wide role (the auditor's, each gateway's own) through
the registry's Campaign.

Every gateway runs a RoleHolder; the registry records one holder per role on
an etcd lease. The holder renews every third of the TTL and counts itself the
holder only until `TTL` after the start of its last successful renewal: by
then etcd may have let the lease lapse and a standby may have taken over, so
a holder cut off from the registry stops acting before anyone else starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from quire_api.errors import QuireError
from quire_gateway.cluster_calls import ClusterCalls

log = logging.getLogger(__name__)


class RoleHolder:
    def __init__(
        self,
        remote: ClusterCalls,
        role: str,
        candidate: str,
        ttl_seconds: int,
        published: Callable[[], dict[str, str]] = dict,
    ) -> None:
        self.remote = remote
        self.role = role
        self.candidate = candidate
        self.ttl_seconds = ttl_seconds
        self.published = published  # figures the holder shows in GetLeader
        self.leader = ""  # the holder as last seen ("" before the first answer)
        self._lease_id = 0
        self._valid_until = 0.0
        self._changed = asyncio.Event()

    @property
    def lease_id(self) -> int:
        """The lease the role is held on (0: not held)."""
        return self._lease_id

    def holds(self) -> bool:
        return self._lease_id != 0 and time.monotonic() < self._valid_until

    def adopt(self, lease_id: int) -> None:
        """A lease the registry granted this holder, whose answer was lost:
        the next campaign renews it (it counts as held once that answers)."""
        self._lease_id = lease_id

    async def wait_until_held(self) -> None:
        while not self.holds():
            self._changed.clear()
            await self._changed.wait()

    async def campaign_once(self) -> bool:
        started = time.monotonic()
        was = self.holds()
        try:
            elected, leader, lease_id, ttl = await self.remote.campaign(
                self.role, self.candidate, self.ttl_seconds, self._lease_id, self.published()
            )
        except QuireError as exc:
            log.warning("campaigning for the %s role failed: %s", self.role, exc)
            return self.holds()
        self.leader = leader
        self._lease_id = lease_id if elected else 0
        self._valid_until = started + ttl if elected else 0.0
        if self.holds() != was:
            log.info("%s %s the %s role (holder: %s)", self.candidate, "holds" if elected else "does not hold",
                     self.role, leader or "nobody")  # fmt: skip
            self._changed.set()
        return self.holds()

    async def run(self) -> None:
        while True:
            await self.campaign_once()
            await asyncio.sleep(self.ttl_seconds / 3)

    async def resign(self) -> None:
        """Give the role up (a clean stop), so a standby takes over at once."""
        if not self._lease_id:
            return
        lease_id, self._lease_id = self._lease_id, 0
        try:
            await self.remote.resign(self.role, self.candidate, lease_id)
        except QuireError as exc:
            log.warning("resigning the %s role failed (it lapses with its lease): %s", self.role, exc)

    def status(self) -> dict[str, object]:
        return {"role": self.role, "candidate": self.candidate, "active": self.holds(), "holder": self.leader}
