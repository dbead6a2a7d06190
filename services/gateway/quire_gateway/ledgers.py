"""The gateway's ledger operations: create, open, append, read, close,
delete, list. Domain code: no grpc here; requests arrive as plain values."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass

from google.protobuf import timestamp_pb2

from quire.common.v1 import common_pb2
from quire.placement.v1 import placement_pb2
from quire.registry.v1 import registry_pb2
from quire_api.backoff import Backoff
from quire_api.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    QuireError,
    Reason,
)
from quire_api.ids import LedgerId, ledger_id_to_proto, validate_request_id
from quire_common.entry import DigestType
from quire_common.ledger_secrets import password_matches, slow_to_check, without_secrets
from quire_common.quorum_sizes import validate_quorum
from quire_common.telemetry import tracer, tracing_enabled
from quire_gateway import metrics
from quire_gateway.call_batches import CallGatherer
from quire_gateway.entry_cache import EntryCache, incarnation
from quire_gateway.metadata_cache import LedgerMetadataCache
from quire_gateway.reads import CHUNK_ENTRIES, EntryReader, ReadEntry, ReadSettings
from quire_gateway.recovery import Recovery, RecoverySettings, read_last_add_confirmed
from quire_gateway.remote import Remote
from quire_gateway.repairs import mark_for_repair
from quire_gateway.sessions import GatewaySession
from quire_gateway.write.explicit_lac import ExplicitLacs
from quire_gateway.write.handle import WriteHandle, WriteSettings
from quire_gateway.write.quarantine import Quarantine, choose_avoiding

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

DEFAULT_ENSEMBLE, DEFAULT_WRITE_QUORUM, DEFAULT_ACK_QUORUM = 3, 2, 2
METADATA_FORMAT_VERSION = 1
READER_LACS_KEPT = 100_000
# Creates sent in one batch: the most one CreateLedgerMetadataBatch takes (registry.proto; etcd
# caps a transaction's operations at 128 by default and each create writes two keys).
CREATES_PER_BATCH = 50
# A confirmed read past the LAC this gateway remembers asks the bookies again
# when what it remembers is older than this: with several gateways the writer
# is usually elsewhere, and a client that appends through one connection and
# reads through another expects to see its entries. Younger, the answer stands
# (OUT_OF_RANGE at once), so a reader polling past the end costs no bookie calls.
READER_LAC_MAX_AGE_SECONDS = 1.0


@dataclass(frozen=True)
class CreateSpec:
    """What CreateLedger asks for; zeros mean defaults."""

    ensemble_size: int = 0
    write_quorum_size: int = 0
    ack_quorum_size: int = 0
    digest_type: int = 0
    password: bytes = b""
    custom_metadata: dict[str, str] | None = None
    exact_id: LedgerId | None = None
    scope_id: int | None = None
    legacy: bool = False
    request_id: str = ""  # idempotency key: a retried create gets the ledger the first attempt made


def public_metadata(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata:
    """A copy without the password or its secrets, for anything returned to clients."""
    copy = without_secrets(metadata)
    # Both forms of the id, for clients that cannot hold 64-bit integers (common.proto).
    copy.ledger_id.qualified_name = LedgerId(copy.ledger_id.scope_id, copy.ledger_id.ledger_id).qualified_name
    return copy


def check_range(first: int, last: int, *, confirmed: bool) -> None:
    """The parameter rules of ReadEntries and ReadUnconfirmedEntries; last =
    -1 means "up to the LAC", which only a confirmed read can ask for."""
    if first < 0:
        raise InvalidArgument(f"first_entry_id {first} is negative")
    if last == -1:
        if not confirmed:
            raise InvalidArgument("an unconfirmed read needs an explicit last_entry_id")
        return
    if last < -1:
        raise InvalidArgument(f"last_entry_id {last} is invalid (use -1 for 'up to the LAC')")
    if first > last:
        raise InvalidArgument(f"first_entry_id {first} is after last_entry_id {last}")


def confirmed_by_ack(acknowledged: int, lac: int) -> int:
    """The highest entry an acknowledgement shows confirmed: entries are
    acknowledged in order, each once the ack quorum holds it and every
    entry before it, so the acknowledged entry itself is confirmed even
    when the LAC the acknowledgement carries trails it."""
    return max(acknowledged, lac)


class LedgerManager:
    def __init__(
        self,
        remote: Remote,
        settings: WriteSettings | None = None,
        recovery_settings: RecoverySettings | None = None,
        read_settings: ReadSettings | None = None,
        metadata_cache: LedgerMetadataCache | None = None,
        entry_cache: EntryCache | None = None,
        session: GatewaySession | None = None,
        owners_lac: Callable[[common_pb2.LedgerOwner, LedgerId], Awaitable[int]] | None = None,
    ) -> None:
        self.remote = remote
        # This gateway's registry session: the owner recorded in the ledgers it
        # creates. None: no owners (each ledger written where it was created).
        self.session = session
        # Asks the gateway that writes a ledger for its LAC (the gateway mesh); None: never asked.
        self.owners_lac = owners_lac
        # Recently confirmed entries: reads of fresh entries need no bookie. None: off.
        self.entry_cache = entry_cache
        # Metadata for reads, tails, opens and GetLedgerMetadata; None: always the registry.
        self.metadata_cache = metadata_cache
        self.settings = settings or WriteSettings()
        self.recovery_settings = recovery_settings or RecoverySettings()
        self.read_settings = read_settings or ReadSettings()
        self.handles: dict[LedgerId, WriteHandle] = {}
        self.quarantine = Quarantine(self.settings.bookie_quarantine_seconds)
        # The remote's calls are looked up when first needed (tests give fakes of only what they use).
        self.explicit_lacs = ExplicitLacs(
            self.settings.explicit_lac_seconds,
            lambda *write: self.remote.submit_last_add_confirmed(*write),
        )
        # LACs readers learned from the bookies, per ledger not written here (LRU-bounded).
        # (LAC, when it was read from the bookies), by ledger and incarnation.
        self._reader_lacs: OrderedDict[tuple[LedgerId, int], tuple[int, float]] = OrderedDict()
        self._background: set[asyncio.Task[None]] = set()
        # Concurrent creates share one placement call and one registry call (call_batches.py).
        self._ensembles: CallGatherer[placement_pb2.NewEnsembleRequest, list[str]] = CallGatherer(
            lambda asks: self.remote.new_ensembles(asks), CREATES_PER_BATCH, "choosing ensembles"
        )
        self._creates: CallGatherer[registry_pb2.CreateLedgerMetadataRequest, tuple[common_pb2.LedgerMetadata, int]] = (
            CallGatherer(
                lambda creates: self.remote.create_ledgers_metadata(creates),
                CREATES_PER_BATCH,
                "creating ledger metadata",
            )
        )

    async def create(self, spec: CreateSpec) -> common_pb2.LedgerMetadata:
        ensemble_size = spec.ensemble_size or DEFAULT_ENSEMBLE
        write_quorum = spec.write_quorum_size or min(DEFAULT_WRITE_QUORUM, ensemble_size)
        ack_quorum = spec.ack_quorum_size or min(DEFAULT_ACK_QUORUM, write_quorum)
        validate_quorum(ensemble_size, write_quorum, ack_quorum)
        digest_type = spec.digest_type or DigestType.CRC32C
        if digest_type not in DigestType.__members__.values():
            raise InvalidArgument(f"unknown digest type {digest_type}")
        custom_metadata = dict(spec.custom_metadata or {})
        if spec.request_id:
            validate_request_id(spec.request_id)

        def choose(exclude: list[str]) -> Awaitable[list[str]]:
            return self._ensembles.submit(
                placement_pb2.NewEnsembleRequest(
                    ensemble_size=ensemble_size,
                    write_quorum_size=write_quorum,
                    ack_quorum_size=ack_quorum,
                    exclude_bookie_ids=exclude,
                    custom_metadata=custom_metadata,
                )
            )

        owner = await self.session.current_owner() if self.session is not None else None
        bookies = await choose_avoiding(self.quarantine.members(), choose, "choosing an ensemble")
        created = timestamp_pb2.Timestamp()
        created.GetCurrentTime()
        metadata = common_pb2.LedgerMetadata(
            format_version=METADATA_FORMAT_VERSION,
            ensemble_size=ensemble_size,
            write_quorum_size=write_quorum,
            ack_quorum_size=ack_quorum,
            state=common_pb2.LEDGER_STATE_OPEN,
            last_entry_id=-1,
            length=0,
            digest_type=digest_type,
            password=spec.password,
            ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=bookies)],
            custom_metadata=spec.custom_metadata or {},
            create_time=created,
            owner=owner,
        )
        request = registry_pb2.CreateLedgerMetadataRequest(metadata=metadata, request_id=spec.request_id)
        if spec.exact_id is not None:
            request.ledger_id.CopyFrom(ledger_id_to_proto(spec.exact_id))
        elif spec.scope_id is not None:
            request.scope_id = spec.scope_id
        elif spec.legacy:
            request.legacy = True
        stored, version = await self._creates.submit(request)
        ledger_id = LedgerId(stored.ledger_id.scope_id, stored.ledger_id.ledger_id)
        repeated = bool(spec.request_id) and ledger_id in self.handles  # this gateway made it: keep its handle
        if not repeated:
            self.handles[ledger_id] = WriteHandle(
                self.remote,
                ledger_id,
                stored,
                version,
                self.settings,
                self.quarantine,
                self.entry_cache,
                self.explicit_lacs,
            )
        return public_metadata(stored)

    async def metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        """The ledger's metadata and version, from the metadata cache when
        there is one (metadata_cache.py says when it is trusted). Writers
        compare-and-swap against what they read, and re-read from the registry
        on a conflict, so a cached version costs them at most one retry. The
        object is shared: copy it before changing it."""
        if self.metadata_cache is not None:
            return await self.metadata_cache.get(ledger_id)
        return await self.remote.get_ledger_metadata(ledger_id)

    async def open(self, ledger_id: LedgerId, password: bytes, recovery: bool) -> tuple[common_pb2.LedgerMetadata, int]:
        """Without recovery: the metadata and the LAC, changing nothing. With
        recovery: fence, recover and close the ledger (recovery.py) and return
        its agreed end. The password is checked first, so a wrong one fences
        nothing."""
        metadata, version = await self.metadata(ledger_id)
        # A salted slow hash is checked off the event loop; the empty password's is not slow.
        if slow_to_check(metadata):
            matches = await asyncio.to_thread(password_matches, metadata, password)
        else:
            matches = password_matches(metadata, password)
        if not matches:
            raise PermissionDenied(f"wrong password for ledger {ledger_id}", Reason.WRONG_PASSWORD)
        if recovery:
            closed = await Recovery(self.remote, ledger_id, metadata, version, self.recovery_settings).run()
            return public_metadata(closed), closed.last_entry_id
        return public_metadata(metadata), await self.last_add_confirmed(ledger_id, metadata)

    async def route_write(
        self, ledger_id: LedgerId, *, forwarded: bool, closing: bool = False
    ) -> common_pb2.LedgerOwner | None:
        """Where a write (append, add, close) of `ledger_id` is done: None
        means here (this gateway holds its write handle, or, for a close, the
        ledger is already closed); otherwise the owner to forward it to, whose
        session lives. A call that was itself forwarded is never forwarded
        again: a gateway that is not the owner (any more) refuses it. A ledger
        whose owner's session has ended, or was a previous process of this
        gateway's name, is recovered and closed here, and the write fails
        LEDGER_OWNER_GONE."""
        if ledger_id in self.handles:
            return None
        metadata, version = await self.metadata(ledger_id)  # NOT_FOUND if it does not exist
        if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
            if closing:
                return None
            raise FailedPrecondition(f"ledger {ledger_id} is closed", Reason.LEDGER_CLOSED)
        owner = metadata.owner
        if self.session is not None and self.session.is_a_previous_process(owner):
            # Written by a previous process of this gateway's name: dead, whatever the registry says
            # yet (even when relayed here by a gateway that still takes that session for alive).
            await self._owner_gone(ledger_id, metadata, version)
        here = f"gateway {self.session.name}" if self.session is not None else "this gateway"
        if forwarded or not owner.gateway or self.session is None or self.session.is_me(owner):
            writer = f"gateway {owner.gateway} at {owner.address}" if owner.gateway else "the gateway that created it"
            raise FailedPrecondition(
                f"ledger {ledger_id} is not open for writing on {here}; it is written by {writer}",
                Reason.LEDGER_NOT_WRITABLE_HERE,
                owner=owner.gateway,
                owner_address=owner.address,
            )
        if await self.session.alive(owner):
            return owner
        await self._owner_gone(ledger_id, metadata, version)
        raise AssertionError("unreachable")  # _owner_gone always raises

    async def _owner_gone(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, version: int) -> None:
        """The owner's session has ended, so nobody will write this ledger
        again: recover it as BookKeeper does (fence, agree on the end, close;
        idempotent, one close wins the metadata CAS) and say where it ended.
        Not a takeover: the fence is permanent, so the ledger stays closed."""
        owner = metadata.owner
        log.warning("ledger %s: its writer gateway %s (session %x) has ended; recovering it",
                    ledger_id, owner.gateway, owner.session_id)  # fmt: skip
        closed = await Recovery(self.remote, ledger_id, metadata, version, self.recovery_settings).run()
        raise FailedPrecondition(
            f"ledger {ledger_id}: its writer gateway {owner.gateway} has ended; the ledger is closed at entry "
            f"{closed.last_entry_id}; create a new ledger to go on writing",
            Reason.LEDGER_OWNER_GONE,
            last_entry_id=str(closed.last_entry_id),
            owner=owner.gateway,
        )

    def owner_here(self, ledger_id: LedgerId) -> common_pb2.LedgerOwner | None:
        """The owner recorded in the metadata of a ledger written here."""
        handle = self.handles.get(ledger_id)
        return handle.metadata.owner if handle is not None and handle.metadata.HasField("owner") else None

    async def append(
        self, ledger_id: LedgerId, payloads: list[bytes], expected_entry_id: int | None = None
    ) -> list[asyncio.Future[int]]:
        """Entries of a ledger written here (route_write said so)."""
        if not payloads:
            raise InvalidArgument("no entries to append")
        handle = self.handles.get(ledger_id)
        if handle is None:
            await self.route_write(ledger_id, forwarded=True)  # raises: closed, or not written here
            raise FailedPrecondition(
                f"ledger {ledger_id} is not open for writing here", Reason.LEDGER_NOT_WRITABLE_HERE
            )
        return await handle.submit(payloads, expected_entry_id)

    async def add(self, ledger_id: LedgerId, payload: bytes, expected_entry_id: int | None = None) -> tuple[int, int]:
        (future,) = await self.append(ledger_id, [payload], expected_entry_id)
        if tracing_enabled():
            attributes = {"quire.ledger": str(ledger_id)}
            with _tracer.start_as_current_span("quire.gateway.quorum_wait", attributes=attributes):
                entry_id = await future
        else:
            entry_id = await future
        return entry_id, self.handles[ledger_id].last_add_confirmed

    async def last_add_confirmed(
        self,
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata | None = None,
        *,
        refresh: bool = True,
        max_age_seconds: float | None = None,
    ) -> int:
        """The LAC readers get: a closed ledger's last entry; the write
        handle's LAC if this gateway writes the ledger; otherwise the LAC read
        from the bookies (coverage rule), remembered as the readers' LAC.
        Without `refresh` the remembered value is used as it stands (the
        bookies are asked only if there is none yet, or it is older than
        `max_age_seconds`), so a confirmed read is bounded by what readers
        last learned, as a BookKeeper reader is."""
        if metadata is None:
            metadata, _ = await self.metadata(ledger_id)
        settled = self._settled_lac(ledger_id, metadata)
        if settled is not None:
            return settled
        # Keyed by creation time too: a ledger deleted and created again under the same id starts afresh.
        key = (ledger_id, incarnation(metadata))
        known = self._reader_lacs.get(key)
        now = time.monotonic()
        if known is not None and not refresh and (max_age_seconds is None or now - known[1] <= max_age_seconds):
            self._reader_lacs.move_to_end(key)
            return known[0]
        lac = await read_last_add_confirmed(
            self.remote, ledger_id, metadata, self.recovery_settings.bookie_timeout_seconds
        )
        return self._learn_lac(key, lac)

    def _learn_lac(self, key: tuple[LedgerId, int], lac: int) -> int:
        """Remember `lac` as the readers' LAC of a ledger's incarnation (a LAC
        never moves back); returns the LAC now known."""
        known = self._reader_lacs.get(key)
        lac = max(lac, known[0] if known is not None else -1)
        self._reader_lacs[key] = (lac, time.monotonic())
        self._reader_lacs.move_to_end(key)
        while len(self._reader_lacs) > READER_LACS_KEPT:
            self._reader_lacs.popitem(last=False)
        return lac

    async def relayed_acks(self, ledger_id: LedgerId) -> Callable[[int, int], None]:
        """For a write relayed to the ledger's owner: what to call with the
        last entry id and the LAC of each acknowledgement relayed back, so
        that a confirmed read here sees every entry this gateway has
        acknowledged (read-your-writes)."""
        if not self.read_settings.read_your_writes:
            return lambda acknowledged, lac: None
        metadata, _ = await self.metadata(ledger_id)
        key = (ledger_id, incarnation(metadata))

        def learned(acknowledged: int, lac: int) -> None:
            confirmed = confirmed_by_ack(acknowledged, lac)
            if confirmed >= 0:
                self._learn_lac(key, confirmed)

        return learned

    async def _owners_lac(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, lac: int) -> int:
        """The LAC of an open ledger written by another gateway, from that
        gateway (one hop, as writes are relayed): what it acknowledged may not
        be on the bookies' headers yet. Only `lac` when there is no other owner
        to ask or it does not answer within owner_lac_timeout_seconds."""
        owner = metadata.owner
        if self.owners_lac is None or not self.read_settings.read_your_writes or not owner.gateway:
            return lac
        if self.session is None or self.session.is_me(owner) or self.session.is_a_previous_process(owner):
            return lac  # nobody else to ask: written here, or by a previous process of this name
        deadline = self.read_settings.owner_lac_timeout_seconds
        try:
            owners = await asyncio.wait_for(self.owners_lac(owner, ledger_id), deadline)
        except (QuireError, TimeoutError) as exc:  # the bookies' LAC stands: a reader elsewhere may lag the writer
            why = exc if isinstance(exc, QuireError) else f"no answer within {deadline} s"
            log.info("ledger %s: its owner %s did not say its LAC: %s", ledger_id, owner.gateway, why)
            return lac
        return self._learn_lac((ledger_id, incarnation(metadata)), owners)

    async def read(
        self, ledger_id: LedgerId, first: int, last: int, *, confirmed: bool
    ) -> AsyncGenerator[list[ReadEntry], None]:
        """Entries first..last. Parameters are checked first (INVALID_ARGUMENT),
        then, for confirmed reads, the LAC as readers know it (beyond it:
        OUT_OF_RANGE; last = -1 means up to it). A read that reaches past the
        LAC this gateway knows first asks the registry whether the ledger was
        closed, and the bookies for its LAC when what this gateway remembers
        is older than READER_LAC_MAX_AGE_SECONDS. OpenLedger, ReadLastAddConfirmed and tails
        refresh that LAC. Unconfirmed reads (BP-5) go past the LAC, fail
        NOT_FOUND where no replica has an entry, and never move the LAC."""
        check_range(first, last, confirmed=confirmed)
        metadata, _ = await self.metadata(ledger_id)
        if confirmed:
            metadata, lac = await self._confirmed_lac(ledger_id, metadata, first, last)
            if last == -1:
                if first == lac + 1:
                    return  # nothing confirmed at or past `first` yet
                last = lac
            confirmed_up_to = lac
        else:
            confirmed_up_to = self._known_lac(ledger_id, metadata)
        async for chunk in self._read_replicas(ledger_id, metadata, first, last, confirmed_up_to):
            yield chunk

    async def _confirmed_lac(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, first: int, last: int
    ) -> tuple[common_pb2.LedgerMetadata, int]:
        """The metadata and LAC a confirmed read of first..last (last -1: up
        to the LAC) goes by, once the registry, the bookies and the owner
        have been asked as `read` says; OUT_OF_RANGE when the range reaches
        past that LAC (a read from LAC+1 up to it is not past it: it is empty)."""
        lac = await self.last_add_confirmed(ledger_id, metadata, refresh=False)
        if (last == -1 or last > lac) and metadata.state != common_pb2.LEDGER_STATE_CLOSED:
            # Past what this gateway knows: the ledger may have been closed through another
            # gateway since its metadata cache last heard (the registry has the exact end),
            # or grown there (the bookies know, once what is remembered is not fresh).
            metadata, _ = await self.remote.get_ledger_metadata(ledger_id)
            lac = await self.last_add_confirmed(
                ledger_id, metadata, refresh=False, max_age_seconds=READER_LAC_MAX_AGE_SECONDS
            )
            if (last == -1 or last > lac) and metadata.state != common_pb2.LEDGER_STATE_CLOSED:
                lac = await self._owners_lac(ledger_id, metadata, lac)
        if last == -1 and first == lac + 1:
            return metadata, lac
        if max(first, last) > lac:
            raise OutOfRange(
                f"ledger {ledger_id}: entry {max(first, last)} is beyond the last-add-confirmed {lac}",
                Reason.READ_BEYOND_LAC,
                last_add_confirmed=str(lac),
            )
        return metadata, lac

    async def read_entry(self, ledger_id: LedgerId, entry_id: int) -> ReadEntry:
        """One confirmed entry, by every rule of read() with first = last =
        entry_id (the LAC, OUT_OF_RANGE past it, the registry and bookies
        asked as there, digests, the entry cache). An entry in the cache is
        answered from it directly: the common case of a blob or random read
        costs no reader and no stream of chunks."""
        if entry_id < 0:
            raise InvalidArgument(f"entry_id {entry_id} is negative")
        metadata, _ = await self.metadata(ledger_id)
        metadata, lac = await self._confirmed_lac(ledger_id, metadata, entry_id, entry_id)
        cache = self.entry_cache if self.read_settings.verify_digests else None
        if cache is not None and cache.enabled:
            cached = cache.get(ledger_id, incarnation(metadata), entry_id)
            if cached is not None:
                return ReadEntry(entry_id, cached.payload, cached.length)
        async with aclosing(self._read_replicas(ledger_id, metadata, entry_id, entry_id, lac)) as chunks:
            async for chunk in chunks:
                if chunk:
                    return chunk[0]
        raise AssertionError("unreachable")  # a read of one entry at or below the LAC yields it or raises

    async def tail(self, ledger_id: LedgerId, first: int) -> AsyncIterator[list[ReadEntry]]:
        """Confirmed entries from `first` on, as the LAC advances; ends once
        the ledger is closed and its last entry delivered. The LAC comes from
        the bookies, except once: the first time the tail catches up with an
        open ledger written elsewhere it asks the owner (read-your-writes)."""
        check_range(first, -1, confirmed=True)
        next_entry = first
        owner_asked = False
        while True:
            metadata, _ = await self.metadata(ledger_id)
            lac = await self.last_add_confirmed(ledger_id, metadata)
            if next_entry > lac and not owner_asked and metadata.state != common_pb2.LEDGER_STATE_CLOSED:
                # Caught up with what the bookies say: once, ask the owner, so that every entry
                # acknowledged before this tail started is delivered without waiting for the next.
                owner_asked = True
                lac = await self._owners_lac(ledger_id, metadata, lac)
            if next_entry <= lac:
                async for chunk in self._read_replicas(ledger_id, metadata, next_entry, lac, lac):
                    yield chunk
                next_entry = lac + 1
                continue
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return
            await self.wait_for_lac(ledger_id, next_entry - 1)

    def _settled_lac(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata) -> int | None:
        """The LAC when this gateway knows it for sure: a closed ledger's last
        entry, or its own write handle's LAC (the writer knows best); else None."""
        if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
            return metadata.last_entry_id
        handle = self.handles.get(ledger_id)
        if handle is not None and not handle.failed:
            return handle.last_add_confirmed
        return None

    def _known_lac(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata) -> int:
        """The highest entry known to be confirmed, without asking anyone:
        what may go into the entry cache from an unconfirmed read."""
        settled = self._settled_lac(ledger_id, metadata)
        if settled is not None:
            return settled
        known = self._reader_lacs.get((ledger_id, incarnation(metadata)))
        return known[0] if known is not None else -1

    async def _read_replicas(
        self,
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata,
        first: int,
        last: int,
        confirmed_up_to: int,
    ) -> AsyncGenerator[list[ReadEntry], None]:
        """Entries first..last in order: runs found in the entry cache as they
        are, the runs between them from the bookies. Entries read from the
        bookies at or below `confirmed_up_to` are kept in the cache."""
        reader: EntryReader | None = None  # made on the first miss: a read served from the cache needs none
        # Digests unchecked (a test-only positive control): nothing read may be cached.
        cache = self.entry_cache if self.read_settings.verify_digests else None
        life = incarnation(metadata)
        try:
            if cache is None or not cache.enabled:
                reader = EntryReader(self.remote, ledger_id, metadata, self.read_settings)
                async for chunk in reader.read(first, last):
                    yield chunk
                return
            next_id = first
            while next_id <= last:
                hits = cache.run(ledger_id, life, next_id, min(last, next_id + CHUNK_ENTRIES - 1))
                if hits:
                    yield [ReadEntry(entry_id, cached.payload, cached.length) for entry_id, cached in hits]
                    next_id = hits[-1][0] + 1
                    continue
                miss_end = next_id
                while (
                    miss_end < last
                    and miss_end - next_id < CHUNK_ENTRIES - 1
                    and not cache.contains(ledger_id, life, miss_end + 1)
                ):
                    miss_end += 1
                reader = reader or EntryReader(self.remote, ledger_id, metadata, self.read_settings)
                async for chunk in reader.read(next_id, miss_end):
                    for entry in chunk:
                        if entry.entry_id <= confirmed_up_to:
                            cache.put(ledger_id, life, entry.entry_id, entry.payload, entry.length)
                    yield chunk
                next_id = miss_end + 1
        finally:
            if reader is not None:
                self._flag_damaged(ledger_id, reader)

    def _flag_damaged(self, ledger_id: LedgerId, reader: EntryReader) -> None:
        """Copies a read found damaged are marked in the ledger's metadata, in
        the background, for the auditor to repair (once the ledger is closed)."""
        if reader.damaged:
            task = asyncio.create_task(self._mark_for_repair(ledger_id, dict(reader.damaged)))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _mark_for_repair(self, ledger_id: LedgerId, damaged: dict[str, tuple[int, int]]) -> None:
        try:
            changed = await mark_for_repair(self.remote, ledger_id, damaged)
        except QuireError as exc:
            log.warning("ledger %s: flagging damaged copies %s failed: %s", ledger_id, damaged, exc)
            return
        if changed:
            metrics.repair_flags.add(changed)
            log.warning("ledger %s: damaged copies flagged for repair: %s", ledger_id, damaged)

    async def wait_for_lac(self, ledger_id: LedgerId, known_lac: int) -> None:
        """Return once the LAC may have moved past `known_lac` (or the ledger
        closed), or after a while anyway. Today a poll of the bookies with a
        short backoff; a bookie-side long-poll replaces this one method."""
        polls = Backoff(first_seconds=0.01, longest_seconds=0.2, within_seconds=self.read_settings.tail_wait_seconds)
        for pause in polls.pauses():
            await asyncio.sleep(pause)
            metadata, _ = await self.metadata(ledger_id)
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return
            if await self.last_add_confirmed(ledger_id, metadata) > known_lac:
                return

    async def close(self, ledger_id: LedgerId) -> common_pb2.LedgerMetadata:
        handle = self.handles.get(ledger_id)
        if handle is None:
            metadata, _ = await self.metadata(ledger_id)
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return public_metadata(metadata)  # closing twice is fine
            raise FailedPrecondition(
                f"ledger {ledger_id} is open on another writer; recover it to close it",
                Reason.LEDGER_NOT_WRITABLE_HERE,
            )
        try:
            metadata = await handle.close()
        finally:
            self.handles.pop(ledger_id, None)
        return public_metadata(metadata)

    async def delete(self, ledger_id: LedgerId) -> None:
        metadata, _ = await self.metadata(ledger_id)
        handle = self.handles.pop(ledger_id, None)
        if handle is not None:
            handle.abandon(NotFound(f"ledger {ledger_id} was deleted", Reason.LEDGER_NOT_FOUND))
        if self.entry_cache is not None:
            self.entry_cache.drop_ledger(ledger_id)
        await self.remote.delete_ledger_metadata(ledger_id)
        # Metadata is gone, so the data is garbage: remove it now where we can.
        bookies = sorted({b for ensemble in metadata.ensembles for b in ensemble.bookie_ids})
        results = await asyncio.gather(
            *(self.remote.delete_ledger_on_bookie(b, ledger_id) for b in bookies), return_exceptions=True
        )
        for bookie_id, result in zip(bookies, results, strict=True):
            if isinstance(result, QuireError):
                log.warning("ledger %s: data on bookie %s not deleted now: %s", ledger_id, bookie_id, result)
            elif isinstance(result, BaseException):
                raise result

    async def list(
        self, scope_id: int, page_size: int, page_token: str, all_scopes: bool = False
    ) -> tuple[list[common_pb2.LedgerMetadata], str]:
        ledgers, token = await self.remote.list_ledger_metadata(scope_id, page_size, page_token, all_scopes)
        return [public_metadata(m) for m in ledgers], token

    async def close_all(self) -> None:
        """On shutdown: close every ledger this gateway writes, so they end
        cleanly at their LAC."""
        for ledger_id in list(self.handles):
            try:
                await self.close(ledger_id)
            except QuireError as exc:
                log.warning("ledger %s not closed on shutdown: %s", ledger_id, exc)
        self.explicit_lacs.close()
        if self._background:  # repair flags still being recorded
            await asyncio.wait(self._background, timeout=5)
