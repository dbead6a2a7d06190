"""Elections on etcd: cluster-wide roles that one process at a time may
hold (the auditor, each gateway's own).

The holder is recorded at leaders/<role> on an etcd lease: the key lives as
long as the holder renews the lease, and vanishes when it stops (crash,
partition, resign). A candidate that finds the key absent creates it on a
lease of its own, in one create-if-absent transaction, so two candidates
never both win. The value is a `Leader` record: the holder's name and the
figures it publishes while it holds the role.

Retry-safety is the store's: a create whose answer was lost recognises its
own commit (the key holds this record on the lease just granted).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from quire_api.errors import InvalidArgument
from quire_proto.registry.v1 import registry_pb2
from quire_registry.keys import Keys
from quire_registry.store import MetadataStore, Put

log = logging.getLogger(__name__)

_ROLE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
MAX_CANDIDATE_CHARS = 253
DEFAULT_TTL_SECONDS = 10
MIN_TTL_SECONDS, MAX_TTL_SECONDS = 2, 300
MAX_PROPERTIES = 64
MAX_PROPERTY_BYTES = 4096


@dataclass(frozen=True)
class Campaign:
    elected: bool
    leader: registry_pb2.Leader
    lease_id: int = 0
    ttl_seconds: int = 0


def validate_role(role: str) -> None:
    if not _ROLE.fullmatch(role):
        raise InvalidArgument(f"role {role!r} is not lowercase letters, digits and dashes (at most 63)")


def validate_candidate(candidate: str) -> None:
    if not 0 < len(candidate) <= MAX_CANDIDATE_CHARS or not candidate.isprintable():
        raise InvalidArgument(f"candidate must be 1 to {MAX_CANDIDATE_CHARS} printable characters")


def validate_properties(properties: Mapping[str, str]) -> None:
    size = sum(len(k.encode()) + len(v.encode()) for k, v in properties.items())
    if len(properties) > MAX_PROPERTIES or size > MAX_PROPERTY_BYTES:
        raise InvalidArgument(
            f"{len(properties)} properties of {size} bytes; at most {MAX_PROPERTIES} and {MAX_PROPERTY_BYTES} bytes"
        )


def ttl_of(requested: int) -> int:
    ttl = requested or DEFAULT_TTL_SECONDS
    if not MIN_TTL_SECONDS <= ttl <= MAX_TTL_SECONDS:
        raise InvalidArgument(f"ttl_seconds {ttl} is not between {MIN_TTL_SECONDS} and {MAX_TTL_SECONDS}")
    return ttl


class Elections:
    def __init__(self, store: MetadataStore, keys: Keys) -> None:
        self.store = store
        self.keys = keys

    async def campaign(
        self, role: str, candidate: str, ttl_seconds: int, lease_id: int, properties: Mapping[str, str]
    ) -> Campaign:
        """Renew the role if `candidate` holds it on `lease_id`, else take it
        if nobody holds it; the answer names the holder either way."""
        validate_role(role)
        validate_candidate(candidate)
        validate_properties(properties)
        ttl = ttl_of(ttl_seconds)
        key = self.keys.leader(role)
        record = registry_pb2.Leader(role=role, holder=candidate, properties=dict(properties))
        current = await self.store.get(key)
        if lease_id and current is not None and current.lease_id == lease_id:
            held = registry_pb2.Leader.FromString(current.value)
            if held.holder == candidate:
                granted = await self.store.keep_alive(lease_id)
                if granted > 0:
                    if held != record:  # publish the new figures, on the same lease
                        await self.store.transact(
                            [], {key: current.version}, [Put(key, record.SerializeToString(), lease_id)]
                        )
                    return Campaign(True, record, lease_id, granted)
        if current is not None:
            return Campaign(False, registry_pb2.Leader.FromString(current.value))
        new_lease, granted = await self.store.grant_lease(ttl)
        if await self.store.create(key, record.SerializeToString(), new_lease) is None:
            winner = await self.store.get(key)
            await self.store.revoke_lease(new_lease)
            return Campaign(
                False, registry_pb2.Leader.FromString(winner.value) if winner else registry_pb2.Leader(role=role)
            )
        log.info("%s holds the %s role (lease %x)", candidate, role, new_lease)
        return Campaign(True, record, new_lease, granted)

    async def resign(self, role: str, candidate: str, lease_id: int) -> None:
        """Give the role up: revoking the lease removes the key with it."""
        validate_role(role)
        validate_candidate(candidate)
        current = await self.store.get(self.keys.leader(role))
        if current is None or current.lease_id != lease_id or not lease_id:
            return
        if registry_pb2.Leader.FromString(current.value).holder != candidate:
            return
        await self.store.revoke_lease(lease_id)
        log.info("%s resigned the %s role", candidate, role)

    async def leaders(self, role_prefix: str) -> list[registry_pb2.Leader]:
        """The roles held now whose names start with `role_prefix`, in role order."""
        if role_prefix:
            validate_role(role_prefix)
        held, _ = await self.store.list_prefix(self.keys.leader(role_prefix))
        return [registry_pb2.Leader.FromString(kv.value) for kv in held]

    async def leader(self, role: str) -> tuple[registry_pb2.Leader, int]:
        """The holder and the lease it holds the role on (0: nobody holds it)."""
        validate_role(role)
        current = await self.store.get(self.keys.leader(role))
        if current is None:
            return registry_pb2.Leader(role=role), 0
        return registry_pb2.Leader.FromString(current.value), current.lease_id
