"""Registry domain logic: bookie registrations, cookies and ledger metadata on
a MetadataStore. No grpc here; the servicer is a thin layer over this."""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from enum import Enum

from quire.common.v1 import common_pb2
from quire.registry.v1 import registry_pb2
from quire_common.errors import Aborted, AlreadyExists, InvalidArgument, NotFound, Reason
from quire_common.ids import (
    U64_MAX,
    LedgerId,
    new_scoped_ledger_id,
    new_uuid7_ledger_id,
    parse_host_port,
    validate_bookie_id,
)
from quire_common.quorum import validate_quorum
from quire_registry.keys import Keys
from quire_registry.store import Delete, MetadataStore, Put

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
_ID_ATTEMPTS = 16


class IdMode(Enum):
    FRESH = "fresh"  # a new 128-bit UUIDv7-shaped id
    SCOPED = "scoped"  # a new ledger id within a given scope
    EXACT = "exact"  # exactly the id given
    LEGACY = "legacy"  # scope 0, from the central 64-bit generator


@dataclass
class Registration:
    """A live bookie registration: the lease and where the record is stored."""

    bookie_id: str
    lease_id: int
    ttl_seconds: int
    read_only: bool
    info: common_pb2.BookieServiceInfo
    version: int


def resolve_service_info(bookie_id: str, info: common_pb2.BookieServiceInfo) -> common_pb2.BookieServiceInfo:
    """An empty record stands for one bookie-rpc endpoint at the host:port the
    BookieId spells (BP-38 legacy rule)."""
    if info.endpoints or info.properties:
        return info
    host_port = parse_host_port(bookie_id)
    if host_port is None:
        raise NotFound(
            f"bookie {bookie_id} registered no endpoints and its id is not host:port, so it cannot be resolved",
            Reason.BOOKIE_NOT_FOUND,
        )
    resolved = common_pb2.BookieServiceInfo()
    resolved.endpoints.add(id="rpc", host=host_port[0], port=host_port[1], protocol="bookie-rpc")
    return resolved


