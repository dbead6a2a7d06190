"""The writable bookies, as the registry lists them, cached briefly so that a
burst of ledger creations costs one registry call."""

from __future__ import annotations

import time

from quire.registry.v1 import registry_pb2, registry_pb2_grpc
from quire_common.channels import call, open_channel


class BookieDirectory:
    def __init__(self, registry_target: str, cache_seconds: float = 0.5) -> None:
        self._channel = open_channel(registry_target)
        self._stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        self._cache_seconds = cache_seconds
        self._writable: list[str] = []
        self._fetched_at = float("-inf")

    async def writable(self) -> list[str]:
        if time.monotonic() - self._fetched_at > self._cache_seconds:
            response = await call(
                self._stub.ListBookies(
                    registry_pb2.ListBookiesRequest(state=registry_pb2.BOOKIE_STATE_WRITABLE), timeout=5
                ),
                "listing bookies from the registry",
            )
            self._writable = [record.bookie_id for record in response.bookies]
            self._fetched_at = time.monotonic()
        return self._writable

    async def close(self) -> None:
        await self._channel.close()
