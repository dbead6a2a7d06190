"""PlacementService over gRPC."""

from __future__ import annotations

import random

import grpc

from quire.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_common.bookies import BookieDirectory
from quire_common.errors import InvalidArgument
from quire_common.quorum import validate_quorum
from quire_placement import policy


class PlacementServicer(placement_pb2_grpc.PlacementServiceServicer):
    def __init__(self, directory: BookieDirectory, rng: random.Random | None = None) -> None:
        self.directory = directory
        self.rng = rng or random.Random()

    async def NewEnsemble(
        self, request: placement_pb2.NewEnsembleRequest, context: grpc.aio.ServicerContext
    ) -> placement_pb2.NewEnsembleResponse:
        validate_quorum(request.ensemble_size, request.write_quorum_size, request.ack_quorum_size)
        chosen = policy.new_ensemble(
            await self.directory.writable(), request.ensemble_size, request.exclude_bookie_ids, self.rng
        )
        return placement_pb2.NewEnsembleResponse(bookie_ids=chosen)

    async def ReplaceBookie(
        self, request: placement_pb2.ReplaceBookieRequest, context: grpc.aio.ServicerContext
    ) -> placement_pb2.ReplaceBookieResponse:
        if not request.failed_bookie_id:
            raise InvalidArgument("failed_bookie_id is required")
        chosen = policy.replace_bookie(
            await self.directory.writable(),
            request.ensemble_bookie_ids,
            request.failed_bookie_id,
            request.exclude_bookie_ids,
            self.rng,
        )
        return placement_pb2.ReplaceBookieResponse(bookie_id=chosen)
