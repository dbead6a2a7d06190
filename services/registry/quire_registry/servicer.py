"""RegistryService over gRPC: validate, call the Registry, return."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import grpc

from quire_api.errors import InvalidArgument, QuireError
from quire_api.ids import LedgerId, ledger_id_from_proto
from quire_api.rpc_status import status_code
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from quire_registry.elections import Elections
from quire_registry.ledger_records import CreateOrder, IdMode
from quire_registry.registry import Registry


def _create_order(
    request: registry_pb2.CreateLedgerMetadataRequest,
) -> tuple[IdMode, common_pb2.LedgerMetadata, LedgerId | None, int, str]:
    """A create request's arguments to Registry.create_ledger, in order."""
    which = request.WhichOneof("id")
    if which == "ledger_id":
        return IdMode.EXACT, request.metadata, ledger_id_from_proto(request.ledger_id), 0, request.request_id
    if which == "scope_id":
        return IdMode.SCOPED, request.metadata, None, request.scope_id, request.request_id
    if which == "legacy":
        return IdMode.LEGACY, request.metadata, None, 0, request.request_id
    return IdMode.FRESH, request.metadata, None, 0, request.request_id


class RegistryServicer(registry_pb2_grpc.RegistryServiceServicer):
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.elections = Elections(registry.store, registry.keys)

    async def RegisterBookie(
        self,
        request_iterator: AsyncIterator[registry_pb2.RegisterBookieRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[registry_pb2.RegisterBookieResponse]:
        async with aclosing(self.registry.registration_stream(request_iterator)) as registrations:
            async for registration in self.registry.streams.until_stopped(registrations):
                yield registry_pb2.RegisterBookieResponse(
                    record=registry_pb2.BookieRecord(
                        bookie_id=registration.bookie_id,
                        read_only=registration.read_only,
                        service_info=registration.info,
                        version=registration.version,
                    ),
                    ttl_seconds=registration.ttl_seconds,
                    lease_id=registration.lease_id,
                )

    async def ListBookies(
        self, request: registry_pb2.ListBookiesRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ListBookiesResponse:
        records, revision = await self.registry.list_bookies(request.state)
        return registry_pb2.ListBookiesResponse(bookies=records, version=revision)

    async def GetBookieServiceInfo(
        self, request: registry_pb2.GetBookieServiceInfoRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.GetBookieServiceInfoResponse:
        record, effective = await self.registry.get_bookie(request.bookie_id)
        return registry_pb2.GetBookieServiceInfoResponse(record=record, effective_service_info=effective)

    async def WatchBookies(
        self, request: registry_pb2.WatchBookiesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[registry_pb2.WatchBookiesResponse]:
        async for kind, record in self.registry.streams.until_stopped(self.registry.watch_bookies()):
            yield registry_pb2.WatchBookiesResponse(type=kind, record=record)

    async def GetCookie(
        self, request: registry_pb2.GetCookieRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.GetCookieResponse:
        cookie, version = await self.registry.get_cookie(request.bookie_id)
        return registry_pb2.GetCookieResponse(cookie=cookie, version=version)

    async def PutCookie(
        self, request: registry_pb2.PutCookieRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.PutCookieResponse:
        version = await self.registry.put_cookie(request.bookie_id, request.cookie, request.expected_version)
        return registry_pb2.PutCookieResponse(version=version)

    async def DeleteCookie(
        self, request: registry_pb2.DeleteCookieRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.DeleteCookieResponse:
        await self.registry.delete_cookie(request.bookie_id, request.expected_version)
        return registry_pb2.DeleteCookieResponse()

    async def CreateLedgerMetadata(
        self, request: registry_pb2.CreateLedgerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.CreateLedgerMetadataResponse:
        metadata, version = await self.registry.create_ledger(*_create_order(request))
        return registry_pb2.CreateLedgerMetadataResponse(metadata=metadata, version=version)

    async def CreateLedgerMetadataBatch(
        self, request: registry_pb2.CreateLedgerMetadataBatchRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.CreateLedgerMetadataBatchResponse:
        outcomes = await self.registry.create_ledgers([CreateOrder(*_create_order(c)) for c in request.creates])
        response = registry_pb2.CreateLedgerMetadataBatchResponse()
        for outcome in outcomes:
            result = response.results.add()
            if isinstance(outcome, QuireError):
                result.code, result.reason, result.message = status_code(outcome), outcome.reason, outcome.message
                result.error_metadata.update(outcome.metadata)
            else:
                result.created.metadata.CopyFrom(outcome[0])
                result.created.version = outcome[1]
        return response

    async def GetLedgerMetadata(
        self, request: registry_pb2.GetLedgerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.GetLedgerMetadataResponse:
        metadata, version = await self.registry.get_ledger(ledger_id_from_proto(request.ledger_id))
        return registry_pb2.GetLedgerMetadataResponse(metadata=metadata, version=version)

    async def UpdateLedgerMetadata(
        self, request: registry_pb2.UpdateLedgerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.UpdateLedgerMetadataResponse:
        ledger_id: LedgerId = ledger_id_from_proto(request.ledger_id)
        if request.expected_version <= 0:
            raise InvalidArgument("expected_version is required for an update")
        version = await self.registry.update_ledger(ledger_id, request.metadata, request.expected_version)
        return registry_pb2.UpdateLedgerMetadataResponse(version=version)

    async def DeleteLedgerMetadata(
        self, request: registry_pb2.DeleteLedgerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.DeleteLedgerMetadataResponse:
        await self.registry.delete_ledger(ledger_id_from_proto(request.ledger_id), request.expected_version)
        return registry_pb2.DeleteLedgerMetadataResponse()

    async def ListLedgerMetadata(
        self, request: registry_pb2.ListLedgerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ListLedgerMetadataResponse:
        ledgers, token = await self.registry.list_ledgers(
            request.scope_id, request.page_size, request.page_token, request.all_scopes
        )
        return registry_pb2.ListLedgerMetadataResponse(ledgers=ledgers, next_page_token=token)

    async def ListLedgerIds(
        self, request: registry_pb2.ListLedgerIdsRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ListLedgerIdsResponse:
        ledger_ids, token = await self.registry.list_ledger_ids(request.page_size, request.page_token)
        return registry_pb2.ListLedgerIdsResponse(
            scope_ids=[ledger_id.scope_id for ledger_id in ledger_ids],
            ledger_ids=[ledger_id.ledger_id for ledger_id in ledger_ids],
            next_page_token=token,
        )

    async def WatchLedgerMetadata(
        self, request: registry_pb2.WatchLedgerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[registry_pb2.WatchLedgerMetadataResponse]:
        watch = self.registry.watch_ledgers(request.start_revision, request.heartbeat_interval_ms / 1000)
        async for response in self.registry.streams.until_stopped(watch):
            yield response

    async def PutLoadWeights(
        self, request: registry_pb2.PutLoadWeightsRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.PutLoadWeightsResponse:
        await self.registry.put_load_weights(list(request.weights))
        return registry_pb2.PutLoadWeightsResponse()

    async def ListLoadWeights(
        self, request: registry_pb2.ListLoadWeightsRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ListLoadWeightsResponse:
        return registry_pb2.ListLoadWeightsResponse(weights=await self.registry.list_load_weights())

    async def Campaign(
        self, request: registry_pb2.CampaignRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.CampaignResponse:
        outcome = await self.elections.campaign(
            request.role, request.candidate, request.ttl_seconds, request.lease_id, request.properties
        )
        return registry_pb2.CampaignResponse(
            elected=outcome.elected, leader=outcome.leader, lease_id=outcome.lease_id, ttl_seconds=outcome.ttl_seconds
        )

    async def Resign(
        self, request: registry_pb2.ResignRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ResignResponse:
        await self.elections.resign(request.role, request.candidate, request.lease_id)
        return registry_pb2.ResignResponse()

    async def ListLeaders(
        self, request: registry_pb2.ListLeadersRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.ListLeadersResponse:
        return registry_pb2.ListLeadersResponse(leaders=await self.elections.leaders(request.role_prefix))

    async def GetLeader(
        self, request: registry_pb2.GetLeaderRequest, context: grpc.aio.ServicerContext
    ) -> registry_pb2.GetLeaderResponse:
        leader, lease_id = await self.elections.leader(request.role)
        return registry_pb2.GetLeaderResponse(leader=leader, lease_id=lease_id)
