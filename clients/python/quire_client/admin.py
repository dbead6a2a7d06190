"""QuireAdmin: the operator's calls (bookies, placement, the auditor, the
repair queue, cookies, the cluster's health), apart from QuireClient, the
application's ledger and blob calls.

Two routes to the same answers:

- by default, the gateway's admin API (quire.admin.v1.AdminService): one
  address and a credential with the admin role on "*";
- `direct=True`, break-glass for when no gateway answers: the registry,
  placement and bookies are called themselves, at their own addresses (under
  mutual TLS with a certificate they accept).

Each call returns the same message either way, and errors come back as
QuireClientError subclasses, as from QuireClient (docs/decisions.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from quire_api.bookie_addresses import bookie_rpc_address
from quire_api.errors import QuireError
from quire_api.ids import validate_bookie_id
from quire_api.replication import repair_queue
from quire_client import protocol
from quire_client.channels import CHANNEL_OPTIONS, ClientTls, open_client_channel
from quire_client.errors import NotFoundError, QuireClientError, translate
from quire_proto.admin.v1 import admin_pb2, admin_pb2_grpc
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc

_Answer = TypeVar("_Answer")

# The auditor's role in the registry's leader elections.
AUDITOR_ROLE = "auditor"
# A bookie's disk query (bookie_disks, bookie_info) gets this long.
BOOKIE_INFO_SECONDS = 5.0


class QuireAdmin:
    def __init__(
        self,
        gateway: str = "127.0.0.1:7000",
        *,
        registry: str = "127.0.0.1:7001",
        placement: str = "127.0.0.1:7002",
        timeout: float = 30.0,
        tls: ClientTls | None = None,
        token: str | None = None,
        direct: bool = False,
    ) -> None:
        """`direct`: call the registry, placement and bookies themselves
        instead of the gateway's admin API (recovery_status still lists the
        ledgers through the gateway). A channel opens at its first call, so
        an address that no call needs may be anything."""
        self.gateway, self.registry, self.placement = gateway, registry, placement
        self.timeout = timeout
        self.direct = direct
        self._tls, self._token = tls, token
        self._channels: dict[str, grpc.Channel] = {}

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def __enter__(self) -> QuireAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _channel(self, target: str) -> grpc.Channel:
        if target not in self._channels:
            self._channels[target] = open_client_channel(target, self._tls, self._token, CHANNEL_OPTIONS)
        return self._channels[target]

    def _admin_api(self) -> admin_pb2_grpc.AdminServiceStub:
        return admin_pb2_grpc.AdminServiceStub(self._channel(self.gateway))

    def _registry(self) -> registry_pb2_grpc.RegistryServiceStub:
        return registry_pb2_grpc.RegistryServiceStub(self._channel(self.registry))

    def _unary(self, method: Callable[..., Any], request: Any, answer: type[_Answer], timeout: float = 0) -> _Answer:
        """One unary call (`answer`: the type of its answer, which the
        generated stubs do not declare)."""
        try:
            response: _Answer = method(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise translate(exc) from None
        return response

    def list_bookies(self, state: int = registry_pb2.BOOKIE_STATE_ALL) -> list[registry_pb2.BookieRecord]:
        if self.direct:
            request = registry_pb2.ListBookiesRequest(state=state)
            return list(self._unary(self._registry().ListBookies, request, registry_pb2.ListBookiesResponse).bookies)
        asked = admin_pb2.ListBookiesRequest(state=state)
        return list(self._unary(self._admin_api().ListBookies, asked, admin_pb2.ListBookiesResponse).bookies)

    def bookie_service_info(self, bookie_id: str) -> registry_pb2.GetBookieServiceInfoResponse:
        """A bookie's registration as stored, and the service info clients use."""
        validate_bookie_id(bookie_id)
        if self.direct:
            request = registry_pb2.GetBookieServiceInfoRequest(bookie_id=bookie_id)
            return self._unary(
                self._registry().GetBookieServiceInfo, request, registry_pb2.GetBookieServiceInfoResponse
            )
        asked = admin_pb2.GetBookieServiceInfoRequest(bookie_id=bookie_id)
        return self._unary(self._admin_api().GetBookieServiceInfo, asked, admin_pb2.GetBookieServiceInfoResponse).info

    def bookie_info(
        self, record: registry_pb2.BookieRecord, timeout: float = BOOKIE_INFO_SECONDS
    ) -> bookie_pb2.GetBookieInfoResponse:
        """One bookie's GetBookieInfo, asked of the bookie itself (either
        route) at the address its registration resolves to."""
        address = bookie_rpc_address(record.bookie_id, record.service_info)
        with open_client_channel(address, self._tls, self._token, CHANNEL_OPTIONS) as channel:
            stub = bookie_pb2_grpc.BookieServiceStub(channel)
            return self._unary(
                stub.GetBookieInfo, bookie_pb2.GetBookieInfoRequest(), bookie_pb2.GetBookieInfoResponse, timeout
            )

    def bookie_disks(self) -> list[admin_pb2.BookieDisk]:
        """Each registered bookie's free and total disk bytes; a bookie that
        does not answer has its error instead."""
        if not self.direct:
            asked = admin_pb2.GetBookieDisksRequest()
            return list(self._unary(self._admin_api().GetBookieDisks, asked, admin_pb2.GetBookieDisksResponse).bookies)
        disks = []
        for record in self.list_bookies():
            try:
                info = self.bookie_info(record)
            except (QuireClientError, QuireError) as exc:
                disks.append(admin_pb2.BookieDisk(bookie_id=record.bookie_id, error=str(exc)))
                continue
            disks.append(
                admin_pb2.BookieDisk(
                    bookie_id=record.bookie_id,
                    free_disk_bytes=info.free_disk_bytes,
                    total_disk_bytes=info.total_disk_bytes,
                )
            )
        return disks

    def placement_weights(self) -> placement_pb2.GetPlacementWeightsResponse:
        if self.direct:
            stub = placement_pb2_grpc.PlacementServiceStub(self._channel(self.placement))
            request = placement_pb2.GetPlacementWeightsRequest()
            return self._unary(stub.GetPlacementWeights, request, placement_pb2.GetPlacementWeightsResponse)
        asked = admin_pb2.GetPlacementWeightsRequest()
        return self._unary(self._admin_api().GetPlacementWeights, asked, admin_pb2.GetPlacementWeightsResponse).weights

    def auditor(self) -> registry_pb2.Leader:
        """Which gateway holds the auditor role (holder empty: none yet), and
        the figures it publishes: what its scrub checked, found and repaired."""
        if self.direct:
            request = registry_pb2.GetLeaderRequest(role=AUDITOR_ROLE)
            return self._unary(self._registry().GetLeader, request, registry_pb2.GetLeaderResponse).leader
        asked = admin_pb2.GetAuditorRequest()
        return self._unary(self._admin_api().GetAuditor, asked, admin_pb2.GetAuditorResponse).auditor

    def recovery_status(self, bookie_id: str = "") -> admin_pb2.GetRecoveryStatusResponse:
        """The auditor and every ledger segment waiting for repair (of one
        bookie, if given): a replica on a bookie that is not registered
        ("missing"), or entries flagged for repair in the metadata
        ("flagged"). Through the gateway the list is cut at its limit;
        total_segments counts them all."""
        if bookie_id:
            validate_bookie_id(bookie_id)
        if not self.direct:
            asked = admin_pb2.GetRecoveryStatusRequest(bookie_id=bookie_id)
            return self._unary(self._admin_api().GetRecoveryStatus, asked, admin_pb2.GetRecoveryStatusResponse)
        registered = {record.bookie_id for record in self.list_bookies()}
        queue = repair_queue(list(self._all_ledgers()), registered)
        segments = [s for s in queue.segments if not bookie_id or s.bookie_id == bookie_id]
        return admin_pb2.GetRecoveryStatusResponse(
            auditor=self.auditor(), segments=segments, total_segments=len(segments)
        )

    def _all_ledgers(self) -> Iterator[common_pb2.LedgerMetadata]:
        """Every scope's ledgers, through the gateway's LedgerService (as
        QuireClient.list_ledgers lists them)."""
        stub = ledger_pb2_grpc.LedgerServiceStub(self._channel(self.gateway))
        request = protocol.list_ledgers_request(None, 500, "")
        yield from protocol.ledger_pages(
            lambda page: self._unary(stub.ListLedgers, page, ledger_pb2.ListLedgersResponse), request
        )

    def delete_cookie(self, bookie_id: str) -> bool:
        """Remove a stopped bookie's cookie (the end of a decommission); False
        when it has none. The registry refuses while the bookie is registered."""
        validate_bookie_id(bookie_id)
        if not self.direct:
            asked = admin_pb2.DeleteBookieCookieRequest(bookie_id=bookie_id)
            answer = self._unary(self._admin_api().DeleteBookieCookie, asked, admin_pb2.DeleteBookieCookieResponse)
            return bool(answer.deleted)
        registry = self._registry()
        try:
            current = self._unary(
                registry.GetCookie, registry_pb2.GetCookieRequest(bookie_id=bookie_id), registry_pb2.GetCookieResponse
            )
        except NotFoundError:
            return False
        request = registry_pb2.DeleteCookieRequest(bookie_id=bookie_id, expected_version=current.version)
        self._unary(registry.DeleteCookie, request, registry_pb2.DeleteCookieResponse)
        return True

    def cluster_status(self) -> admin_pb2.GetClusterStatusResponse:
        """Every service's health and version, the bookies' states, the repair
        queue and the TLS certificates' expiry, as a gateway sees them: always
        asked of the gateway's admin API, also with `direct`."""
        asked = admin_pb2.GetClusterStatusRequest()
        return self._unary(self._admin_api().GetClusterStatus, asked, admin_pb2.GetClusterStatusResponse)
