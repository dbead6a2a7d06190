"""Who the bookies are and where to reach them (BP-38, BP-41).

Ledger metadata names bookies by BookieId, never by address. The rules that
turn one registration into an address live in `quire_api.bookie_addresses`
(clients need them too); this module adds the live parts:

- `BookieDirectory` keeps a live view of the registered bookies, fed by the
  registry's WatchBookies stream, so a bookie that comes back on a new address
  under the same id is found there without any metadata rewrite. With the
  resolver disabled it only parses `host:port` ids (legacy clusters).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc

from quire_api.backoff import Backoff
from quire_api.bookie_addresses import bookie_rpc_address, legacy_address
from quire_api.errors import NotFound
from quire_api.ids import validate_bookie_id
from quire_common.channels import call, open_channel
from quire_common.tasks import cancel_and_wait
from quire_proto.bookie.v1 import bookie_pb2_grpc
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc

# Between watches of the bookie list while the registry is away.
_RECONNECT = Backoff(first_seconds=0.2, longest_seconds=5.0)

log = logging.getLogger(__name__)


class BookieView:
    """The registered bookies as a sequence of watch events describes them.
    Pure state; BookieDirectory feeds it."""

    def __init__(self) -> None:
        self.records: dict[str, registry_pb2.BookieRecord] = {}
        self._incoming: dict[str, registry_pb2.BookieRecord] | None = None
        self.complete = False  # a whole snapshot has been applied

    def apply(self, event: registry_pb2.WatchBookiesResponse) -> None:
        kind, record = event.type, event.record
        if kind == registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT:
            if self._incoming is None:
                self._incoming = {}
            self._incoming[record.bookie_id] = record
        elif kind == registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE:
            # Replace the whole view at once: a bookie missing from the
            # snapshot left while we were not watching.
            self.records = self._incoming or {}
            self._incoming = None
            self.complete = True
        elif kind == registry_pb2.BOOKIE_EVENT_TYPE_LEFT:
            self.records.pop(record.bookie_id, None)
        elif kind in (registry_pb2.BOOKIE_EVENT_TYPE_JOINED, registry_pb2.BOOKIE_EVENT_TYPE_CHANGED):
            self.records[record.bookie_id] = record

    def reset(self) -> None:
        """The watch broke: what we hold may be stale from now on."""
        self._incoming = None
        self.complete = False

    def writable(self) -> list[str]:
        return sorted(bookie_id for bookie_id, record in self.records.items() if not record.read_only)


class BookieDirectory:
    """Live view of the registered bookies and the BookieId → address resolver.

    A background task follows WatchBookies; a deleted registration evicts its
    address, a changed one replaces it. Until the view is complete (at start,
    or after the watch broke) lookups of ids not resolved before go to the
    registry directly. Addresses already resolved are kept while the watch is
    broken (the registry is restarting, say): not knowing of changes is not a
    change, and a call that fails on an address forgets it (`invalidate`). The
    relist once the watch is back evicts those of bookies that left meanwhile.
    """

    def __init__(self, registry_target: str, *, resolver_enabled: bool = True, timeout_seconds: float = 5.0) -> None:
        self._channel = open_channel(registry_target, wait_for_ready=True)
        self._stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        self.resolver_enabled = resolver_enabled
        self._timeout = timeout_seconds
        self.view = BookieView()
        self._addresses: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[], None]] = []
        self._join_listeners: list[Callable[[str, str], None]] = []
        self._synced = asyncio.Event()  # a first whole snapshot arrived: the registry answers

    async def wait_synced(self) -> None:
        """Until the first whole snapshot of the registered bookies arrived,
        that is until the registry answered (it may start after us)."""
        await self._synced.wait()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every membership event (a join, leave,
        change or fresh snapshot)."""
        self._listeners.append(listener)

    def on_joined(self, listener: Callable[[str, str], None]) -> None:
        """Call `listener(bookie_id, address)` when a bookie registers (a new
        bookie, or one that restarted)."""
        self._join_listeners.append(listener)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name="bookie-directory")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        await self._channel.close()

    async def _follow(self) -> None:
        pauses = _RECONNECT.pauses()
        while True:
            try:
                async for event in self._stub.WatchBookies(registry_pb2.WatchBookiesRequest()):
                    self.view.apply(event)
                    self._on_event(event)
                    if event.type != registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT:
                        for listener in self._listeners:
                            listener()
                    pauses = _RECONNECT.pauses()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the registry went away; relist when it is back
                log.warning("bookie watch broke (%s); retrying", exc)
            self.view.reset()
            await asyncio.sleep(next(pauses))

    def _on_event(self, event: registry_pb2.WatchBookiesResponse) -> None:
        bookie_id = event.record.bookie_id
        if event.type == registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE:
            self._synced.set()
            self._addresses = {k: v for k, v in self._addresses.items() if k in self.view.records}
        elif event.type == registry_pb2.BOOKIE_EVENT_TYPE_LEFT:
            self._addresses.pop(bookie_id, None)
        elif bookie_id:
            self._addresses.pop(bookie_id, None)  # resolved again from the new record on next use
            if event.type == registry_pb2.BOOKIE_EVENT_TYPE_JOINED and self._join_listeners:
                try:
                    address = self._address_of(bookie_id, event.record)
                except NotFound:
                    return
                for listener in self._join_listeners:
                    listener(bookie_id, address)

    def _address_of(self, bookie_id: str, record: registry_pb2.BookieRecord) -> str:
        if not self.resolver_enabled:
            return legacy_address(bookie_id)
        return bookie_rpc_address(bookie_id, record.service_info)

    async def resolve(self, bookie_id: str) -> str:
        """`host:port` of the bookie's bookie-rpc endpoint. NOT_FOUND when the
        bookie is not registered or cannot be resolved."""
        if not self.resolver_enabled:
            return legacy_address(bookie_id)
        address = self._addresses.get(bookie_id)
        if address is not None:
            return address
        record = self.view.records.get(bookie_id) if self.view.complete else None
        if record is None:
            record = await self._fetch(bookie_id)
        address = self._address_of(bookie_id, record)
        self._addresses[bookie_id] = address
        return address

    def invalidate(self, bookie_id: str) -> None:
        """Forget a cached address (a call to it failed: the bookie may have moved)."""
        self._addresses.pop(bookie_id, None)

    async def _fetch(self, bookie_id: str) -> registry_pb2.BookieRecord:
        validate_bookie_id(bookie_id)
        response = await call(
            self._stub.GetBookieServiceInfo(
                registry_pb2.GetBookieServiceInfoRequest(bookie_id=bookie_id), timeout=self._timeout
            ),
            f"resolving bookie {bookie_id}",
        )
        return response.record

    async def records(self, state: int = registry_pb2.BOOKIE_STATE_ALL) -> list[registry_pb2.BookieRecord]:
        """Registered bookies in a state, from the live view when it is
        complete, else straight from the registry."""
        if self.view.complete:
            records = sorted(self.view.records.values(), key=lambda r: r.bookie_id)
            if state == registry_pb2.BOOKIE_STATE_WRITABLE:
                return [r for r in records if not r.read_only]
            if state == registry_pb2.BOOKIE_STATE_READ_ONLY:
                return [r for r in records if r.read_only]
            return records
        response = await call(
            self._stub.ListBookies(registry_pb2.ListBookiesRequest(state=state), timeout=self._timeout),
            "listing bookies from the registry",
        )
        return list(response.bookies)

    async def writable(self) -> list[str]:
        return [r.bookie_id for r in await self.records(registry_pb2.BOOKIE_STATE_WRITABLE)]


