"""PlacementService over gRPC: validate, call the Placer, return."""

from __future__ import annotations

import grpc

from quire_api.errors import InvalidArgument, QuireError
from quire_api.rpc_status import status_code
from quire_placement.placement import EnsembleAsk, Placer
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc


class PlacementServicer(placement_pb2_grpc.PlacementServiceServicer):
    def __init__(self, placer: Placer) -> None:
        self.placer = placer

    async def NewEnsemble(
        self, request: placement_pb2.NewEnsembleRequest, context: grpc.aio.ServicerContext
    ) -> placement_pb2.NewEnsembleResponse:
        chosen = await self.placer.new_ensemble(
            request.ensemble_size,
            request.write_quorum_size,
            request.ack_quorum_size,
            request.exclude_bookie_ids,
            dict(request.custom_metadata),
        )
        return placement_pb2.NewEnsembleResponse(bookie_ids=chosen)

    async def NewEnsembles(
        self, request: placement_pb2.NewEnsemblesRequest, context: grpc.aio.ServicerContext
    ) -> placement_pb2.NewEnsemblesResponse:
        asks = [
            EnsembleAsk(
                ask.ensemble_size,
                ask.write_quorum_size,
                ask.ack_quorum_size,
                tuple(ask.exclude_bookie_ids),
                dict(ask.custom_metadata),
            )
            for ask in request.requests
        ]
        response = placement_pb2.NewEnsemblesResponse()
        for outcome in await self.placer.new_ensembles(asks):
            result = response.results.add()
            if isinstance(outcome, QuireError):
                result.code, result.reason, result.message = status_code(outcome), outcome.reason, outcome.message
                result.error_metadata.update(outcome.metadata)
            else:
                result.bookie_ids.extend(outcome)
        return response

    async def ReplaceBookie(
        self, request: placement_pb2.ReplaceBookieRequest, context: grpc.aio.ServicerContext
    ) -> placement_pb2.ReplaceBookieResponse:
        if not request.failed_bookie_id:
            raise InvalidArgument("failed_bookie_id is required")
        chosen = await self.placer.replace_bookie(
            request.ensemble_size,
            request.write_quorum_size,
            request.ack_quorum_size,
            list(request.ensemble_bookie_ids),
            request.failed_bookie_id,
            request.exclude_bookie_ids,
            dict(request.custom_metadata),
        )
        return placement_pb2.ReplaceBookieResponse(bookie_id=chosen)

    async def GetPlacementWeights(
        self, request: placement_pb2.GetPlacementWeightsRequest, context: grpc.aio.ServicerContext
    ) -> placement_pb2.GetPlacementWeightsResponse:
        tracker = self.placer.tracker
        response = placement_pb2.GetPlacementWeightsResponse(
            disk_weight_placement_enabled=tracker.settings.enabled,
            max_weight_multiple=tracker.settings.max_weight_multiple,
            policy=self.placer.settings.policy,
        )
        for row, sample in tracker.table():
            weight = response.bookies.add(
                bookie_id=row.bookie_id,
                free_bytes=row.free_bytes,
                total_bytes=row.total_bytes,
                natural_weight=row.natural,
                capped_weight=row.capped,
                load_factor=row.load_factor,
                selection_probability=row.probability,
                selections=self.placer.selections[row.bookie_id],
            )
            weight.info_read_at.FromMicroseconds(int(sample.read_at * 1e6))
        response.unknown_bookie_ids.extend(tracker.unknown())
        return response
