"""The tracker's sources over gRPC: placement's calls to bookies
(GetBookieInfo) and to the registry (the load factors it keeps), behind the
plain protocols the tracker is written against."""

from __future__ import annotations

from quire_common.bookie_resolver import BookieChannels, BookieDirectory
from quire_common.channels import call, open_channel
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc


class BookieInfoClient:
    """quire_placement.tracker.BookieInfoSource over gRPC."""

    def __init__(self, directory: BookieDirectory) -> None:
        self._channels = BookieChannels(directory)

    async def disk(self, bookie_id: str, timeout_seconds: float) -> tuple[int, int]:
        stub = await self._channels.stub(bookie_id)
        try:
            response = await call(
                stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest(), timeout=timeout_seconds),
                f"reading the info of bookie {bookie_id}",
            )
        except Exception:
            self._channels.failed(bookie_id)
            raise
        return int(response.free_disk_bytes), int(response.total_disk_bytes)

    async def close(self) -> None:
        await self._channels.close()


class RegistryLoadFactors:
    """quire_placement.tracker.LoadFactorSource over gRPC."""

    def __init__(self, registry_target: str, timeout_seconds: float = 5.0) -> None:
        self._channel = open_channel(registry_target, wait_for_ready=True)
        self._stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        self._timeout = timeout_seconds

    async def load_factors(self) -> dict[str, tuple[float, float]]:
        response = await call(
            self._stub.ListLoadWeights(registry_pb2.ListLoadWeightsRequest(), timeout=self._timeout),
            "reading load factors",
        )
        return {w.bookie_id: (w.factor, w.computed_at.ToMicroseconds() / 1e6) for w in response.weights}

    async def close(self) -> None:
        await self._channel.close()
