"""Bookie registrations on a MetadataStore: register, heartbeat (the lease and
the read-only state), leave, list, watch and look up. No grpc here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from quire_api.bookie_addresses import effective_service_info, validate_service_info
from quire_api.errors import (
    Aborted,
    AlreadyExists,
    InvalidArgument,
    NotFound,
    Reason,
    Unavailable,
)
from quire_api.ids import (
    validate_bookie_id,
)
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2
from quire_registry.keys import Keys
from quire_registry.store import Delete, MetadataStore, Put, WatchCompacted, WatchEvent

log = logging.getLogger(__name__)


@dataclass
class Registration:
    """A live bookie registration: the lease and where the record is stored."""

    bookie_id: str
    lease_id: int
    ttl_seconds: int
    read_only: bool
    info: common_pb2.BookieServiceInfo
    version: int


class BookieRegistrations:
    """Bookies' registrations: one key per live bookie, on its lease, under
    its writable or read-only state; listed and watched by placement and
    gateways."""

    def __init__(self, store: MetadataStore, keys: Keys, default_ttl_seconds: int = 10) -> None:
        self.store = store
        self.keys = keys
        self.default_ttl_seconds = default_ttl_seconds
        # Set when this registry starts to stop: sessions that end from then on
        # leave their lease alone (see leave_leases_to_resume).
        self._stopping = False

    def leave_leases_to_resume(self) -> None:
        """The registry is stopping: a session that ends from now on was most
        likely cut by the stop, not by its bookie, so its lease is not revoked.
        The bookie resumes it at another replica or at this one restarted;
        otherwise it runs out after its TTL. Revoking would drop every bookie
        from the cluster on each rolling restart of the registries."""
        self._stopping = True

    def _bookie_key(self, bookie_id: str, read_only: bool) -> bytes:
        return self.keys.readonly_bookie(bookie_id) if read_only else self.keys.writable_bookie(bookie_id)

    async def register_bookie(
        self,
        bookie_id: str,
        read_only: bool,
        info: common_pb2.BookieServiceInfo,
        ttl_seconds: int,
        resume_lease_id: int = 0,
    ) -> Registration:
        """Start a registration session. A session that names the lease of a
        registration that is still live (the registry restarted, or the bookie
        reconnected to another replica) adopts it; any other claim on a live
        BookieId is refused, so one id never has two live registrations."""
        validate_bookie_id(bookie_id)
        validate_service_info(info)
        if resume_lease_id:
            resumed = await self._resume(bookie_id, resume_lease_id)
            if resumed is not None:
                return await self.heartbeat(resumed, read_only, info)
        lease_id, granted_ttl = await self.store.grant_lease(ttl_seconds or self.default_ttl_seconds)
        key = self._bookie_key(bookie_id, read_only)
        # Absent under both states: never two live registrations of one id.
        version = await self.store.transact(
            [self.keys.writable_bookie(bookie_id), self.keys.readonly_bookie(bookie_id)],
            {},
            [Put(key, info.SerializeToString(), lease_id)],
        )
        if version is None:
            await self.store.revoke_lease(lease_id)
            raise AlreadyExists(
                f"bookie {bookie_id} is already registered by a live process; "
                "it disappears once that process stops heartbeating",
                Reason.BOOKIE_ALREADY_REGISTERED,
            )
        log.info("bookie %s registered (%s)", bookie_id, "read-only" if read_only else "writable")
        return Registration(bookie_id, lease_id, granted_ttl, read_only, info, version)

    async def _resume(self, bookie_id: str, lease_id: int) -> Registration | None:
        """The live registration of this bookie on `lease_id`, or None."""
        for read_only in (False, True):
            kv = await self.store.get(self._bookie_key(bookie_id, read_only))
            if kv is None or kv.lease_id != lease_id:
                continue
            ttl = await self.store.keep_alive(lease_id)
            if ttl <= 0:
                return None
            log.info("bookie %s resumed its registration on lease %x", bookie_id, lease_id)
            info = common_pb2.BookieServiceInfo.FromString(kv.value)
            return Registration(bookie_id, lease_id, ttl, read_only, info, kv.version)
        return None

    async def heartbeat(
        self, registration: Registration, read_only: bool, info: common_pb2.BookieServiceInfo
    ) -> Registration:
        """Refresh the lease; move the key if the read-only state changed, and
        rewrite it if the advertised record changed."""
        validate_service_info(info)
        ttl = await self.store.keep_alive(registration.lease_id)
        if ttl <= 0:
            raise NotFound(
                f"registration of bookie {registration.bookie_id} expired; register again",
                Reason.BOOKIE_NOT_FOUND,
            )
        if read_only == registration.read_only and info == registration.info:
            return registration
        old_key = self._bookie_key(registration.bookie_id, registration.read_only)
        new_key = self._bookie_key(registration.bookie_id, read_only)
        ops: list[Put | Delete] = [Put(new_key, info.SerializeToString(), registration.lease_id)]
        if new_key != old_key:
            # One transaction: the bookie is never listed in both states or neither.
            ops.insert(0, Delete(old_key))
        version = await self.store.transact([], {old_key: registration.version}, ops)
        if version is None:
            raise Aborted(f"registration of bookie {registration.bookie_id} changed underneath this session")
        registration.read_only, registration.info, registration.version = read_only, info, version
        return registration

    async def registration_stream(
        self, requests: AsyncIterator[registry_pb2.RegisterBookieRequest]
    ) -> AsyncGenerator[Registration, None]:
        """One bookie's RegisterBookie stream: its first message registers it
        (or takes its lease up again), each later one renews the lease and
        carries its read-only state and record; the registration is yielded
        after each. However the stream ends, the bookie is unregistered then,
        unless the registry is stopping (leave_leases_to_resume). Close this
        generator when done with it, e.g. with contextlib.aclosing."""
        registration: Registration | None = None
        try:
            async for request in requests:
                if registration is None:
                    registration = await self.register_bookie(
                        request.bookie_id,
                        request.read_only,
                        request.service_info,
                        request.ttl_seconds,
                        request.resume_lease_id,
                    )
                else:
                    if request.bookie_id != registration.bookie_id:
                        raise InvalidArgument(
                            f"a registration session belongs to bookie {registration.bookie_id}, "
                            f"not {request.bookie_id}"
                        )
                    registration = await self.heartbeat(registration, request.read_only, request.service_info)
                yield registration
        finally:
            if registration is not None and self._stopping:
                log.info(
                    "registry stopping: bookie %s keeps lease %x to resume on",
                    registration.bookie_id,
                    registration.lease_id,
                )
            elif registration is not None:
                # Shielded: the stream usually ends by cancellation.
                await asyncio.shield(self.unregister_bookie(registration))

    async def unregister_bookie(self, registration: Registration) -> None:
        """At the end of a bookie's session. Best effort: a lease etcd cannot
        revoke now (no quorum within reach) expires on its own after its TTL."""
        try:
            await self.store.revoke_lease(registration.lease_id)
        except Unavailable as exc:
            log.warning("bookie %s: its registration will expire with its lease: %s", registration.bookie_id, exc)
            return
        log.info("bookie %s unregistered", registration.bookie_id)

    def _record(self, key: bytes, value: bytes, version: int) -> registry_pb2.BookieRecord:
        bookie_id, read_only = bookie_id_of(self.keys, key)
        return registry_pb2.BookieRecord(
            bookie_id=bookie_id,
            read_only=read_only,
            service_info=common_pb2.BookieServiceInfo.FromString(value),
            version=version,
        )

    async def list_bookies(self, state: int) -> tuple[list[registry_pb2.BookieRecord], int]:
        if state not in registry_pb2.BookieState.values():
            raise InvalidArgument(f"unknown bookie state {state}; use writable, read-only or all")
        # One range read, so the list is one consistent revision: a watch that
        # starts right after it misses nothing.
        prefix = {
            registry_pb2.BOOKIE_STATE_WRITABLE: self.keys.writable_bookies,
            registry_pb2.BOOKIE_STATE_READ_ONLY: self.keys.readonly_bookies,
        }.get(state, self.keys.bookies)
        items, revision = await self.store.list_prefix(prefix)
        records = sorted((self._record(kv.key, kv.value, kv.version) for kv in items), key=lambda r: r.bookie_id)
        return records, revision

    async def watch_bookies(self):  # type: ignore[no-untyped-def]
        """Yield (event type, record): a snapshot of every bookie and a
        SNAPSHOT_DONE marker, then joins, leaves and changes as they happen.
        When etcd has compacted the history the watch needs, relist and yield
        the difference, so a watcher never misses a leave."""
        records, revision = await self.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
        live = {r.bookie_id: r for r in records}
        for record in records:
            yield registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT, record
        yield registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE, registry_pb2.BookieRecord()
        while True:
            try:
                async for events in self.store.watch_prefix(self.keys.bookies, revision + 1):
                    for kind, record in bookie_events(self.keys, live, events):
                        yield kind, record
                    revision = max(revision, *(event.version for event in events))
            except WatchCompacted as exc:
                log.warning("bookie watch fell behind a compaction (%s); relisting", exc)
                records, revision = await self.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
                for kind, record in relist_events(live, records):
                    yield kind, record

    async def get_bookie(self, bookie_id: str) -> tuple[registry_pb2.BookieRecord, common_pb2.BookieServiceInfo]:
        """The registration as stored, and the service info clients go by."""
        validate_bookie_id(bookie_id)
        for key in (self.keys.writable_bookie(bookie_id), self.keys.readonly_bookie(bookie_id)):
            kv = await self.store.get(key)
            if kv is not None:
                record = self._record(kv.key, kv.value, kv.version)
                return record, effective_service_info(bookie_id, record.service_info)
        raise NotFound(f"bookie {bookie_id} is not registered", Reason.BOOKIE_NOT_FOUND)


def bookie_id_of(keys: Keys, key: bytes) -> tuple[str, bool]:
    """(BookieId, read-only) of a registration key."""
    read_only = key.startswith(keys.readonly_bookies)
    prefix = keys.readonly_bookies if read_only else keys.writable_bookies
    return key[len(prefix) :].decode(), read_only


def bookie_events(
    keys: Keys, live: dict[str, registry_pb2.BookieRecord], events: list[WatchEvent]
) -> list[tuple[int, registry_pb2.BookieRecord]]:
    """Turn one batch of etcd events under bookies/ into joins, leaves and
    changes, updating `live`. A move between writable and read-only deletes one
    key and writes the other in the same revision: that is a change, not a
    leave and a join."""
    written = {bookie_id_of(keys, e.key)[0] for e in events if e.value is not None}
    out: list[tuple[int, registry_pb2.BookieRecord]] = []
    for event in events:
        bookie_id, read_only = bookie_id_of(keys, event.key)
        if event.value is None:
            if bookie_id not in written and live.pop(bookie_id, None) is not None:
                out.append((registry_pb2.BOOKIE_EVENT_TYPE_LEFT, registry_pb2.BookieRecord(bookie_id=bookie_id)))
            continue
        record = registry_pb2.BookieRecord(
            bookie_id=bookie_id,
            read_only=read_only,
            service_info=common_pb2.BookieServiceInfo.FromString(event.value),
            version=event.version,
        )
        kind = registry_pb2.BOOKIE_EVENT_TYPE_CHANGED if bookie_id in live else registry_pb2.BOOKIE_EVENT_TYPE_JOINED
        live[bookie_id] = record
        out.append((kind, record))
    return out


def relist_events(
    live: dict[str, registry_pb2.BookieRecord], records: list[registry_pb2.BookieRecord]
) -> list[tuple[int, registry_pb2.BookieRecord]]:
    """The events that take a watcher from `live` to a fresh listing (after a
    compaction), updating `live`."""
    fresh = {r.bookie_id: r for r in records}
    out: list[tuple[int, registry_pb2.BookieRecord]] = [
        (registry_pb2.BOOKIE_EVENT_TYPE_LEFT, registry_pb2.BookieRecord(bookie_id=bookie_id))
        for bookie_id in sorted(live.keys() - fresh.keys())
    ]
    for bookie_id, record in sorted(fresh.items()):
        if bookie_id not in live:
            out.append((registry_pb2.BOOKIE_EVENT_TYPE_JOINED, record))
        elif live[bookie_id] != record:
            out.append((registry_pb2.BOOKIE_EVENT_TYPE_CHANGED, record))
    live.clear()
    live.update(fresh)
    return out
