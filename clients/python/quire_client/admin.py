"""A synchronous client of the gateway's AdminService (quire.admin.v1): the
operator's view of a cluster through the one address a client has.

Every call needs the admin role on "*" (a bearer token or a client
certificate from the client CA); errors come back as QuireClientError
subclasses, as from QuireClient."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from quire.admin.v1 import admin_pb2, admin_pb2_grpc
from quire.placement.v1 import placement_pb2
from quire.registry.v1 import registry_pb2
from quire_api.ids import validate_bookie_id
from quire_client.client import ClientTls, open_client_channel
from quire_client.errors import translate


class AdminClient:
    def __init__(
        self, gateway: str, *, tls: ClientTls | None = None, token: str | None = None, timeout: float = 30.0
    ) -> None:
        self.gateway = gateway
        self.timeout = timeout
        self._channel = open_client_channel(gateway, tls, token)
        self._stub = admin_pb2_grpc.AdminServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _unary(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise translate(exc) from None

    def list_bookies(self, state: int = registry_pb2.BOOKIE_STATE_ALL) -> list[registry_pb2.BookieRecord]:
        return list(self._unary(self._stub.ListBookies, admin_pb2.ListBookiesRequest(state=state)).bookies)

    def bookie_service_info(self, bookie_id: str) -> registry_pb2.GetBookieServiceInfoResponse:
        request = admin_pb2.GetBookieServiceInfoRequest(bookie_id=validate_bookie_id(bookie_id))
        return self._unary(self._stub.GetBookieServiceInfo, request).info

    def bookie_disks(self) -> list[admin_pb2.BookieDisk]:
        return list(self._unary(self._stub.GetBookieDisks, admin_pb2.GetBookieDisksRequest()).bookies)

    def placement_weights(self) -> placement_pb2.GetPlacementWeightsResponse:
        return self._unary(self._stub.GetPlacementWeights, admin_pb2.GetPlacementWeightsRequest()).weights

    def auditor(self) -> registry_pb2.Leader:
        return self._unary(self._stub.GetAuditor, admin_pb2.GetAuditorRequest()).auditor

    def recovery_status(self, bookie_id: str = "") -> admin_pb2.GetRecoveryStatusResponse:
        if bookie_id:
            validate_bookie_id(bookie_id)
        request = admin_pb2.GetRecoveryStatusRequest(bookie_id=bookie_id)
        return self._unary(self._stub.GetRecoveryStatus, request)

    def delete_cookie(self, bookie_id: str) -> bool:
        request = admin_pb2.DeleteBookieCookieRequest(bookie_id=validate_bookie_id(bookie_id))
        return bool(self._unary(self._stub.DeleteBookieCookie, request).deleted)

    def cluster_status(self) -> admin_pb2.GetClusterStatusResponse:
        return self._unary(self._stub.GetClusterStatus, admin_pb2.GetClusterStatusRequest())