class Registry:
    def __init__(self, store: MetadataStore, cluster: str, default_ttl_seconds: int = 10) -> None:
        self.store = store
        self.keys = Keys(cluster)
        self.default_ttl_seconds = default_ttl_seconds

    # -- bookies ---------------------------------------------------------------

    def _bookie_key(self, bookie_id: str, read_only: bool) -> bytes:
        return self.keys.readonly_bookie(bookie_id) if read_only else self.keys.writable_bookie(bookie_id)

    async def register_bookie(
        self, bookie_id: str, read_only: bool, info: common_pb2.BookieServiceInfo, ttl_seconds: int
    ) -> Registration:
        validate_bookie_id(bookie_id)
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

    async def heartbeat(
        self, registration: Registration, read_only: bool, info: common_pb2.BookieServiceInfo
    ) -> Registration:
        """Refresh the lease; move the key if the read-only state changed, and
        rewrite it if the advertised record changed."""
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
        read_only = key.startswith(self.keys.readonly_bookies)
        prefix = self.keys.readonly_bookies if read_only else self.keys.writable_bookies
        return registry_pb2.BookieRecord(
            bookie_id=key[len(prefix) :].decode(),
            read_only=read_only,
            service_info=common_pb2.BookieServiceInfo.FromString(value),
            version=version,
        )

    async def list_bookies(self, state: int) -> tuple[list[registry_pb2.BookieRecord], int]:
        prefixes = {
            registry_pb2.BOOKIE_STATE_WRITABLE: [self.keys.writable_bookies],
            registry_pb2.BOOKIE_STATE_READ_ONLY: [self.keys.readonly_bookies],
        }.get(state, [self.keys.writable_bookies, self.keys.readonly_bookies])
        records, revision = [], 0
        for prefix in prefixes:
            items, revision = await self.store.list_prefix(prefix)
            records += [self._record(kv.key, kv.value, kv.version) for kv in items]
        records.sort(key=lambda r: r.bookie_id)
        return records, revision

    async def watch_bookies(self):  # type: ignore[no-untyped-def]
        """Yield (event type, record): first a snapshot of every bookie, then
        joins, leaves and changes as they happen."""
        records, revision = await self.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
        live = {r.bookie_id: r for r in records}
        for record in records:
            yield registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT, record
        async for events in self.store.watch_prefix(self.keys.bookies, revision + 1):
            for event in events:
                if event.value is None:
                    read_only = event.key.startswith(self.keys.readonly_bookies)
                    prefix = self.keys.readonly_bookies if read_only else self.keys.writable_bookies
                    bookie_id = event.key[len(prefix) :].decode()
                    # A move between states deletes one key and writes the other in
                    # one revision; only a delete with no matching put is a leave.
                    if not any(e.value is not None and e.key.endswith(b"/" + bookie_id.encode()) for e in events):
                        live.pop(bookie_id, None)
                        yield (
                            registry_pb2.BOOKIE_EVENT_TYPE_LEFT,
                            registry_pb2.BookieRecord(bookie_id=bookie_id),
                        )
                    continue
                record = self._record(event.key, event.value, event.version)
                kind = (
                    registry_pb2.BOOKIE_EVENT_TYPE_CHANGED
                    if record.bookie_id in live
                    else registry_pb2.BOOKIE_EVENT_TYPE_JOINED
                )
                live[record.bookie_id] = record
                yield kind, record

    async def get_bookie(self, bookie_id: str) -> registry_pb2.BookieRecord:
        validate_bookie_id(bookie_id)
        for key in (self.keys.writable_bookie(bookie_id), self.keys.readonly_bookie(bookie_id)):
            kv = await self.store.get(key)
            if kv is not None:
                record = self._record(kv.key, kv.value, kv.version)
                record.service_info.CopyFrom(resolve_service_info(bookie_id, record.service_info))
                return record
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
                raise AlreadyExists(f"bookie {bookie_id} already has a cookie", Reason.INVALID_ARGUMENT)
            return version
        version = await self.store.compare_and_swap(key, cookie.SerializeToString(), expected_version)
        if version is None:
            raise Aborted(f"cookie of bookie {bookie_id} changed since version {expected_version}")
        return version

    # -- ledgers ---------------------------------------------------------------

    async def create_ledger(
        self,
        mode: IdMode,
        metadata: common_pb2.LedgerMetadata,
        ledger_id: LedgerId | None = None,
        scope_id: int = 0,
    ) -> tuple[common_pb2.LedgerMetadata, int]:
        validate_quorum(metadata.ensemble_size, metadata.write_quorum_size, metadata.ack_quorum_size)
        for _ in range(_ID_ATTEMPTS):
            if mode is IdMode.EXACT:
                assert ledger_id is not None
                candidate = ledger_id
            elif mode is IdMode.SCOPED:
                candidate = new_scoped_ledger_id(scope_id)
            elif mode is IdMode.LEGACY:
                candidate = await self._next_legacy_id()
            else:
                candidate = new_uuid7_ledger_id()
            record = common_pb2.LedgerMetadata()
            record.CopyFrom(metadata)
            record.ledger_id.scope_id, record.ledger_id.ledger_id = candidate.scope_id, candidate.ledger_id
            version = await self.store.create(self.keys.ledger(candidate), record.SerializeToString())
            if version is not None:
                log.info("ledger %s created", candidate)
                return record, version
            if mode is IdMode.EXACT:
                raise AlreadyExists(f"ledger {candidate} already exists", Reason.LEDGER_EXISTS)
        raise Aborted(f"could not find a free ledger id in {_ID_ATTEMPTS} attempts")

    async def _next_legacy_id(self) -> LedgerId:
        """Take the next scope-0 id from the counter at idgen/legacy (CAS loop)."""
        key = self.keys.legacy_id_generator
        while True:
            kv = await self.store.get(key)
            if kv is None:
                if await self.store.create(key, b"1") is not None:
                    return LedgerId(0, 1)
                continue
            next_id = int(kv.value) + 1
            if next_id > U64_MAX >> 1:
                raise Aborted("the legacy 63-bit ledger id space is exhausted")
            if await self.store.compare_and_swap(key, str(next_id).encode(), kv.version) is not None:
                return LedgerId(0, next_id)

    async def get_ledger(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        kv = await self.store.get(self.keys.ledger(ledger_id))
        if kv is None:
            raise NotFound(f"ledger {ledger_id} does not exist", Reason.LEDGER_NOT_FOUND)
        return common_pb2.LedgerMetadata.FromString(kv.value), kv.version

    async def update_ledger(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        validate_quorum(metadata.ensemble_size, metadata.write_quorum_size, metadata.ack_quorum_size)
        record = common_pb2.LedgerMetadata()
        record.CopyFrom(metadata)
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
        key = self.keys.ledger(ledger_id)
        if await self.store.delete(key, expected_version):
            log.info("ledger %s metadata deleted", ledger_id)
            return
        if await self.store.get(key) is None:
            raise NotFound(f"ledger {ledger_id} does not exist", Reason.LEDGER_NOT_FOUND)
        raise Aborted(f"ledger {ledger_id} metadata changed since version {expected_version}")

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
        ledgers = [common_pb2.LedgerMetadata.FromString(kv.value) for kv in page]
        next_token = _encode_page_token(page[-1].key) if len(items) > size else ""
        return ledgers, next_token


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
