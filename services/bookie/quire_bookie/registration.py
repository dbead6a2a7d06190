"""The bookie's side of the registry: its cookie (RegistryCookies) and its
registration (RegistrationKeeper: one RegisterBookie session, heartbeating
well inside the lease TTL, re-established after any failure, often enough
while the lease may still live to resume it; a change of read-only mode is
sent at once (`nudge`), not at the next beat)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import grpc

from quire_api.backoff import Backoff
from quire_api.errors import NotFound
from quire_bookie.cookie import Cookie
from quire_common.channels import call, open_channel
from quire_common.tasks import cancel_and_wait
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc

# Between registration sessions while the registry is away.
_RECONNECT = Backoff(first_seconds=0.2, longest_seconds=2.0)
# The shortest pause while the lease may still live: near its end, ten tries a second at most.
_SHORTEST_PAUSE_ON_LEASE = 0.1


def reconnect_pause(backoff_pause: float, lease_left_seconds: float) -> float:
    """The pause before the next registration session. While the lease may
    still be alive, at most a quarter of what is left of it: a registry back
    within the lease is reached before the lease runs out, and the bookie
    resumes it instead of dropping out of the registry and registering
    afresh (the backoff alone grows to 2 s, which outlasts a short lease)."""
    if lease_left_seconds <= 0:
        return backoff_pause
    return min(backoff_pause, max(lease_left_seconds / 4, _SHORTEST_PAUSE_ON_LEASE))


log = logging.getLogger(__name__)


class RegistryCookies:
    """The registry's copy of bookie cookies (quire_bookie.cookie.CookieRegistry)."""

    def __init__(self, registry_target: str, timeout_seconds: float = 5.0) -> None:
        self._channel = open_channel(registry_target)
        self._stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        self._timeout = timeout_seconds

    async def get(self, bookie_id: str) -> tuple[Cookie, int] | None:
        try:
            response = await call(
                self._stub.GetCookie(registry_pb2.GetCookieRequest(bookie_id=bookie_id), timeout=self._timeout),
                f"reading the cookie of bookie {bookie_id}",
            )
        except NotFound:
            return None
        return Cookie(response.cookie.instance_id, tuple(response.cookie.data_dirs)), response.version

    async def create(self, bookie_id: str, cookie: Cookie) -> None:
        request = registry_pb2.PutCookieRequest(
            bookie_id=bookie_id,
            cookie=registry_pb2.Cookie(instance_id=cookie.instance_id, data_dirs=list(cookie.data_dirs)),
            expected_version=0,
        )
        await call(self._stub.PutCookie(request, timeout=self._timeout), f"writing the cookie of bookie {bookie_id}")

    async def close(self) -> None:
        await self._channel.close()


class RegistrationKeeper:
    def __init__(
        self,
        registry_target: str,
        bookie_id: str,
        service_info: common_pb2.BookieServiceInfo,
        ttl_seconds: int,
        read_only: Callable[[], bool],
    ) -> None:
        self._target = registry_target
        self._bookie_id = bookie_id
        self._info = service_info
        self._ttl = ttl_seconds
        self._read_only = read_only
        self._task: asyncio.Task[None] | None = None
        self._nudged = asyncio.Event()
        self._lease_id = 0  # the live registration's lease, resumed after a reconnect
        self._lease_until = 0.0  # loop time by which that lease runs out unless renewed
        self.registered = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="registration")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    def nudge(self) -> None:
        """Send a heartbeat now (the read-only mode changed)."""
        self._nudged.set()

    def _request(self) -> registry_pb2.RegisterBookieRequest:
        return registry_pb2.RegisterBookieRequest(
            bookie_id=self._bookie_id,
            read_only=self._read_only(),
            service_info=self._info,
            ttl_seconds=self._ttl,
            resume_lease_id=self._lease_id,
        )

    async def _requests(self) -> AsyncIterator[registry_pb2.RegisterBookieRequest]:
        interval = max(self._ttl / 3, 0.5)
        while True:
            self._nudged.clear()
            yield self._request()
            try:
                await asyncio.wait_for(self._nudged.wait(), interval)
            except TimeoutError:
                pass

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        pauses = _RECONNECT.pauses()
        while True:
            async with open_channel(self._target) as channel:
                stub = registry_pb2_grpc.RegistryServiceStub(channel)
                try:
                    async for response in stub.RegisterBookie(self._requests()):
                        if not self.registered.is_set():
                            log.info("registered as %s (ttl %ds)", self._bookie_id, response.ttl_seconds)
                        self._lease_id = response.lease_id
                        # Renewed before this answer left the registry: it lives at most this long.
                        self._lease_until = loop.time() + response.ttl_seconds
                        self.registered.set()
                        pauses = _RECONNECT.pauses()
                except grpc.aio.AioRpcError as exc:
                    self.registered.clear()
                    log.warning("registration session ended: %s %s", exc.code().name, exc.details())
            await asyncio.sleep(reconnect_pause(next(pauses), self._lease_until - loop.time()))
