"""The gateway's ledger operations: create, open, where a write goes and
append, close, delete, list; reads and tails are `reads`
(read/ledger_reads.py). Domain code: no grpc here; requests arrive as plain
values."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from google.protobuf import timestamp_pb2

from quire_api.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    QuireError,
    Reason,
    Unavailable,
)
from quire_api.ids import LedgerId, ledger_id_to_proto, validate_request_id
from quire_common.entry import DigestType
from quire_common.ledger_secrets import password_matches, slow_to_check, without_secrets
from quire_common.quorum_sizes import validate_quorum
from quire_common.telemetry import tracer, tracing_enabled
from quire_gateway.call_batches import CallGatherer
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.metadata_store import LedgerMetadataStore, RegistryMetadata
from quire_gateway.ownership.lease import GatewayLease
from quire_gateway.read.entry_cache import EntryCache, drop_ledger_entries
from quire_gateway.read.ledger_reads import LedgerReads
from quire_gateway.read.replicas import ReadSettings
from quire_gateway.recovery import Recovery, RecoverySettings
from quire_gateway.write.explicit_lac import ExplicitLacs
from quire_gateway.write.handle import WriteHandle, WriteSettings
from quire_gateway.write.quarantine import Quarantine, choose_avoiding
from quire_proto.common.v1 import common_pb2
from quire_proto.placement.v1 import placement_pb2
from quire_proto.registry.v1 import registry_pb2

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

DEFAULT_ENSEMBLE, DEFAULT_WRITE_QUORUM, DEFAULT_ACK_QUORUM = 3, 2, 2
METADATA_FORMAT_VERSION = 1
# Creates sent in one batch: the most one CreateLedgerMetadataBatch takes (registry.proto; etcd
# caps a transaction's operations at 128 by default and each create writes two keys).
CREATES_PER_BATCH = 50


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


class LedgerOperations:
    """What the servicer and the blob store ask of ledgers, one gateway's
    write handles held here; reads go through `reads`."""

    def __init__(
        self,
        remote: ClusterCalls,
        settings: WriteSettings | None = None,
        recovery_settings: RecoverySettings | None = None,
        read_settings: ReadSettings | None = None,
        metadata_store: LedgerMetadataStore | None = None,
        entry_cache: EntryCache | None = None,
        lease: GatewayLease | None = None,
        owners_lac: Callable[[common_pb2.LedgerOwner, LedgerId], Awaitable[int]] | None = None,
    ) -> None:
        self.remote = remote
        # This gateway's registry lease: the owner recorded in the ledgers it
        # creates. None: no owners (each ledger written where it was created).
        self.lease = lease
        # Recently confirmed entries: reads of fresh entries need no bookie. None: off.
        self.entry_cache = entry_cache
        # Every metadata read, change and delete goes through it: the metadata cache, or
        # (None) the registry each time.
        self.metadata_store = metadata_store or RegistryMetadata(remote)
        self.settings = settings or WriteSettings()
        self.recovery_settings = recovery_settings or RecoverySettings()
        self.handles: dict[LedgerId, WriteHandle] = {}
        self.quarantine = Quarantine(self.settings.bookie_quarantine_seconds)
        # The remote's calls are looked up when first needed (tests give fakes of only what they use).
        self.explicit_lacs = ExplicitLacs(
            self.settings.explicit_lac_seconds,
            lambda *write: self.remote.submit_last_add_confirmed(*write),
        )
        # The read side: reads, tails and the readers' LAC (read/ledger_reads.py).
        self.reads = LedgerReads(
            remote,
            self.metadata_store,
            self._writer_lac,
            read_settings or ReadSettings(),
            self.recovery_settings.bookie_timeout_seconds,
            entry_cache,
            lease,
            owners_lac,
        )
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

        owner = await self.lease.current_owner() if self.lease is not None else None
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
        # A create repeated with its request_id is given the ledger its first attempt made. This
        # gateway writes it only if that attempt named this gateway's session as its owner: made
        # through another gateway, or by a session of this one that has ended, the ledger's
        # writes go where its owner is (relayed, or recovered when that owner is gone), never to
        # a second writer. Made here already, it keeps the handle it has.
        if ledger_id not in self.handles and stored.owner == metadata.owner:
            self.handles[ledger_id] = WriteHandle(
                self.remote,
                self.metadata_store,
                ledger_id,
                stored,
                version,
                self.settings,
                self.quarantine,
                self.entry_cache,
                self.explicit_lacs,
                on_ended=self._forget_ended,
            )
        return public_metadata(stored)

    def _forget_ended(self, handle: WriteHandle) -> None:
        """A handle whose ledger was fenced, closed or deleted elsewhere, or
        that closed it (asked to, or after failing), writes nothing more:
        forget it, so that this gateway stops claiming the ledger (later
        writes are answered from the metadata: closed, or its owner gone) and
        the handle's memory goes."""
        if self.handles.get(handle.ledger_id) is handle:
            del self.handles[handle.ledger_id]

    async def metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        """The ledger's metadata and version, from the metadata cache when
        there is one and it can be trusted (LedgerMetadataStore.recent_ledger_metadata).
        The object is shared: copy it before changing it."""
        return await self.metadata_store.recent_ledger_metadata(ledger_id)

    async def _recover(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, version: int
    ) -> common_pb2.LedgerMetadata:
        """Fence, recover and close the ledger (recovery.py): its closed metadata."""
        recovery = Recovery(self.remote, self.metadata_store, ledger_id, metadata, version, self.recovery_settings)
        return await recovery.run()

    def _writer_lac(self, ledger_id: LedgerId) -> int | None:
        """The LAC of the ledger's write handle here (the writer knows best), or None."""
        handle = self.handles.get(ledger_id)
        return handle.last_add_confirmed if handle is not None and not handle.failed else None

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
            closed = await self._recover(ledger_id, metadata, version)
            return public_metadata(closed), closed.last_entry_id
        return public_metadata(metadata), await self.reads.last_add_confirmed(ledger_id, metadata)

    async def route_write(
        self, ledger_id: LedgerId, *, forwarded: bool, closing: bool = False
    ) -> common_pb2.LedgerOwner | None:
        """Where a write (append, add, close) of `ledger_id` is done: None
        means here (this gateway holds its write handle, or, for a close, the
        ledger is already closed); otherwise the owner to forward it to, whose
        lease lives. A call that was itself forwarded is never forwarded
        again: a gateway that is not the owner (any more) refuses it. A ledger
        whose owner's lease has ended, or was a previous process of this
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
        if self.lease is not None and self.lease.is_a_previous_process(owner):
            # Written by a previous process of this gateway's name: dead, whatever the registry says
            # yet (even when relayed here by a gateway that still takes that lease for alive).
            await self._owner_gone(ledger_id, metadata, version)
        here = f"gateway {self.lease.name}" if self.lease is not None else "this gateway"
        if forwarded or not owner.gateway or self.lease is None or self.lease.is_me(owner):
            writer = f"gateway {owner.gateway} at {owner.address}" if owner.gateway else "the gateway that created it"
            raise FailedPrecondition(
                f"ledger {ledger_id} is not open for writing on {here}; it is written by {writer}",
                Reason.LEDGER_NOT_WRITABLE_HERE,
                owner=owner.gateway,
                owner_address=owner.address,
            )
        if await self.lease.alive(owner):
            return owner
        await self._owner_gone(ledger_id, metadata, version)
        raise AssertionError("unreachable")  # _owner_gone always raises

    async def _owner_gone(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, version: int) -> None:
        """The owner's lease has ended, so nobody will write this ledger
        again: recover it as BookKeeper does (fence, agree on the end, close;
        idempotent, one close wins the metadata CAS) and say where it ended.
        Not a takeover: the fence is permanent, so the ledger stays closed."""
        owner = metadata.owner
        log.warning("ledger %s: its writer gateway %s (session %x) has ended; recovering it",
                    ledger_id, owner.gateway, owner.session_id)  # fmt: skip
        closed = await self._recover(ledger_id, metadata, version)
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

    def append_now(
        self, ledger_id: LedgerId, payloads: list[bytes], expected_entry_id: int | None = None
    ) -> list[asyncio.Future[int]] | None:
        """`append` when it need not wait (its handle is here and has room):
        a writer's common case without a coroutine; None, with nothing
        appended, when it must (then `append`)."""
        handle = self.handles.get(ledger_id)
        return handle.submit_now(payloads, expected_entry_id) if handle is not None and payloads else None

    async def add(self, ledger_id: LedgerId, payload: bytes, expected_entry_id: int | None = None) -> tuple[int, int]:
        futures = self.append_now(ledger_id, [payload], expected_entry_id)
        (future,) = futures if futures is not None else await self.append(ledger_id, [payload], expected_entry_id)
        if tracing_enabled():
            attributes = {"quire.ledger": str(ledger_id)}
            with _tracer.start_as_current_span("quire.gateway.quorum_wait", attributes=attributes):
                entry_id = await future
        else:
            entry_id = await future
        return entry_id, self.handles[ledger_id].last_add_confirmed

    async def close(self, ledger_id: LedgerId) -> common_pb2.LedgerMetadata:
        handle = self.handles.get(ledger_id)
        if handle is None:
            metadata, _ = await self.metadata(ledger_id)
            if metadata.state != common_pb2.LEDGER_STATE_CLOSED:
                # The cache may not have heard yet of a close this gateway just finished in the background.
                metadata, _ = await self.metadata_store.get_ledger_metadata(ledger_id)
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return public_metadata(metadata)  # closing twice is fine
            raise FailedPrecondition(
                f"ledger {ledger_id} is open on another writer; recover it to close it",
                Reason.LEDGER_NOT_WRITABLE_HERE,
            )
        try:
            metadata = await handle.close()
        except (Unavailable, DeadlineExceeded, asyncio.CancelledError):
            # The end may not be recorded, and the writer has stopped taking entries: the handle
            # stays and records it in the background, so that asking again finishes the close.
            handle.close_later()
            raise
        except BaseException:
            self._forget_ended(handle)
            raise
        self._forget_ended(handle)
        return public_metadata(metadata)

    async def delete(self, ledger_id: LedgerId) -> None:
        metadata, _ = await self.metadata(ledger_id)
        handle = self.handles.pop(ledger_id, None)
        if handle is not None:
            handle.abandon(NotFound(f"ledger {ledger_id} was deleted", Reason.LEDGER_NOT_FOUND))
        if self.entry_cache is not None:
            await drop_ledger_entries(self.entry_cache, ledger_id)
        await self.metadata_store.delete_ledger_metadata(ledger_id)
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
        await self.reads.finish()
