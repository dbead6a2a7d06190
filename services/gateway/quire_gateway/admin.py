"""The admin API's work (quire.admin.v1.AdminService): what an operator asks
of the cluster, answered by this gateway asking the registry, placement and
bookies itself. Pure of grpc: ClusterCalls makes the calls.

Why on the gateway at all: an operator then needs one address and a client
credential with the admin role, never the service CA's identity or a route
to every bookie (docs/decisions.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from quire_api.errors import QuireError
from quire_api.ids import validate_bookie_id
from quire_api.replication import RepairQueue, repair_queue
from quire_common.build_info import version
from quire_gateway.autorecovery.auditor import ROLE as AUDITOR_ROLE
from quire_gateway.cluster_calls import HealthAnswer
from quire_gateway.ownership.lease import ADDRESS_PROPERTY, GATEWAY_ROLE_PREFIX
from quire_proto.admin.v1 import admin_pb2
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.common.v1 import common_pb2
from quire_proto.placement.v1 import placement_pb2
from quire_proto.registry.v1 import registry_pb2

# GetRecoveryStatus lists at most this many segments (and counts them all), so
# its answer stays far below the 4 MiB a client receives by default.
MAX_LISTED_SEGMENTS = 10_000
# Each service's health check and each bookie's disk query get this long.
CHECK_SECONDS = 3.0
_LEDGER_PAGE = 500


class AdminRemote(Protocol):
    """What AdminOperations needs of quire_gateway.cluster_calls.ClusterCalls."""

    async def list_bookies(self, state: int) -> list[registry_pb2.BookieRecord]: ...
    async def bookie_service_info(self, bookie_id: str) -> registry_pb2.GetBookieServiceInfoResponse: ...
    async def leader(self, role: str) -> registry_pb2.Leader: ...
    async def delete_cookie(self, bookie_id: str) -> bool: ...
    async def placement_weights(self) -> placement_pb2.GetPlacementWeightsResponse: ...
    async def bookie_disk(self, bookie_id: str, timeout_seconds: float) -> bookie_pb2.GetBookieInfoResponse: ...
    async def service_health(self, service: str, timeout_seconds: float) -> HealthAnswer: ...
    async def list_leaders(self, role_prefix: str) -> list[registry_pb2.Leader]: ...
    async def gateway_health(self, address: str, server_name: str, timeout_seconds: float) -> HealthAnswer: ...
    async def bookie_health(self, bookie_id: str, timeout_seconds: float) -> HealthAnswer: ...
    async def list_ledger_metadata(
        self, scope_id: int, page_size: int, page_token: str, all_scopes: bool = False
    ) -> tuple[list[common_pb2.LedgerMetadata], str]: ...


class AdminOperations:
    def __init__(
        self,
        remote: AdminRemote,
        gateway_address: str,
        certificates: Callable[[], list[tuple[str, float]]] = list,
        *,
        gateway_name: str = "",
        peer_tls_name: str = "",
    ) -> None:
        """`gateway_address`: how this gateway names itself in a cluster status;
        `gateway_name` tells its own lease from the other gateways' and
        `peer_tls_name` is the name their certificates carry ("" for their address's host).
        `certificates`: its TLS files' (role, notAfter in Unix seconds), [] without TLS."""
        self.remote = remote
        self.gateway_address = gateway_address
        self.gateway_name = gateway_name
        self.peer_tls_name = peer_tls_name
        self.certificates = certificates

    async def list_bookies(self, state: int) -> list[registry_pb2.BookieRecord]:
        return await self.remote.list_bookies(state or registry_pb2.BOOKIE_STATE_ALL)

    async def bookie_service_info(self, bookie_id: str) -> registry_pb2.GetBookieServiceInfoResponse:
        return await self.remote.bookie_service_info(validate_bookie_id(bookie_id))

    async def bookie_disks(self) -> list[admin_pb2.BookieDisk]:
        records = await self.remote.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
        return list(await asyncio.gather(*(self._disk(r.bookie_id) for r in records)))

    async def _disk(self, bookie_id: str) -> admin_pb2.BookieDisk:
        try:
            info = await self.remote.bookie_disk(bookie_id, CHECK_SECONDS)
        except QuireError as exc:
            return admin_pb2.BookieDisk(bookie_id=bookie_id, error=f"{exc.code}: {exc.message}")
        return admin_pb2.BookieDisk(
            bookie_id=bookie_id, free_disk_bytes=info.free_disk_bytes, total_disk_bytes=info.total_disk_bytes
        )

    async def placement_weights(self) -> placement_pb2.GetPlacementWeightsResponse:
        return await self.remote.placement_weights()

    async def auditor(self) -> registry_pb2.Leader:
        return await self.remote.leader(AUDITOR_ROLE)

    async def delete_cookie(self, bookie_id: str) -> bool:
        return await self.remote.delete_cookie(validate_bookie_id(bookie_id))

    async def recovery_status(self, bookie_id: str = "") -> admin_pb2.GetRecoveryStatusResponse:
        if bookie_id:
            validate_bookie_id(bookie_id)
        auditor, queue = await asyncio.gather(self.auditor(), self._repair_queue())
        segments = [s for s in queue.segments if not bookie_id or s.bookie_id == bookie_id]
        return admin_pb2.GetRecoveryStatusResponse(
            auditor=auditor, segments=segments[:MAX_LISTED_SEGMENTS], total_segments=len(segments)
        )

    async def _repair_queue(self, records: list[registry_pb2.BookieRecord] | None = None) -> RepairQueue:
        if records is None:
            records = await self.remote.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
        return repair_queue(await self._ledgers(), {r.bookie_id for r in records})

    async def _ledgers(self) -> list[common_pb2.LedgerMetadata]:
        ledgers: list[common_pb2.LedgerMetadata] = []
        token = ""
        while True:
            page, token = await self.remote.list_ledger_metadata(0, _LEDGER_PAGE, token, all_scopes=True)
            ledgers.extend(page)
            if not token:
                return ledgers

    async def cluster_status(self) -> admin_pb2.GetClusterStatusResponse:
        """Whatever can be learned: a service that does not answer is
        reported UNREACHABLE, and what needed it is left out, never failed on."""
        status = admin_pb2.GetClusterStatusResponse()
        status.services.append(
            admin_pb2.ServiceHealth(
                service="gateway", address=self.gateway_address, health="SERVING", version=version()
            )
        )
        registry, placement = await asyncio.gather(
            self.remote.service_health("registry", CHECK_SECONDS),
            self.remote.service_health("placement", CHECK_SECONDS),
        )
        for name, answer in (("registry", registry), ("placement", placement)):
            status.services.append(_service(name, answer.address, answer))
        for role, not_after in self.certificates():
            status.certificates.add(certificate=role).not_after.FromSeconds(int(not_after))
        if registry.health != "SERVING":
            return status  # bookies, the auditor and the ledgers are all the registry's to tell
        try:
            records = await self.remote.list_bookies(registry_pb2.BOOKIE_STATE_ALL)
            auditor = await self.auditor()
            queue = await self._repair_queue(records)
        except QuireError as exc:
            status.services[1].health = "UNREACHABLE"
            status.services[1].detail = f"{exc.code}: {exc.message}"
            return status
        status.services.extend(await self._other_gateways())
        answers = await asyncio.gather(*(self.remote.bookie_health(r.bookie_id, CHECK_SECONDS) for r in records))
        for record, answer in zip(records, answers, strict=True):
            bookie = _service("bookie", answer.address or record.bookie_id, answer)
            bookie.bookie_state = "read-only" if record.read_only else "writable"
            status.services.append(bookie)
        status.writable_bookies = sum(1 for r in records if not r.read_only)
        status.read_only_bookies = sum(1 for r in records if r.read_only)
        status.largest_ensemble = queue.largest_ensemble
        status.auditor = auditor.holder
        status.under_replicated_ledgers = queue.ledgers
        status.under_replicated_segments = len(queue.segments)
        status.missing_bookie_ids.extend(queue.missing_bookie_ids)
        lag = auditor.properties.get("scrub_lag_seconds")
        if auditor.holder and lag is not None:
            try:
                status.scrub_lag_seconds = float(lag)
            except ValueError:
                pass  # a figure this release does not read: left out rather than guessed
        return status

    async def _other_gateways(self) -> list[admin_pb2.ServiceHealth]:
        """Every other gateway holding its lease now, checked at the address it advertises.
        A gateway whose lease lapsed is not listed: nothing routes to it any more."""
        gateways = [
            leader
            for leader in await self.remote.list_leaders(GATEWAY_ROLE_PREFIX)
            if leader.holder and leader.holder != self.gateway_name
        ]
        addresses = [leader.properties.get(ADDRESS_PROPERTY, "") for leader in gateways]
        answers = await asyncio.gather(
            *(
                self.remote.gateway_health(address, self.peer_tls_name, CHECK_SECONDS) if address else _no_address()
                for address in addresses
            )
        )
        return [
            _service("gateway", address or leader.holder, answer)
            for leader, address, answer in zip(gateways, addresses, answers, strict=True)
        ]


async def _no_address() -> HealthAnswer:
    return HealthAnswer("UNREACHABLE", detail="its session advertises no address")


def _service(name: str, address: str, answer: HealthAnswer) -> admin_pb2.ServiceHealth:
    return admin_pb2.ServiceHealth(
        service=name, address=address, health=answer.health, version=answer.version, detail=answer.detail
    )
