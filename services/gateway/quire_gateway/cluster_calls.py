"""The gateway's calls to the other services of the cluster (the registry,
placement, bookies, and other gateways' health), behind plain async methods
so the domain modules (handle, reads, ledgers) never see grpc.

Bookies are reached by BookieId (BP-41) through the shared BookieDirectory:
it resolves an id to the first `bookie-rpc` endpoint of the bookie's registered
BookieServiceInfo (BP-38), keeps that current from the registry's watch, and
forgets an address when a call to it fails so that a bookie that moved is
found again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from quire_api.errors import NotFound, QuireError, Reason, Unavailable, Unimplemented
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.bookie_resolver import BookieChannels, BookieDirectory
from quire_common.channels import call, error_from_result, error_from_rpc, open_channel
from quire_common.server import VERSION_METADATA
from quire_common.tasks import cancel_and_wait
from quire_gateway.metadata_store import ChangeKind, MetadataChange
from quire_gateway.write.bookie_streams import (
    AddRequest,
    AddSender,
    AddStreamCallable,
    BookieAddStreams,
    add_stream_callable,
)
from quire_gateway.write.lac_batches import LacBatches, LacWrite
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc

log = logging.getLogger(__name__)


class RoleRecord(NamedTuple):
    """A registry role as GetLeader has it."""

    holder: str
    lease_id: int
    properties: dict[str, str]


# A dependency counts as down after this many failed health checks in a row (one slow
# answer on a loaded machine must not fail creates).
FAILED_CHECKS_BEFORE_DOWN = 2
RECHECK_SECONDS = 0.5


T = TypeVar("T")


async def outcome_of(awaitable: Awaitable[T]) -> T | QuireError:
    """What the call answers, or the QuireError it fails with (as a value)."""
    try:
        return await awaitable
    except QuireError as exc:
        return exc


class DependencyHealth:
    """What the gateway knows of one service it calls (registry, placement): its
    gRPC health, checked every `interval_seconds` with that as the deadline.

    States: UNKNOWN (not checked yet, or checks off), SERVING, NOT_SERVING (it
    says so, e.g. while shutting down), UNREACHABLE (FAILED_CHECKS_BEFORE_DOWN
    checks in a row got no answer). While NOT_SERVING or UNREACHABLE, `require`
    fails after one quick re-check, so a create answers UNAVAILABLE naming the
    dependency instead of waiting out the call's deadline (the channel waits for
    a restarting peer)."""

    def __init__(self, name: str, target: str, channel: grpc.aio.Channel) -> None:
        self.name, self.target = name, target
        self._stub = health_pb2_grpc.HealthStub(channel)
        self.state = "UNKNOWN"
        self._since = time.monotonic()
        self._failures = 0
        self._task: asyncio.Task[None] | None = None

    def start(self, interval_seconds: float) -> None:
        self._task = asyncio.create_task(self._run(interval_seconds))

    async def stop(self) -> None:
        await cancel_and_wait(self._task)  # type: ignore[arg-type]

    async def _run(self, interval_seconds: float) -> None:
        while True:
            started = time.monotonic()
            await self.check(interval_seconds)
            await asyncio.sleep(max(0.0, interval_seconds - (time.monotonic() - started)))

    async def check(self, timeout_seconds: float) -> str:
        try:
            response = await self._stub.Check(health_pb2.HealthCheckRequest(), timeout=timeout_seconds)
            self._failures = 0
            serving = response.status == health_pb2.HealthCheckResponse.SERVING
            self._set("SERVING" if serving else "NOT_SERVING")
        except grpc.aio.AioRpcError:
            self._failures += 1
            if self._failures >= FAILED_CHECKS_BEFORE_DOWN:
                self._set("UNREACHABLE")
        return self.state

    def _set(self, state: str) -> None:
        if state != self.state:
            (log.info if state == "SERVING" else log.warning)("%s at %s is %s", self.name, self.target, state)
            self.state, self._since = state, time.monotonic()

    async def require(self) -> None:
        """UNAVAILABLE while the dependency is known to be down; one quick check
        first (RECHECK_SECONDS at most), so a dependency that has just come back
        is used at once rather than after the next periodic check."""
        if self.state in ("NOT_SERVING", "UNREACHABLE"):
            await self.check(RECHECK_SECONDS)
        if self.state in ("NOT_SERVING", "UNREACHABLE"):
            raise Unavailable(
                f"{self.name} at {self.target} is {self.state.lower().replace('_', ' ')} "
                f"(for {time.monotonic() - self._since:.1f}s); try again later",
                Reason.SERVICE_UNAVAILABLE,
            )

    def status(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "state": self.state,
            "seconds_in_state": round(time.monotonic() - self._since, 1),
        }


@dataclass(frozen=True)
class HealthAnswer:
    """One health check of a service: SERVING, NOT_SERVING or UNREACHABLE,
    the version it reported (VERSION_METADATA; "" when unknown) and why it
    was not reached."""

    health: str
    version: str = ""
    detail: str = ""
    address: str = ""


async def check_health(channel: grpc.aio.Channel, timeout_seconds: float) -> HealthAnswer:
    answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout_seconds)
    try:
        response = await answer
        metadata = await answer.initial_metadata()
    except grpc.aio.AioRpcError as exc:
        return HealthAnswer("UNREACHABLE", detail=f"{exc.code().name}: {exc.details()}")
    version = next((str(value) for key, value in metadata or () if key == VERSION_METADATA), "")
    serving = response.status == health_pb2.HealthCheckResponse.SERVING
    return HealthAnswer("SERVING" if serving else "NOT_SERVING", version)


class ClusterCalls:
    """Every call the gateway makes to the registry, placement and bookies."""

    def __init__(
        self,
        registry_target: str,
        placement_target: str,
        bookies: BookieDirectory,
        rpc_timeout_seconds: float = 10.0,
    ) -> None:
        self._registry_channel = open_channel(registry_target, wait_for_ready=True)
        self._placement_channel = open_channel(placement_target, wait_for_ready=True)
        self.registry_health = DependencyHealth("registry", registry_target, self._registry_channel)
        self.placement_health = DependencyHealth("placement", placement_target, self._placement_channel)
        self.registry = registry_pb2_grpc.RegistryServiceStub(self._registry_channel)
        self.placement = placement_pb2_grpc.PlacementServiceStub(self._placement_channel)
        self.timeout = rpc_timeout_seconds
        self.bookies = bookies
        self._bookie_channels = BookieChannels(bookies)
        self._add_streams = BookieAddStreams(self._add_stream, self._bookie_channels.failed)
        self._lac_batches = LacBatches(self._write_lac_batch)

    def start_health_checks(self, interval_seconds: float) -> None:
        """Check the registry's and placement's health every `interval_seconds` (0: never)."""
        if interval_seconds > 0:
            self.registry_health.start(interval_seconds)
            self.placement_health.start(interval_seconds)

    def add_stream_stats(self) -> dict[str, dict[str, int]]:
        """Per bookie: messages and adds sent on its AddStream (adds per message shows batching)."""
        return self._add_streams.stats()

    def dependencies(self) -> dict[str, dict[str, Any]]:
        """For the admin /status."""
        return {h.name: h.status() for h in (self.registry_health, self.placement_health)}

    async def close(self) -> None:
        await self.registry_health.stop()
        await self.placement_health.stop()
        await self._registry_channel.close()
        await self._placement_channel.close()
        await self._add_streams.close()
        await self._lac_batches.close()
        await self._bookie_channels.close()

    # -- registry ----------------------------------------------------------------

    async def create_ledger_metadata(
        self, request: registry_pb2.CreateLedgerMetadataRequest
    ) -> tuple[common_pb2.LedgerMetadata, int]:
        await self.registry_health.require()
        response = await call(
            self.registry.CreateLedgerMetadata(request, timeout=self.timeout), "creating ledger metadata"
        )
        return response.metadata, response.version

    async def create_ledgers_metadata(
        self, requests: list[registry_pb2.CreateLedgerMetadataRequest]
    ) -> list[tuple[common_pb2.LedgerMetadata, int] | QuireError]:
        """Each create's stored record and version from one
        CreateLedgerMetadataBatch call, or the error that create alone fails
        with. A registry without the call (an older release, during an
        upgrade) is asked once per create."""
        await self.registry_health.require()
        what = "creating ledger metadata"
        try:
            response = await call(
                self.registry.CreateLedgerMetadataBatch(
                    registry_pb2.CreateLedgerMetadataBatchRequest(creates=requests), timeout=self.timeout
                ),
                what,
            )
        except Unimplemented:
            return await asyncio.gather(*(outcome_of(self.create_ledger_metadata(r)) for r in requests))
        return [
            error_from_result(r.code, r.reason, r.message, what, r.error_metadata)
            or (r.created.metadata, r.created.version)
            for r in response.results
        ]

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        response = await call(
            self.registry.GetLedgerMetadata(
                registry_pb2.GetLedgerMetadataRequest(ledger_id=ledger_id_to_proto(ledger_id)),
                timeout=self.timeout,
            ),
            f"reading metadata of ledger {ledger_id}",
        )
        return response.metadata, response.version

    async def update_ledger_metadata(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        """Compare-and-swap: the new version; ABORTED on a conflict."""
        response = await call(
            self.registry.UpdateLedgerMetadata(
                registry_pb2.UpdateLedgerMetadataRequest(
                    ledger_id=ledger_id_to_proto(ledger_id),
                    metadata=metadata,
                    expected_version=expected_version,
                ),
                timeout=self.timeout,
            ),
            f"updating metadata of ledger {ledger_id}",
        )
        return response.version

    async def delete_ledger_metadata(self, ledger_id: LedgerId) -> None:
        await call(
            self.registry.DeleteLedgerMetadata(
                registry_pb2.DeleteLedgerMetadataRequest(ledger_id=ledger_id_to_proto(ledger_id)),
                timeout=self.timeout,
            ),
            f"deleting metadata of ledger {ledger_id}",
        )

    async def list_ledger_metadata(
        self, scope_id: int, page_size: int, page_token: str, all_scopes: bool = False
    ) -> tuple[list[common_pb2.LedgerMetadata], str]:
        response = await call(
            self.registry.ListLedgerMetadata(
                registry_pb2.ListLedgerMetadataRequest(
                    scope_id=scope_id, page_size=page_size, page_token=page_token, all_scopes=all_scopes
                ),
                timeout=self.timeout,
            ),
            "listing ledgers",
        )
        return list(response.ledgers), response.next_page_token

    async def campaign(
        self, role: str, candidate: str, ttl_seconds: int, lease_id: int, properties: dict[str, str]
    ) -> tuple[bool, str, int, int]:
        """Ask for (or renew) a cluster-wide role: (elected, holder, lease id, TTL)."""
        response = await call(
            self.registry.Campaign(
                registry_pb2.CampaignRequest(
                    role=role, candidate=candidate, ttl_seconds=ttl_seconds, lease_id=lease_id, properties=properties
                ),
                timeout=self.timeout,
            ),
            f"campaigning for the {role} role",
        )
        return response.elected, response.leader.holder, response.lease_id, response.ttl_seconds

    async def get_leader(self, role: str) -> RoleRecord:
        """Who holds a role, on which lease, and what it publishes ("", 0, {} when nobody does)."""
        response = await call(
            self.registry.GetLeader(registry_pb2.GetLeaderRequest(role=role), timeout=self.timeout),
            f"asking who holds the {role} role",
        )
        return RoleRecord(response.leader.holder, response.lease_id, dict(response.leader.properties))

    async def resign(self, role: str, candidate: str, lease_id: int) -> None:
        await call(
            self.registry.Resign(
                registry_pb2.ResignRequest(role=role, candidate=candidate, lease_id=lease_id), timeout=self.timeout
            ),
            f"resigning the {role} role",
        )

    async def watch_ledger_metadata(
        self, start_revision: int, heartbeat_seconds: float
    ) -> AsyncGenerator[MetadataChange, None]:
        """The registry's WatchLedgerMetadata stream, as MetadataChange values
        (the metadata cache follows it). No deadline: it lasts until the caller
        closes it, the registry ends it, or it fails (a QuireError)."""
        kinds = {
            registry_pb2.LEDGER_METADATA_EVENT_TYPE_STARTED: ChangeKind.STARTED,
            registry_pb2.LEDGER_METADATA_EVENT_TYPE_PUT: ChangeKind.PUT,
            registry_pb2.LEDGER_METADATA_EVENT_TYPE_DELETED: ChangeKind.DELETED,
            registry_pb2.LEDGER_METADATA_EVENT_TYPE_RESET: ChangeKind.RESET,
            registry_pb2.LEDGER_METADATA_EVENT_TYPE_PROGRESS: ChangeKind.PROGRESS,
        }
        stream = self.registry.WatchLedgerMetadata(
            registry_pb2.WatchLedgerMetadataRequest(
                start_revision=start_revision, heartbeat_interval_ms=round(heartbeat_seconds * 1000)
            )
        )
        try:
            async for response in stream:
                kind = kinds.get(response.type)
                if kind is None:
                    continue  # an event type of a newer registry
                ledger_id = (
                    LedgerId(response.ledger_id.scope_id, response.ledger_id.ledger_id)
                    if response.HasField("ledger_id")
                    else None
                )
                metadata = response.metadata if response.HasField("metadata") else None
                yield MetadataChange(kind, response.revision, ledger_id, metadata)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, "watching ledger metadata") from None
        finally:
            stream.cancel()

    # -- what the admin API asks (quire_gateway.admin) -------------------------------

    async def list_bookies(self, state: int) -> list[registry_pb2.BookieRecord]:
        """The registry's answer, not this gateway's view of it: an operator asks what is registered now."""
        response = await call(
            self.registry.ListBookies(registry_pb2.ListBookiesRequest(state=state), timeout=self.timeout),
            "listing bookies",
        )
        return list(response.bookies)

    async def bookie_service_info(self, bookie_id: str) -> registry_pb2.GetBookieServiceInfoResponse:
        return await call(
            self.registry.GetBookieServiceInfo(
                registry_pb2.GetBookieServiceInfoRequest(bookie_id=bookie_id), timeout=self.timeout
            ),
            f"reading bookie {bookie_id}'s registration",
        )

    async def leader(self, role: str) -> registry_pb2.Leader:
        """The role's holder and the figures it publishes (holder empty: nobody)."""
        response = await call(
            self.registry.GetLeader(registry_pb2.GetLeaderRequest(role=role), timeout=self.timeout),
            f"asking who holds the {role} role",
        )
        return response.leader

    async def list_leaders(self, role_prefix: str) -> list[registry_pb2.Leader]:
        """The roles held now whose names start with `role_prefix`."""
        response = await call(
            self.registry.ListLeaders(registry_pb2.ListLeadersRequest(role_prefix=role_prefix), timeout=self.timeout),
            f"listing the roles held under {role_prefix!r}",
        )
        return list(response.leaders)

    async def delete_cookie(self, bookie_id: str) -> bool:
        """Remove the bookie's cookie; False when it has none."""
        try:
            current = await call(
                self.registry.GetCookie(registry_pb2.GetCookieRequest(bookie_id=bookie_id), timeout=self.timeout),
                f"reading bookie {bookie_id}'s cookie",
            )
        except NotFound:
            return False
        await call(
            self.registry.DeleteCookie(
                registry_pb2.DeleteCookieRequest(bookie_id=bookie_id, expected_version=current.version),
                timeout=self.timeout,
            ),
            f"removing bookie {bookie_id}'s cookie",
        )
        return True

    async def placement_weights(self) -> placement_pb2.GetPlacementWeightsResponse:
        return await call(
            self.placement.GetPlacementWeights(placement_pb2.GetPlacementWeightsRequest(), timeout=self.timeout),
            "reading placement's weights",
        )

    async def bookie_disk(self, bookie_id: str, timeout_seconds: float) -> bookie_pb2.GetBookieInfoResponse:
        return await self._bookie_call(
            bookie_id, "GetBookieInfo", bookie_pb2.GetBookieInfoRequest(), "reading disk space", timeout_seconds
        )

    async def service_health(self, service: str, timeout_seconds: float) -> HealthAnswer:
        """A health check of the registry or placement, now."""
        channel, dependency = {
            "registry": (self._registry_channel, self.registry_health),
            "placement": (self._placement_channel, self.placement_health),
        }[service]
        return replace(await check_health(channel, timeout_seconds), address=dependency.target)

    async def bookie_health(self, bookie_id: str, timeout_seconds: float) -> HealthAnswer:
        try:
            address = await self.bookies.resolve(bookie_id)
        except QuireError as exc:
            return HealthAnswer("UNREACHABLE", detail=str(exc), address=bookie_id)
        channel = open_channel(address)  # its own: a status check must not disturb the write path's channels
        try:
            return replace(await check_health(channel, timeout_seconds), address=address)
        finally:
            await channel.close()

    async def gateway_health(self, address: str, server_name: str, timeout_seconds: float) -> HealthAnswer:
        """A health check of another gateway at its advertised address
        (`server_name`: the name its certificate carries, "" for the address's host)."""
        channel = open_channel(address, server_name=server_name)
        try:
            return replace(await check_health(channel, timeout_seconds), address=address)
        finally:
            await channel.close()

    # -- placement ---------------------------------------------------------------

    async def new_ensemble(self, request: placement_pb2.NewEnsembleRequest) -> list[str]:
        await self.placement_health.require()
        response = await call(self.placement.NewEnsemble(request, timeout=self.timeout), "choosing an ensemble")
        return list(response.bookie_ids)

    async def new_ensembles(self, requests: list[placement_pb2.NewEnsembleRequest]) -> list[list[str] | QuireError]:
        """An ensemble for each request from one NewEnsembles call, or the
        error that request alone fails with. A placement service without the
        call (an older release, during an upgrade) is asked once per request."""
        await self.placement_health.require()
        what = "choosing an ensemble"
        try:
            response = await call(
                self.placement.NewEnsembles(placement_pb2.NewEnsemblesRequest(requests=requests), timeout=self.timeout),
                "choosing ensembles",
            )
        except Unimplemented:
            return await asyncio.gather(*(outcome_of(self.new_ensemble(r)) for r in requests))
        return [
            error_from_result(r.code, r.reason, r.message, what, r.error_metadata) or list(r.bookie_ids)
            for r in response.results
        ]

    async def replace_bookie(
        self,
        metadata: common_pb2.LedgerMetadata,
        ensemble: list[str],
        failed_bookie_id: str,
        exclude: list[str],
    ) -> str:
        response = await call(
            self.placement.ReplaceBookie(
                placement_pb2.ReplaceBookieRequest(
                    ensemble_size=metadata.ensemble_size,
                    write_quorum_size=metadata.write_quorum_size,
                    ack_quorum_size=metadata.ack_quorum_size,
                    ensemble_bookie_ids=ensemble,
                    failed_bookie_id=failed_bookie_id,
                    exclude_bookie_ids=exclude,
                    custom_metadata=dict(metadata.custom_metadata),
                ),
                timeout=self.timeout,
            ),
            f"choosing a bookie to replace {failed_bookie_id}",
        )
        return str(response.bookie_id)

    # -- bookies -----------------------------------------------------------------

    async def _bookie(self, bookie_id: str) -> bookie_pb2_grpc.BookieServiceStub:
        try:
            return await self._bookie_channels.stub(bookie_id)
        except NotFound as exc:
            raise Unavailable(f"bookie {bookie_id} cannot be reached: {exc}", Reason.BOOKIE_UNAVAILABLE) from None

    async def _add_stream(self, bookie_id: str) -> AddStreamCallable:
        try:
            return add_stream_callable(await self._bookie_channels.channel(bookie_id))
        except NotFound as exc:
            raise Unavailable(f"bookie {bookie_id} cannot be reached: {exc}", Reason.BOOKIE_UNAVAILABLE) from None

    async def _bookie_call(  # type: ignore[no-untyped-def]
        self, bookie_id: str, method: str, request, what: str, timeout_seconds: float | None = None
    ):
        stub = await self._bookie(bookie_id)
        try:
            return await call(
                getattr(stub, method)(request, timeout=timeout_seconds or self.timeout),
                f"{what} on bookie {bookie_id}",
            )
        except Unavailable:
            self._bookie_channels.failed(bookie_id)
            raise

    async def add_entries(
        self,
        bookie_id: str,
        ledger_id: LedgerId,
        master_key: bytes,
        entries: list[tuple[int, bytes]],
        recovery: bool = False,
        timeout_seconds: float | None = None,
    ) -> None:
        """Store entries on one bookie, over this gateway's AddStream to it
        (bookie_streams.py): durable there once this returns."""
        await self._add_streams.get(bookie_id).add(
            ledger_id, master_key, entries, recovery, timeout_seconds or self.timeout
        )

    @staticmethod
    def add_request(
        ledger_id: LedgerId,
        master_key: bytes,
        entries: list[tuple[int, bytes]],
        fields: bytes | None = None,
    ) -> AddRequest:
        """One add of a writer's entries, to send to each bookie of their write
        set with `add_sender`: its message is built once for all of them
        (`fields`: the writer's bookie_streams.add_fields, encoded once)."""
        return AddRequest(ledger_id, master_key, entries, fields=fields)

    def add_sender(self, bookie_id: str) -> AddSender:
        """How a writer hands an add to the bookie's AddStream: `send(request,
        timeout_seconds, on_done)`, and `on_done` is told once its entries are
        durable there, or why not. The same for the gateway's lifetime (a
        bookie's stream reopens itself), so a writer looks it up once."""
        return self._add_streams.get(bookie_id).send

    async def read_entries(
        self, bookie_id: str, ledger_id: LedgerId, entry_ids: list[int], timeout_seconds: float | None = None
    ) -> tuple[dict[int, bytes], set[int]]:
        """Entries found and ids the bookie says it does not have. Ids in
        neither were cut by the response size limit."""
        request = bookie_pb2.ReadEntriesRequest(ledger_id=ledger_id_to_proto(ledger_id), entry_ids=entry_ids)
        response = await self._bookie_call(
            bookie_id, "ReadEntries", request, f"reading {len(entry_ids)} entries", timeout_seconds
        )
        return {e.entry_id: e.data for e in response.entries}, set(response.missing_entry_ids)

    async def check_entries(self, bookie_id: str, stripes: bookie_pb2.EntryStripes) -> bookie_pb2.CheckEntriesResponse:
        """The scrub's CheckEntries call, packed: for the rows of `stripes`,
        the copies the bookie lacks or holds damaged, as (row, entry id)
        pairs. No entry data comes back."""
        rows = len(stripes.scope_ids)
        request = bookie_pb2.CheckEntriesRequest(stripes=stripes)
        response = await self._bookie_call(bookie_id, "CheckEntries", request, f"checking {rows} ledger segments")
        if response.rows_checked != rows:  # a bookie of an earlier release does not read stripes
            raise Unavailable(
                f"bookie {bookie_id} answered {response.rows_checked} of {rows} ledger segments checked",
                Reason.BOOKIE_UNAVAILABLE,
            )
        if (
            any(row >= rows for row in (*response.missing_rows, *response.damaged_rows))
            or len(response.missing_rows) != len(response.missing_entry_ids)
            or len(response.damaged_rows) != len(response.damaged_entry_ids)
        ):
            raise Unavailable(f"bookie {bookie_id} answered rows that were not asked", Reason.BOOKIE_UNAVAILABLE)
        return response

    async def read_last_add_confirmed(
        self, bookie_id: str, ledger_id: LedgerId, timeout_seconds: float | None = None
    ) -> tuple[int, int, bool]:
        request = bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id_to_proto(ledger_id))
        response = await self._bookie_call(
            bookie_id, "ReadLastAddConfirmed", request, "reading the LAC", timeout_seconds
        )
        return response.last_add_confirmed, response.last_entry_id, response.fenced

    async def write_last_add_confirmed(self, bookie_id: str, ledger_id: LedgerId, master_key: bytes, lac: int) -> int:
        """Record the writer's LAC on one bookie (explicit LAC), gathered with
        other ledgers' (lac_batches.py); the bookie's LAC then."""
        return await self._lac_batches.submit(bookie_id, ledger_id, master_key, lac)

    def submit_last_add_confirmed(
        self, bookie_id: str, ledger_id: LedgerId, master_key: bytes, lac: int
    ) -> asyncio.Future[int]:
        """`write_last_add_confirmed` as a future, for callers that wait for many (explicit_lac.py)."""
        return self._lac_batches.submit(bookie_id, ledger_id, master_key, lac)

    async def _write_lac_batch(self, bookie_id: str, writes: list[LacWrite]) -> list[int | QuireError]:
        request = bookie_pb2.WriteLastAddConfirmedBatchRequest(
            writes=[
                bookie_pb2.WriteLastAddConfirmedRequest(
                    ledger_id=ledger_id_to_proto(w.ledger_id),
                    master_key=w.master_key,
                    last_add_confirmed=w.last_add_confirmed,
                )
                for w in writes
            ]
        )
        what = f"writing the LAC of {len(writes)} ledgers"
        response = await self._bookie_call(bookie_id, "WriteLastAddConfirmedBatch", request, what)
        if len(response.results) != len(writes):
            raise Unavailable(
                f"bookie {bookie_id} answered {len(response.results)} of {len(writes)} LAC writes",
                Reason.BOOKIE_UNAVAILABLE,
            )
        return [
            error_from_result(r.code, r.reason, r.message, f"{what} on bookie {bookie_id}") or r.last_add_confirmed
            for r in response.results
        ]

    async def fence_ledger(
        self, bookie_id: str, ledger_id: LedgerId, master_key: bytes, timeout_seconds: float | None = None
    ) -> tuple[int, int]:
        """Fence the ledger on one bookie; its (LAC, last entry id) then."""
        request = bookie_pb2.FenceLedgerRequest(ledger_id=ledger_id_to_proto(ledger_id), master_key=master_key)
        response = await self._bookie_call(
            bookie_id, "FenceLedger", request, f"fencing ledger {ledger_id}", timeout_seconds
        )
        return response.last_add_confirmed, response.last_entry_id

    async def delete_ledger_on_bookie(self, bookie_id: str, ledger_id: LedgerId) -> int:
        request = bookie_pb2.DeleteLedgerRequest(ledger_id=ledger_id_to_proto(ledger_id))
        response = await self._bookie_call(bookie_id, "DeleteLedger", request, f"deleting ledger {ledger_id}")
        return int(response.deleted_entries)
