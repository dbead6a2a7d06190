"""Ledger metadata records on a MetadataStore: ids (fresh, scoped, exact,
legacy), creates with request ids, compare-and-swap, deletes, pages and the
watch. No grpc here."""

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

from quire_api.errors import (
    Aborted,
    AlreadyExists,
    DataLoss,
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
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2
from quire_registry.keys import Keys
from quire_registry.store import OPS_PER_TRANSACTION, Delete, MetadataStore, Put, WatchBatch, WatchCompacted

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# Ids alone are a few dozen bytes each: a page of ids can be ten times a page of records.
MAX_ID_PAGE_SIZE = 10_000
_ID_ATTEMPTS = 16
_LEGACY_ID_ATTEMPTS = 64  # concurrent legacy creators race for each number; one of them wins every round
# Creates sharing one transaction: each writes two keys (ledger, request_id) on two compares.
MAX_CREATES_PER_BATCH = OPS_PER_TRANSACTION // 2
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


class LedgerRecords:
    """Ledger metadata records and their ids: create (with id generation and
    request ids), read, compare-and-swap, delete, list and watch."""

    def __init__(
        self,
        store: MetadataStore,
        keys: Keys,
        recognise_request_ids: bool = True,
        keep_ledger_passwords: bool = False,
    ) -> None:
        self.store = store
        self.keys = keys
        # True only during an upgrade from a version that reads the plaintext password
        # (QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS); stored records then show it.
        self.keep_ledger_passwords = keep_ledger_passwords
        # False only as the fault suite's positive control (QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK):
        # a repeated CreateLedger request_id is then not looked up.
        self.recognise_request_ids = recognise_request_ids

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
                earlier = await self._created_by(order, prepared.fingerprint)
                if earlier is not None:
                    return earlier
            if order.mode is IdMode.EXACT:
                raise AlreadyExists(f"ledger {candidate} already exists", Reason.LEDGER_EXISTS)
            if order.mode is IdMode.LEGACY:
                await self._skip_taken_legacy_id(candidate, absent, versions)
        raise Aborted(f"could not find a free ledger id in {attempts} attempts")

    async def _created_by(self, order: CreateOrder, fingerprint: str) -> tuple[common_pb2.LedgerMetadata, int] | None:
        """The ledger an earlier create with this request_id made, or None
        when there was none; ALREADY_EXISTS when that create asked for
        something else."""
        if not self.recognise_request_ids:
            return None
        request_id = order.request_id
        kv = await self.store.get(self.keys.create_request(request_id))
        if kv is None:
            return None
        ledger_name, stored_fingerprint = _parse_request_record(kv.value)
        if not asks_the_same(order, fingerprint, stored_fingerprint):
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
                        async with asyncio.timeout(heartbeat):  # no task per batch, as wait_for would start
                            batch = await batches.get()
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

    async def list_ledger_ids(self, page_size: int, page_token: str) -> tuple[list[LedgerId], str]:
        """One page of every ledger's id, in id order, read from the keys
        alone (no record is read or parsed)."""
        size = min(page_size or MAX_ID_PAGE_SIZE, MAX_ID_PAGE_SIZE)
        prefix = self.keys.ledgers
        start_after = _decode_page_token(page_token, prefix) if page_token else None
        keys = await self.store.list_keys(prefix, start_after=start_after, limit=size + 1)
        page = keys[:size]
        ledger_ids = []
        for key in page:
            try:
                ledger_ids.append(LedgerId.parse(key[len(prefix) :].decode()))
            except (QuireError, UnicodeDecodeError):  # not a ledger's key: nothing to report
                log.error("key %r under the ledgers' prefix names no ledger; left out of the id listing", key)
        next_token = _encode_page_token(page[-1]) if len(keys) > size else ""
        return ledger_ids, next_token

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


# What each attempt at a create picks afresh or the registry fills in: the id, the ensemble, the
# creation time, the request id itself, and the owner, the gateway (and its session) that sends
# this attempt. A retry may come through another gateway, or after the gateway's session lapsed
# in a partition and was opened again: it is the same create.
# The owner joined them later: records written before hold fingerprints with it (asks_the_same).
_EARLIER_PICKED_AFRESH = ("ledger_id", "ensembles", "create_time", "create_request_id")
_PICKED_AFRESH = (*_EARLIER_PICKED_AFRESH, "owner")


def create_fingerprint(
    mode: IdMode,
    metadata: common_pb2.LedgerMetadata,
    ledger_id: LedgerId | None,
    scope_id: int,
    *,
    picked_afresh: tuple[str, ...] = _PICKED_AFRESH,
) -> str:
    """What a CreateLedger request_id stands for: how the id is chosen and the
    record's parameters, without what each attempt picks afresh."""
    parameters = common_pb2.LedgerMetadata()
    parameters.CopyFrom(metadata)
    for field in picked_afresh:
        parameters.ClearField(field)
    choice = {
        IdMode.EXACT: ledger_id.qualified_name if ledger_id is not None else "",
        IdMode.SCOPED: str(scope_id),
    }.get(mode, "")
    digest = hashlib.sha256(f"{mode.value}/{choice}/".encode())
    digest.update(parameters.SerializeToString(deterministic=True))
    return digest.hexdigest()


def asks_the_same(order: CreateOrder, fingerprint: str, stored_fingerprint: str) -> bool:
    """Whether a create-requests record of `stored_fingerprint` stands for
    `order`, whose fingerprint is `fingerprint`. A record written before the
    owner was left out of fingerprints still answers a retry that names the
    same owner; that older form is computed only when the record differs."""
    if stored_fingerprint == fingerprint:
        return True
    earlier = create_fingerprint(
        order.mode, order.metadata, order.ledger_id, order.scope_id, picked_afresh=_EARLIER_PICKED_AFRESH
    )
    return stored_fingerprint == earlier


def _request_record(ledger_id: LedgerId, fingerprint: str) -> bytes:
    return json.dumps({"ledger": ledger_id.qualified_name, "fingerprint": fingerprint}).encode()


def _parse_request_record(value: bytes) -> tuple[str, str]:
    try:
        record = json.loads(value)
        return str(record["ledger"]), str(record["fingerprint"])
    except (ValueError, KeyError, TypeError):
        raise DataLoss("a create-requests record is corrupt: it does not parse") from None


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
