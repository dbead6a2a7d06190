"""AdminService over gRPC: the requests handed to AdminOperations, its
answers wrapped in the responses. Who may call is the auth interceptor's
business (every method needs admin on "*": quire_gateway.permissions)."""

from __future__ import annotations

import grpc

from quire_gateway.admin import AdminOperations
from quire_proto.admin.v1 import admin_pb2, admin_pb2_grpc


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    def __init__(self, operations: AdminOperations) -> None:
        self.operations = operations

    async def ListBookies(
        self, request: admin_pb2.ListBookiesRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListBookiesResponse:
        return admin_pb2.ListBookiesResponse(bookies=await self.operations.list_bookies(request.state))

    async def GetBookieServiceInfo(
        self, request: admin_pb2.GetBookieServiceInfoRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.GetBookieServiceInfoResponse:
        return admin_pb2.GetBookieServiceInfoResponse(info=await self.operations.bookie_service_info(request.bookie_id))

    async def GetBookieDisks(
        self, request: admin_pb2.GetBookieDisksRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.GetBookieDisksResponse:
        return admin_pb2.GetBookieDisksResponse(bookies=await self.operations.bookie_disks())

    async def GetPlacementWeights(
        self, request: admin_pb2.GetPlacementWeightsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.GetPlacementWeightsResponse:
        return admin_pb2.GetPlacementWeightsResponse(weights=await self.operations.placement_weights())

    async def GetAuditor(
        self, request: admin_pb2.GetAuditorRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.GetAuditorResponse:
        return admin_pb2.GetAuditorResponse(auditor=await self.operations.auditor())

    async def GetRecoveryStatus(
        self, request: admin_pb2.GetRecoveryStatusRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.GetRecoveryStatusResponse:
        return await self.operations.recovery_status(request.bookie_id)

    async def DeleteBookieCookie(
        self, request: admin_pb2.DeleteBookieCookieRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteBookieCookieResponse:
        return admin_pb2.DeleteBookieCookieResponse(deleted=await self.operations.delete_cookie(request.bookie_id))

    async def GetClusterStatus(
        self, request: admin_pb2.GetClusterStatusRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.GetClusterStatusResponse:
        return await self.operations.cluster_status()