# How long a replaced channel stays open for calls already started on it.
RETIRED_CHANNEL_GRACE_SECONDS = 60.0


class BookieChannels:
    """One channel per bookie address, found through a BookieDirectory.

    A channel whose peer died keeps failing calls at once until gRPC's next
    reconnect attempt, which backs off after every failure. When the bookie
    registers again (it restarted), a channel that is not connected is
    replaced by a fresh one, so the new process is reachable the moment the
    registry lists it rather than up to one backoff later. The old channel is
    closed after a grace period, not at once, so that calls other ledgers
    started on it end on their own terms."""

    def __init__(self, directory: BookieDirectory) -> None:
        self.directory = directory
        self._channels: dict[str, grpc.aio.Channel] = {}
        # A stub per open channel: making one registers every method with the channel
        # (about 15 µs for the bookie service), too much to pay on every read.
        self._stubs: dict[grpc.aio.Channel, bookie_pb2_grpc.BookieServiceStub] = {}
        self._retired: set[grpc.aio.Channel] = set()
        self._closing: set[asyncio.Task[None]] = set()
        directory.on_joined(self._joined)

    async def stub(self, bookie_id: str) -> bookie_pb2_grpc.BookieServiceStub:
        """A stub for the bookie; NOT_FOUND when it cannot be resolved."""
        channel = await self.channel(bookie_id)
        stub = self._stubs.get(channel)
        if stub is None:
            stub = self._stubs[channel] = bookie_pb2_grpc.BookieServiceStub(channel)
        return stub

    async def channel(self, bookie_id: str) -> grpc.aio.Channel:
        """The channel to the bookie; NOT_FOUND when it cannot be resolved."""
        address = await self.directory.resolve(bookie_id)
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = open_channel(address)
        return channel

    def failed(self, bookie_id: str) -> None:
        """A call to the bookie failed: resolve its address again next time (it may have moved)."""
        self.directory.invalidate(bookie_id)

    def _joined(self, bookie_id: str, address: str) -> None:
        channel = self._channels.get(address)
        if channel is None or channel.get_state() == grpc.ChannelConnectivity.READY:
            return
        log.info("bookie %s registered again; opening a fresh channel to %s", bookie_id, address)
        del self._channels[address]
        self._stubs.pop(channel, None)
        self._retired.add(channel)
        asyncio.get_running_loop().call_later(RETIRED_CHANNEL_GRACE_SECONDS, self._close_retired, channel)

    def _close_retired(self, channel: grpc.aio.Channel) -> None:
        if channel in self._retired:
            self._retired.discard(channel)
            task = asyncio.create_task(channel.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for channel in [*self._channels.values(), *self._retired]:
            await channel.close()
        self._channels.clear()
        self._stubs.clear()
        self._retired.clear()
