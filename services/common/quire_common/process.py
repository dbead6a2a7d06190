"""A service process as a composition root: its parts are built and started
by `_start()` (a subclass's), each part's stop pushed on one exit stack as the
part starts, so `stop()` runs them in the reverse order, and a start that
fails half way stops what it had started. The gRPC server `_start()` creates
is served until SIGTERM or SIGINT, drained, and then the parts are stopped."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AsyncExitStack

import grpc
from grpc_health.v1 import health

from quire_common.server import serve_until_signalled


class ServiceProcess(ABC):
    def __init__(self) -> None:
        self._stops = AsyncExitStack()
        # Set by `_start()` once it has created the gRPC server.
        self.server: grpc.aio.Server | None = None
        self.health: health.aio.HealthServicer | None = None

    @abstractmethod
    async def _start(self) -> None:
        """Create the server and the service's parts, each entered on `self._stops`."""

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def serve_until_signalled(self) -> None:
        """Serve until SIGTERM or SIGINT, drain the calls in flight, then stop."""
        if self.server is None or self.health is None:
            raise RuntimeError(f"{type(self).__name__} was not started")
        await serve_until_signalled(self.server, self.health, on_stop=self.stop)

    async def stop(self) -> None:
        await self._stops.aclose()
