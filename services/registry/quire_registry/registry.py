"""Registry domain logic: bookie registrations, cookies and ledger metadata on
a MetadataStore. No grpc here; the servicer is a thin layer over this."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from enum import Enum

from google.protobuf.message import DecodeError

from quire.common.v1 import common_pb2
from quire.registry.v1 import registry_pb2
from quire_api.bookie_addresses import effective_service_info, validate_service_info
from quire_api.errors import (
    Aborted,
    AlreadyExists,
    DataLoss,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    QuireError,
    Reason,
    Unavailable,
)
from quire_api.ids import (
    U64_MAX,
    LedgerId,
    new_scoped_ledger_id,
    new_uuid7_ledger_id,
    validate_bookie_id,
    validate_request_id,
)
from quire_common.ledger_secrets import needs_sealing, seal
from quire_common.quorum_sizes import validate_quorum
from quire_registry.keys import Keys
from quire_registry.store import Delete, MetadataStore, Put, WatchBatch, WatchCompacted, WatchEvent

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
_ID_ATTEMPTS = 16
_LEGACY_ID_ATTEMPTS = 64  # concurrent legacy creators race for each number; one of them wins every round
_OPS_PER_TRANSACTION = 100  # etcd refuses transactions of more than 128 operations by default
# Creates sharing one transaction: each writes two keys (ledger, request_id) on two compares.
MAX_CREATES_PER_BATCH = _OPS_PER_TRANSACTION // 2
DEFAULT_WATCH_HEARTBEAT_SECONDS = 2.0
_WATCH_HEARTBEAT_BOUNDS = (0.1, 60.0)
_WATCH_QUEUE_BATCHES = 64  # etcd batches read ahead of a slow watcher before its etcd watch waits


class IdMode(Enum):
    FRESH = "fresh"  # a new 128-bit UUIDv7-shaped id
    SCOPED = "scoped"  # a new ledger id within a given scope
    EXACT = "exact"  # exactly the id given
    LEGACY = "legacy"  # scope 0, from the central 64-bit generator


Created = tuple[common_pb2.LedgerMetadata, int]  # a stored ledger record and its version


@dataclass(frozen=True)
class CreateOrder:
    """One CreateLedgerMetadata request, as plain values."""

    mode: IdMode
    metadata: common_pb2.LedgerMetadata
    ledger_id: LedgerId | None = None  # for IdMode.EXACT
    scope_id: int = 0  # for IdMode.SCOPED
    request_id: str = ""


@dataclass(frozen=True)
class _Prepared:
    fingerprint: str  # of the request_id's create; empty without one
    sealed: common_pb2.LedgerMetadata  # the record as etcd gets it, before its id is chosen


@dataclass(frozen=True)
class _Attempt:
    candidate: LedgerId
    record: common_pb2.LedgerMetadata
    absent: list[bytes]
    ops: list[Put | Delete]


@dataclass
class Registration:
    """A live bookie registration: the lease and where the record is stored."""

    bookie_id: str
    lease_id: int
    ttl_seconds: int
    read_only: bool
    info: common_pb2.BookieServiceInfo
    version: int


class Registry:
    def __init__(
        self,
        store: MetadataStore,
        cluster: str,
        default_ttl_seconds: int = 10,
        recognise_request_ids: bool = True,
        keep_ledger_passwords: bool = False,
    ) -> None:
        self.store = store
        # True only during an upgrade from a version that reads the plaintext password
        # (QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS); stored records then show it.
        self.keep_ledger_passwords = keep_ledger_passwords
        self.keys = Keys(cluster)
        self.default_ttl_seconds = default_ttl_seconds
        # False only as the fault suite's positive control (QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK):
        # a repeated CreateLedger request_id is then not looked up.
        self.recognise_request_ids = recognise_request_ids

    # -- bookies ---------------------------------------------------------------

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

    async def unregister_bookie(self, registration: Registration) -> None:
        await self.store.revoke_lease(registration.lease_id)
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

    # -- cookies ---------------------------------------------------------------

    async def get_cookie(self, bookie_id: str) -> tuple[registry_pb2.Cookie, int]:
        validate_bookie_id(bookie_id)
        kv = await self.store.get(self.keys.cookie(bookie_id))
        if kv is None:
            raise NotFound(f"no cookie for bookie {bookie_id}", Reason.BOOKIE_NOT_FOUND)
        return registry_pb2.Cookie.FromString(kv.value), kv.version

    async def put_cookie(self, bookie_id: str, cookie: registry_pb2.Cookie, expected_version: int) -> int:
        validate_bookie_id(bookie_id)
        key = self.keys.cookie(bookie_id)
        if expected_version == 0:
            version = await self.store.create(key, cookie.SerializeToString())
            if version is None:
                raise AlreadyExists(f"bookie {bookie_id} already has a cookie", Reason.COOKIE_EXISTS)
            return version
        version = await self.store.compare_and_swap(key, cookie.SerializeToString(), expected_version)
        if version is None:
            raise Aborted(f"cookie of bookie {bookie_id} changed since version {expected_version}")
        return version

    async def delete_cookie(self, bookie_id: str, expected_version: int) -> None:
        """Remove a decommissioned bookie's cookie, in one transaction that
        also requires the bookie to be unregistered: a bookie registering
        meanwhile keeps its cookie."""
        validate_bookie_id(bookie_id)
        key = self.keys.cookie(bookie_id)
        registrations = [self.keys.writable_bookie(bookie_id), self.keys.readonly_bookie(bookie_id)]
        if await self.store.transact(registrations, {key: expected_version}, [Delete(key)]) is not None:
            log.info("cookie of bookie %s deleted (decommissioned)", bookie_id)
            return
        for registration in registrations:
            if await self.store.get(registration) is not None:
                raise FailedPrecondition(
                    f"bookie {bookie_id} is registered; stop it before removing its cookie",
                    Reason.BOOKIE_ALREADY_REGISTERED,
                )
        current = await self.store.get(key)
        if current is None:
            raise NotFound(f"no cookie for bookie {bookie_id}", Reason.BOOKIE_NOT_FOUND)
        raise Aborted(f"cookie of bookie {bookie_id} changed since version {expected_version}")

    # -- load weights (written by the telemetry stage, read by placement) --------

    async def put_load_weights(self, weights: list[registry_pb2.LoadWeight]) -> None:
        for weight in weights:
            validate_bookie_id(weight.bookie_id)
            if not 0 < weight.factor <= 1:
                raise InvalidArgument(f"load factor {weight.factor} of bookie {weight.bookie_id} is not in (0, 1]")
        for start in range(0, len(weights), _OPS_PER_TRANSACTION):
            chunk = weights[start : start + _OPS_PER_TRANSACTION]
            await self.store.transact(
                [], {}, [Put(self.keys.load_weight(w.bookie_id), w.SerializeToString()) for w in chunk]
            )

    async def list_load_weights(self) -> list[registry_pb2.LoadWeight]:
        items, _ = await self.store.list_prefix(self.keys.load_weights)
        return [registry_pb2.LoadWeight.FromString(kv.value) for kv in items]

    # -- ledgers ---------------------------------------------------------------

    async def create_ledger(
        self,
        mode: IdMode,
        metadata: common_pb2.LedgerMetadata,
        ledger_id: LedgerId | None = None,
        scope_id: int = 0,
        request_id: str = "",
    ) -> tuple[common_pb2.LedgerMetadata, int]:
        """Store a new ledger record under an id chosen by `mode`. With a
        `request_id`, the record and a create-requests/<request_id> key are
        written in one transaction, and a create repeating that request_id
        gets the ledger it made (same id, same record) instead of another."""
        order = CreateOrder(mode, metadata, ledger_id, scope_id, request_id)
        return await self._create_alone(order, await self._prepare(order))

    async def create_ledgers(self, orders: Sequence[CreateOrder]) -> list[Created | QuireError]:
        """Several creates, each answered as create_ledger would have
        answered it alone (a record, or the error it fails with), most of
        them written in one transaction. That transaction is all or nothing,
        so a create that cannot share it without failing the others goes
        alone afterwards: a legacy-id create (it claims the central
        sequence), and one repeating a request_id or exact id of an earlier
        create of the batch (it then finds that create's outcome). When the
        shared transaction's compare fails (an id taken, a request_id
        already used: rare), every create of it is tried again alone."""
        if len(orders) > MAX_CREATES_PER_BATCH:
            raise InvalidArgument(f"{len(orders)} creates in one batch; at most {MAX_CREATES_PER_BATCH}")
        results: list[Created | QuireError | None] = [None] * len(orders)
        prepared: dict[int, _Prepared] = {}
        shared: dict[int, _Attempt] = {}
        written: set[bytes] = set()  # keys the shared transaction writes
        for index, order in enumerate(orders):
            try:
                prepared[index] = await self._prepare(order)
            except QuireError as exc:
                results[index] = exc
                continue
            if order.mode is IdMode.LEGACY:
                continue
            attempt = self._attempt(order, prepared[index], self._candidate(order))
            if written.isdisjoint(attempt.absent):
                shared[index] = attempt
                written.update(attempt.absent)
        if shared:
            absent = [key for attempt in shared.values() for key in attempt.absent]
            ops = [op for attempt in shared.values() for op in attempt.ops]
            version = await self.store.transact(absent, {}, ops)
            if version is not None:
                for index, attempt in shared.items():
                    results[index] = (attempt.record, version)
                log.debug("%d ledgers created in one transaction", len(shared))
            else:
                log.info("a batch of %d creates met a taken key; each is tried alone", len(shared))

        async def alone(index: int) -> None:
            try:
                results[index] = await self._create_alone(orders[index], prepared[index])
            except QuireError as exc:
                results[index] = exc

        await asyncio.gather(*(alone(index) for index in prepared if results[index] is None))
        answered = [result for result in results if result is not None]
        assert len(answered) == len(orders), "every create of a batch is answered"
        return answered

    async def _prepare(self, order: CreateOrder) -> _Prepared:
        """Check a create and seal its record: what every attempt at it shares."""
        validate_metadata(order.metadata)
        fingerprint = ""
        if order.request_id:
            validate_request_id(order.request_id)
            fingerprint = create_fingerprint(order.mode, order.metadata, order.ledger_id, order.scope_id)
        if order.mode is IdMode.EXACT and order.ledger_id is None:
            raise InvalidArgument("an exact-id create needs its ledger id")
        return _Prepared(fingerprint, await sealed(order.metadata, self.keep_ledger_passwords))

    @staticmethod
    def _candidate(order: CreateOrder) -> LedgerId:
        """The id one attempt tries (not for legacy ids, which are claimed from etcd)."""
        if order.mode is IdMode.EXACT:
            assert order.ledger_id is not None
            return order.ledger_id
        if order.mode is IdMode.SCOPED:
            return new_scoped_ledger_id(order.scope_id)
        return new_uuid7_ledger_id()

    def _attempt(self, order: CreateOrder, prepared: _Prepared, candidate: LedgerId) -> _Attempt:
        """The record and the keys one attempt at a create writes: the ledger
        and, with a request_id, its create-requests key, both required absent."""
        record = common_pb2.LedgerMetadata()
        record.CopyFrom(prepared.sealed)
        record.ledger_id.scope_id, record.ledger_id.ledger_id = candidate.scope_id, candidate.ledger_id
        record.create_request_id = order.request_id
        key = self.keys.ledger(candidate)
        attempt = _Attempt(candidate, record, [key], [Put(key, record.SerializeToString())])
        if order.request_id:
            request_key = self.keys.create_request(order.request_id)
            attempt.absent.append(request_key)
            attempt.ops.append(Put(request_key, _request_record(candidate, prepared.fingerprint)))
        return attempt

    async def _create_alone(self, order: CreateOrder, prepared: _Prepared) -> Created:
        # A repeated request_id is found when the transaction fails on its key (below), not
        # looked up first: nearly every create is a first attempt, and a read each cost an etcd call.
        attempts = _LEGACY_ID_ATTEMPTS if order.mode is IdMode.LEGACY else _ID_ATTEMPTS
        for _ in range(attempts):
            absent: list[bytes] = []
            versions: dict[bytes, int] = {}
            ops: list[Put | Delete] = []
            if order.mode is IdMode.LEGACY:
                candidate = await self._claim_legacy_id(absent, versions, ops)
            else:
                candidate = self._candidate(order)
            attempt = self._attempt(order, prepared, candidate)
            version = await self.store.transact(absent + attempt.absent, versions, ops + attempt.ops)
            if version is not None:
                log.debug("ledger %s created", candidate)
                return attempt.record, version
            if order.request_id:  # a concurrent create with this request_id may have won
                earlier = await self._created_by(order.request_id, prepared.fingerprint)
                if earlier is not None:
                    return earlier
            if order.mode is IdMode.EXACT:
                raise AlreadyExists(f"ledger {candidate} already exists", Reason.LEDGER_EXISTS)
            if order.mode is IdMode.LEGACY:
                await self._skip_taken_legacy_id(candidate, absent, versions)
        raise Aborted(f"could not find a free ledger id in {attempts} attempts")

    async def _created_by(self, request_id: str, fingerprint: str) -> tuple[common_pb2.LedgerMetadata, int] | None:
        """The ledger an earlier create with this request_id made, or None
        when there was none; ALREADY_EXISTS when that create asked for
        something else."""
        if not self.recognise_request_ids:
            return None
        kv = await self.store.get(self.keys.create_request(request_id))
        if kv is None:
            return None
        ledger_name, stored_fingerprint = _parse_request_record(kv.value)
        if stored_fingerprint != fingerprint:
            raise AlreadyExists(
                f"request_id {request_id!r} already created ledger {ledger_name} with other parameters; "
                "a request_id names one create (use a new one for a different ledger)",
                Reason.REQUEST_ID_REUSED,
            )
        ledger = LedgerId.parse(ledger_name)
        try:
            record, version = await self.get_ledger(ledger)
        except NotFound:
            raise NotFound(
                f"ledger {ledger_name}, created by request_id {request_id!r}, has been deleted since",
                Reason.LEDGER_NOT_FOUND,
            ) from None
        log.info("ledger %s: create repeated with request_id %r; returning it", ledger, request_id)
        return record, version

    async def _claim_legacy_id(
        self, absent: list[bytes], versions: dict[bytes, int], ops: list[Put | Delete]
    ) -> LedgerId:
        """The next scope-0 id, claimed in the transaction that creates the
        ledger: idgen/legacy counts its writes (etcd's per-key version), and
        the create writes it again on condition that nobody did meanwhile. So
        an id is taken only by a ledger that was created (a lost answer or a
        failed create burns none), and concurrent creators never share one."""
        sequence = self.keys.legacy_id_generator
        current = await self.store.get(sequence)
        next_id = (current.writes if current is not None else 0) + 1
        if next_id > U64_MAX >> 1:
            raise Aborted("the legacy 63-bit ledger id space is exhausted")
        if current is None:
            absent.append(sequence)
        else:
            versions[sequence] = current.version
        ops.append(Put(sequence, b"", shared=True))
        return LedgerId(0, next_id)

    async def _skip_taken_legacy_id(self, candidate: LedgerId, absent: list[bytes], versions: dict[bytes, int]) -> None:
        """After a failed legacy create: when the sequence did not move, the
        id itself was taken (created with exactly that id), so step past it."""
        sequence = self.keys.legacy_id_generator
        current = await self.store.get(sequence)
        if current is None and sequence in absent:
            await self.store.transact([sequence], {}, [Put(sequence, b"", shared=True)])
        elif current is not None and versions.get(sequence) == current.version:
            await self.store.transact([], {sequence: current.version}, [Put(sequence, b"", shared=True)])
        else:
            return  # another creator moved it: just try the next number
        log.info("legacy id %s was taken by an exact-id create; skipped", candidate)

    async def get_ledger(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        kv = await self.store.get(self.keys.ledger(ledger_id))
        if kv is None:
            raise NotFound(f"ledger {ledger_id} does not exist", Reason.LEDGER_NOT_FOUND)
        return _decode_ledger(ledger_id, kv.value), kv.version

    async def update_ledger(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        validate_metadata(metadata)
        # A record from before LedgerSecrets loses its plaintext password here.
        record = await sealed(metadata, self.keep_ledger_passwords)
        record.ledger_id.scope_id, record.ledger_id.ledger_id = ledger_id.scope_id, ledger_id.ledger_id
        key = self.keys.ledger(ledger_id)
        version = await self.store.compare_and_swap(key, record.SerializeToString(), expected_version)
        if version is None:
            if await self.store.get(key) is None:
                raise NotFound(f"ledger {ledger_id} does not exist", Reason.LEDGER_NOT_FOUND)
            raise Aborted(
                f"ledger {ledger_id} metadata changed since version {expected_version}",
                Reason.METADATA_VERSION_CONFLICT,
            )
        return version

    async def delete_ledger(self, ledger_id: LedgerId, expected_version: int = 0) -> None:
        """Delete the record (at `expected_version` if given), and with it the
        create-requests key of the request_id that made it."""
        key = self.keys.ledger(ledger_id)
        current = await self.store.get(key)
        if current is None:
            raise NotFound(f"ledger {ledger_id} does not exist", Reason.LEDGER_NOT_FOUND)
        ops: list[Put | Delete] = [Delete(key)]
        try:
            request_id = common_pb2.LedgerMetadata.FromString(current.value).create_request_id
        except DecodeError:
            request_id = ""  # a corrupt record may still be deleted
        if request_id:
            ops.append(Delete(self.keys.create_request(request_id)))
        if await self.store.transact([], {key: expected_version or current.version}, ops) is not None:
            log.info("ledger %s metadata deleted", ledger_id)
            return
        if await self.store.get(key) is None:
            raise NotFound(f"ledger {ledger_id} does not exist", Reason.LEDGER_NOT_FOUND)
        raise Aborted(f"ledger {ledger_id} metadata changed since version {expected_version or current.version}")

    async def watch_ledgers(
        self, start_revision: int, heartbeat_seconds: float = 0.0
    ) -> AsyncIterator[registry_pb2.WatchLedgerMetadataResponse]:
        """Every change to ledger metadata from `start_revision` on (0: from
        now). First STARTED, or RESET when etcd no longer holds that history
        (or never reached it); then PUT and DELETED events in revision order,
        RESET again if the watch falls behind a compaction, and PROGRESS when
        nothing was sent for `heartbeat_seconds`. No snapshot and no relist:
        a watcher told RESET drops what it cannot vouch for."""
        if start_revision < 0:
            raise InvalidArgument(f"start_revision {start_revision} is negative")
        low, high = _WATCH_HEARTBEAT_BOUNDS
        heartbeat = min(max(heartbeat_seconds or DEFAULT_WATCH_HEARTBEAT_SECONDS, low), high)
        current = await self.store.current_revision()
        if start_revision == 0:
            kind, revision = registry_pb2.LEDGER_METADATA_EVENT_TYPE_STARTED, current
        elif start_revision <= current + 1 and await self.store.history_kept(min(start_revision, current)):
            kind, revision = registry_pb2.LEDGER_METADATA_EVENT_TYPE_STARTED, start_revision - 1
        else:
            log.info("ledger watch from revision %d cannot be replayed (store at %d); reset", start_revision, current)
            kind, revision = registry_pb2.LEDGER_METADATA_EVENT_TYPE_RESET, current
        yield registry_pb2.WatchLedgerMetadataResponse(type=kind, revision=revision)
        while True:
            batches: asyncio.Queue[WatchBatch | BaseException] = asyncio.Queue(_WATCH_QUEUE_BATCHES)
            reader = asyncio.create_task(_drain(self.store.watch_changes(self.keys.ledgers, revision + 1), batches))
            try:
                while True:
                    try:
                        batch = await asyncio.wait_for(batches.get(), heartbeat)
                    except TimeoutError:
                        yield registry_pb2.WatchLedgerMetadataResponse(
                            type=registry_pb2.LEDGER_METADATA_EVENT_TYPE_PROGRESS, revision=revision
                        )
                        continue
                    if isinstance(batch, BaseException):
                        raise batch
                    for response in ledger_events(self.keys, batch):
                        yield response
                    revision = max(revision, batch.revision)
                    if not batch.events:
                        yield registry_pb2.WatchLedgerMetadataResponse(
                            type=registry_pb2.LEDGER_METADATA_EVENT_TYPE_PROGRESS, revision=revision
                        )
            except WatchCompacted as exc:
                revision = await self.store.current_revision()
                log.warning("ledger watch fell behind a compaction (%s); reset at revision %d", exc, revision)
                yield registry_pb2.WatchLedgerMetadataResponse(
                    type=registry_pb2.LEDGER_METADATA_EVENT_TYPE_RESET, revision=revision
                )
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader

    async def list_ledgers(
        self, scope_id: int, page_size: int, page_token: str, all_scopes: bool = False
    ) -> tuple[list[common_pb2.LedgerMetadata], str]:
        if not 0 <= scope_id <= U64_MAX:
            raise InvalidArgument(f"scope {scope_id} is not an unsigned 64-bit integer", Reason.INVALID_LEDGER_ID)
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        prefix = self.keys.ledgers if all_scopes else self.keys.scope_ledgers(scope_id)
        start_after = _decode_page_token(page_token, prefix) if page_token else None
        # One extra tells whether another page follows.
        items, _ = await self.store.list_prefix(prefix, start_after=start_after, limit=size + 1)
        page = items[:size]
        ledgers = []
        for kv in page:
            try:
                ledgers.append(_decode_ledger(kv.key.decode(errors="replace"), kv.value))
            except DataLoss as exc:  # one bad record must not hide every other ledger
                log.error("%s; left out of the listing", exc.message)
        next_token = _encode_page_token(page[-1].key) if len(items) > size else ""
        return ledgers, next_token


async def sealed(metadata: common_pb2.LedgerMetadata, keep_password: bool = False) -> common_pb2.LedgerMetadata:
    """A copy of the record as etcd gets it: the ledger password replaced by
    its secrets (ledger_secrets.py), so no metadata reader sees it."""
    record = common_pb2.LedgerMetadata()
    record.CopyFrom(metadata)
    if needs_sealing(record, keep_password):
        if record.password:  # a salted slow hash: off the event loop
            await asyncio.to_thread(functools.partial(seal, record, keep_password=keep_password))
        else:
            seal(record, keep_password=keep_password)
    return record


def validate_metadata(metadata: common_pb2.LedgerMetadata) -> None:
    """A record the registry will store: sound quorums, a known state, and
    ensembles of E valid, distinct BookieIds in increasing entry order."""
    validate_quorum(metadata.ensemble_size, metadata.write_quorum_size, metadata.ack_quorum_size)
    if metadata.state not in (
        common_pb2.LEDGER_STATE_OPEN,
        common_pb2.LEDGER_STATE_IN_RECOVERY,
        common_pb2.LEDGER_STATE_CLOSED,
    ):
        raise InvalidArgument(f"ledger state {metadata.state} is not OPEN, IN_RECOVERY or CLOSED")
    previous_first = -1
    for ensemble in metadata.ensembles:
        if ensemble.first_entry_id < 0 or ensemble.first_entry_id < previous_first:
            raise InvalidArgument(f"ensemble starting at entry {ensemble.first_entry_id} is out of order or negative")
        previous_first = ensemble.first_entry_id
        if len(ensemble.bookie_ids) != metadata.ensemble_size:
            raise InvalidArgument(
                f"ensemble starting at entry {ensemble.first_entry_id} has {len(ensemble.bookie_ids)} "
                f"bookies; the ensemble size is {metadata.ensemble_size}",
                Reason.INVALID_QUORUM,
            )
        for bookie_id in ensemble.bookie_ids:
            validate_bookie_id(bookie_id)
        if len(set(ensemble.bookie_ids)) != len(ensemble.bookie_ids):
            raise InvalidArgument(f"ensemble starting at entry {ensemble.first_entry_id} repeats a bookie")


def create_fingerprint(
    mode: IdMode, metadata: common_pb2.LedgerMetadata, ledger_id: LedgerId | None, scope_id: int
) -> str:
    """What a CreateLedger request_id stands for: how the id is chosen and the
    record's parameters, without what each attempt picks afresh (the
    ensemble, the creation time) or the registry fills in."""
    parameters = common_pb2.LedgerMetadata()
    parameters.CopyFrom(metadata)
    for field in ("ledger_id", "ensembles", "create_time", "create_request_id"):
        parameters.ClearField(field)
    choice = {
        IdMode.EXACT: ledger_id.qualified_name if ledger_id is not None else "",
        IdMode.SCOPED: str(scope_id),
    }.get(mode, "")
    digest = hashlib.sha256(f"{mode.value}/{choice}/".encode())
    digest.update(parameters.SerializeToString(deterministic=True))
    return digest.hexdigest()


def _request_record(ledger_id: LedgerId, fingerprint: str) -> bytes:
    return json.dumps({"ledger": ledger_id.qualified_name, "fingerprint": fingerprint}).encode()


def _parse_request_record(value: bytes) -> tuple[str, str]:
    try:
        record = json.loads(value)
        return str(record["ledger"]), str(record["fingerprint"])
    except (ValueError, KeyError, TypeError):
        raise DataLoss("a create-requests record is corrupt: it does not parse") from None


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


def ledger_events(keys: Keys, batch: WatchBatch) -> list[registry_pb2.WatchLedgerMetadataResponse]:
    """PUT and DELETED events for one batch of etcd events under ledgers/. A
    record that does not parse is sent as a PUT without metadata (the watcher
    forgets it); a key that names no ledger is skipped."""
    out = []
    for event in batch.events:
        name = event.key[len(keys.ledgers) :].decode(errors="replace")
        try:
            ledger_id = LedgerId.parse(name)
        except InvalidArgument:
            log.error("ledger watch: key %r names no ledger; skipped", event.key)
            continue
        response = registry_pb2.WatchLedgerMetadataResponse(
            type=registry_pb2.LEDGER_METADATA_EVENT_TYPE_DELETED, revision=event.version
        )
        response.ledger_id.scope_id, response.ledger_id.ledger_id = ledger_id.scope_id, ledger_id.ledger_id
        if event.value is not None:
            response.type = registry_pb2.LEDGER_METADATA_EVENT_TYPE_PUT
            try:
                response.metadata.CopyFrom(_decode_ledger(ledger_id, event.value))
            except DataLoss as exc:
                log.error("ledger watch: %s; sent without metadata", exc.message)
        out.append(response)
    return out


async def _drain(source: AsyncIterator[WatchBatch], sink: asyncio.Queue[WatchBatch | BaseException]) -> None:
    """Copy a watch into a queue, ending with the exception that ended it, so
    the reader can wait on the queue with a timeout (cancelling a wait on the
    watch itself would close it)."""
    try:
        async for batch in source:
            await sink.put(batch)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # handed over to the reader, which raises it
        await sink.put(exc)
    else:
        await sink.put(Unavailable("etcd ended the ledger watch", Reason.METADATA_STORE_UNAVAILABLE))


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


def _encode_page_token(last_key: bytes) -> str:
    return base64.urlsafe_b64encode(last_key).decode()


def _decode_page_token(token: str, prefix: bytes) -> bytes:
    try:
        key = base64.urlsafe_b64decode(token.encode())
    except (ValueError, TypeError):
        key = b""
    if not key.startswith(prefix):
        raise InvalidArgument("page_token is malformed or belongs to another listing")
    return key


def _decode_ledger(ledger: object, value: bytes) -> common_pb2.LedgerMetadata:
    """A stored metadata record, or DataLoss naming the ledger when it does not parse."""
    try:
        return common_pb2.LedgerMetadata.FromString(value)
    except DecodeError:
        raise DataLoss(f"metadata corrupt (ledger {ledger}): the stored record does not parse") from None
