"""The pure parts of bookie discovery: the watch-fed view, the legacy
endpoint rule, and the registry's event diffing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from quire_api.bookie_addresses import bookie_rpc_address, effective_service_info, legacy_address
from quire_api.errors import NotFound
from quire_common.bookie_resolver import BookieDirectory, BookieView
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2
from quire_registry.bookies import bookie_events, relist_events
from quire_registry.keys import Keys
from quire_registry.store import WatchEvent

R = registry_pb2


def event(kind: int, bookie_id: str = "", read_only: bool = False) -> registry_pb2.WatchBookiesResponse:
    return R.WatchBookiesResponse(type=kind, record=R.BookieRecord(bookie_id=bookie_id, read_only=read_only))


def test_a_snapshot_replaces_the_whole_view_at_its_end():
    view = BookieView()
    for e in (event(R.BOOKIE_EVENT_TYPE_SNAPSHOT, "a"), event(R.BOOKIE_EVENT_TYPE_SNAPSHOT, "b", True)):
        view.apply(e)
    assert not view.complete and view.records == {}
    view.apply(event(R.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE))
    assert view.complete and view.writable() == ["a"]

    view.reset()  # the watch broke; a new snapshot without "a" arrives
    view.apply(event(R.BOOKIE_EVENT_TYPE_SNAPSHOT, "c"))
    assert set(view.records) == {"a", "b"}  # unchanged until the snapshot is whole
    view.apply(event(R.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE))
    assert set(view.records) == {"c"}


def test_joins_changes_and_leaves():
    view = BookieView()
    view.apply(event(R.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE))
    view.apply(event(R.BOOKIE_EVENT_TYPE_JOINED, "a"))
    view.apply(event(R.BOOKIE_EVENT_TYPE_CHANGED, "a", True))
    assert view.writable() == [] and view.records["a"].read_only
    view.apply(event(R.BOOKIE_EVENT_TYPE_LEFT, "a"))
    assert view.records == {}


def test_legacy_endpoint_rule():
    (endpoint,) = effective_service_info("host-1:3181", common_pb2.BookieServiceInfo()).endpoints
    assert (endpoint.host, endpoint.port, endpoint.protocol) == ("host-1", 3181, "bookie-rpc")
    with pytest.raises(NotFound, match="cannot be resolved"):
        effective_service_info("bookie-0", common_pb2.BookieServiceInfo())
    only_http = common_pb2.BookieServiceInfo(endpoints=[common_pb2.Endpoint(host="h", port=1, protocol="http")])
    with pytest.raises(NotFound, match="no bookie-rpc endpoint"):
        bookie_rpc_address("bookie-0", only_http)
    assert legacy_address("10.0.0.1:3181") == "10.0.0.1:3181"
    with pytest.raises(NotFound):
        legacy_address("bookie-0")


KEYS = Keys("c")
INFO = common_pb2.BookieServiceInfo(endpoints=[common_pb2.Endpoint(host="h", port=1, protocol="bookie-rpc")])


def test_a_move_between_states_is_one_change_not_a_leave():
    live: dict[str, registry_pb2.BookieRecord] = {}
    joined = bookie_events(KEYS, live, [WatchEvent(KEYS.writable_bookie("b"), INFO.SerializeToString(), 5)])
    assert [(k, r.bookie_id) for k, r in joined] == [(R.BOOKIE_EVENT_TYPE_JOINED, "b")]
    moved = bookie_events(
        KEYS,
        live,
        [
            WatchEvent(KEYS.writable_bookie("b"), None, 6),
            WatchEvent(KEYS.readonly_bookie("b"), INFO.SerializeToString(), 6),
        ],
    )
    assert [(k, r.bookie_id, r.read_only) for k, r in moved] == [(R.BOOKIE_EVENT_TYPE_CHANGED, "b", True)]
    left = bookie_events(KEYS, live, [WatchEvent(KEYS.readonly_bookie("b"), None, 7)])
    assert [(k, r.bookie_id) for k, r in left] == [(R.BOOKIE_EVENT_TYPE_LEFT, "b")] and live == {}


def test_relist_reports_exactly_the_difference():
    a = R.BookieRecord(bookie_id="a", version=1)
    b = R.BookieRecord(bookie_id="b", version=1)
    live = {"a": a, "b": b}
    b2 = R.BookieRecord(bookie_id="b", version=9, read_only=True)
    c = R.BookieRecord(bookie_id="c", version=9)
    changes = relist_events(live, [b2, c])
    assert [(k, r.bookie_id) for k, r in changes] == [
        (R.BOOKIE_EVENT_TYPE_LEFT, "a"),
        (R.BOOKIE_EVENT_TYPE_CHANGED, "b"),
        (R.BOOKIE_EVENT_TYPE_JOINED, "c"),
    ]
    assert live == {"b": b2, "c": c}
    assert relist_events(live, [b2, c]) == []


class _RegistryThatGoesAway:
    """A registry stub: the watch sends a snapshot of one bookie, then breaks once
    `gone` is set, and every later call fails as a dead registry's would."""

    def __init__(self, record: registry_pb2.BookieRecord) -> None:
        self.record = record
        self.gone = asyncio.Event()
        self.listed = asyncio.Event()  # the first snapshot has been taken in
        self.broken = asyncio.Event()  # the watch has broken
        self.watches = 0

    def WatchBookies(
        self, request: registry_pb2.WatchBookiesRequest
    ) -> AsyncIterator[registry_pb2.WatchBookiesResponse]:
        self.watches += 1
        return self._stream(first=self.watches == 1)

    async def _stream(self, first: bool) -> AsyncIterator[registry_pb2.WatchBookiesResponse]:
        if first:
            yield R.WatchBookiesResponse(type=R.BOOKIE_EVENT_TYPE_SNAPSHOT, record=self.record)
            yield R.WatchBookiesResponse(type=R.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE)
            self.listed.set()  # runs once the directory asks for more: the snapshot is applied
            await self.gone.wait()
        self.broken.set()
        raise ConnectionError("the registry went away")

    def GetBookieServiceInfo(self, request: registry_pb2.GetBookieServiceInfoRequest, timeout: float) -> object:
        raise AssertionError("a resolved address was looked up again while the registry was away")


async def test_resolved_addresses_survive_a_broken_watch():
    # NET-8: with the registry down, appends to bookies already in use go on.
    info = common_pb2.BookieServiceInfo()
    info.endpoints.add(id="rpc", host="10.0.0.7", port=3181, protocol="bookie-rpc")
    registry = _RegistryThatGoesAway(R.BookieRecord(bookie_id="bookie-a", service_info=info))
    directory = BookieDirectory("127.0.0.1:1")
    directory._stub = registry  # type: ignore[assignment]
    directory.start()
    try:
        await asyncio.wait_for(registry.listed.wait(), 10)
        assert directory.view.complete
        assert await directory.resolve("bookie-a") == "10.0.0.7:3181"
        registry.gone.set()
        await asyncio.wait_for(registry.broken.wait(), 10)
        await asyncio.sleep(0)  # the directory notes the break
        assert not directory.view.complete
        assert await directory.resolve("bookie-a") == "10.0.0.7:3181"
    finally:
        await directory.close()
