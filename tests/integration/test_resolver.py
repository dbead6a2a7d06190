"""The BookieId → address resolver (BP-41) against a real registry server
(in-process, port 0) on a real etcd."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from quire_api.errors import InvalidArgument, NotFound
from quire_client.cluster import free_port
from quire_common.bookie_resolver import BookieChannels, BookieDirectory
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2

pytestmark = pytest.mark.integration


@pytest.fixture
async def directory(registry_server):
    _, target = registry_server
    bookies = BookieDirectory(target)
    bookies.start()
    try:
        yield bookies
    finally:
        await bookies.close()


def rpc_at(host: str, port: int) -> common_pb2.BookieServiceInfo:
    info = common_pb2.BookieServiceInfo()
    info.endpoints.add(id="http", host=host, port=9999, protocol="http")
    info.endpoints.add(id="rpc", host=host, port=port, protocol="bookie-rpc")
    return info


async def eventually(predicate, within_seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_seconds
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_resolves_the_bookie_rpc_endpoint_not_the_first_endpoint(registry_server, directory):
    registry, _ = registry_server
    await registry.register_bookie("bookie-1", False, rpc_at("10.0.0.1", 4000), 5)
    assert await directory.resolve("bookie-1") == "10.0.0.1:4000"


async def test_unregistration_evicts_and_an_address_change_re_resolves(registry_server, directory):
    registry, _ = registry_server
    registration = await registry.register_bookie("bookie-2", False, rpc_at("10.0.0.2", 4000), 5)
    await eventually(lambda: "bookie-2" in directory.view.records)
    assert await directory.resolve("bookie-2") == "10.0.0.2:4000"

    await registry.unregister_bookie(registration)
    await eventually(lambda: "bookie-2" not in directory.view.records)
    with pytest.raises(NotFound):
        await directory.resolve("bookie-2")

    # Same id, new address: the ledgers naming bookie-2 need no rewrite.
    moved = await registry.register_bookie("bookie-2", False, rpc_at("10.9.9.9", 5000), 5)
    await eventually(lambda: "bookie-2" in directory.view.records)
    assert await directory.resolve("bookie-2") == "10.9.9.9:5000"

    # A changed record on a live registration replaces the cached address.
    await registry.heartbeat(moved, False, rpc_at("10.9.9.9", 6000))
    await eventually(lambda: directory.view.records["bookie-2"].service_info == rpc_at("10.9.9.9", 6000))
    assert await directory.resolve("bookie-2") == "10.9.9.9:6000"
    await registry.unregister_bookie(moved)


async def test_empty_records_resolve_from_host_port_ids_only(registry_server, directory):
    registry, _ = registry_server
    await registry.register_bookie("10.0.0.3:3181", False, common_pb2.BookieServiceInfo(), 5)
    await registry.register_bookie("opaque-bookie", False, common_pb2.BookieServiceInfo(), 5)
    await eventually(lambda: {"10.0.0.3:3181", "opaque-bookie"} <= directory.view.records.keys())
    assert await directory.resolve("10.0.0.3:3181") == "10.0.0.3:3181"
    with pytest.raises(NotFound, match="cannot be resolved"):
        await directory.resolve("opaque-bookie")


async def test_lookups_before_the_view_is_complete_ask_the_registry(registry_server):
    registry, target = registry_server
    await registry.register_bookie("bookie-4", False, rpc_at("10.0.0.4", 4000), 5)
    unstarted = BookieDirectory(target)  # no watch: every lookup goes to the registry
    try:
        assert await unstarted.resolve("bookie-4") == "10.0.0.4:4000"
        assert "bookie-4" in await unstarted.writable()
        with pytest.raises(NotFound):
            await unstarted.resolve("never-registered")
        with pytest.raises(InvalidArgument):
            await unstarted.resolve("readonly")
    finally:
        await unstarted.close()


async def test_disabled_resolver_parses_host_port_only(registry_server):
    _, target = registry_server
    legacy = BookieDirectory(target, resolver_enabled=False)
    try:
        assert await legacy.resolve("10.0.0.5:3181") == "10.0.0.5:3181"
        with pytest.raises(NotFound, match="resolver is disabled"):
            await legacy.resolve("opaque-bookie")
        with pytest.raises(InvalidArgument):
            await legacy.resolve("bad id")
    finally:
        await legacy.close()


class _AnsweringBookie(bookie_pb2_grpc.BookieServiceServicer):
    async def GetBookieInfo(self, request, context):  # type: ignore[no-untyped-def]
        return bookie_pb2.GetBookieInfoResponse(free_disk_bytes=1, total_disk_bytes=2)


async def test_a_bookie_that_registers_again_is_reached_at_once(registry_server, directory):
    """While a bookie is down, calls to it fail and gRPC's reconnect backoff
    grows (to 2 s); its next registration must make calls reach the new
    process at once."""
    registry, _ = registry_server
    channels = BookieChannels(directory)
    port = free_port()
    registration = await registry.register_bookie("bookie-back", False, rpc_at("127.0.0.1", port), 5)
    await eventually(lambda: "bookie-back" in directory.view.records)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 3
    while loop.time() < deadline:  # nothing listens: every call fails and the backoff grows
        with pytest.raises(grpc.aio.AioRpcError):
            stub = await channels.stub("bookie-back")
            await stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest(), timeout=0.5)
        await asyncio.sleep(0.05)
    backing_off = await channels.stub("bookie-back")
    assert await channels.stub("bookie-back") is backing_off  # one stub per channel, not one per call
    await registry.unregister_bookie(registration)
    await eventually(lambda: "bookie-back" not in directory.view.records)

    server = grpc.aio.server()
    bookie_pb2_grpc.add_BookieServiceServicer_to_server(_AnsweringBookie(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    try:
        await registry.register_bookie("bookie-back", False, rpc_at("127.0.0.1", port), 5)
        await eventually(lambda: "bookie-back" in directory.view.records)
        stub = await channels.stub("bookie-back")
        assert stub is not backing_off  # the fresh channel's own
        response = await stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest(), timeout=0.5)
        assert response.total_disk_bytes == 2
    finally:
        await channels.close()
        await server.stop(None)
