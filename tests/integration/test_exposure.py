"""Exposure switches (FAULTS SEC-6): reflection, admin HTTP and /metrics
are served only as configured."""

from __future__ import annotations

import urllib.error
import urllib.request

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from quire_client.cluster import free_port
from quire_common.admin_http import start_admin_server
from quire_common.server import create_server

pytestmark = pytest.mark.integration


async def reflection_code(port: int) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        try:
            async for _ in stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])):
                pass
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize(
    ("setting", "expected"), [("true", grpc.StatusCode.OK), ("false", grpc.StatusCode.UNIMPLEMENTED)]
)
async def test_reflection_is_switchable(
    monkeypatch: pytest.MonkeyPatch, setting: str, expected: grpc.StatusCode
) -> None:
    monkeypatch.setenv("QUIRE_REFLECTION_ENABLED", setting)
    server, port, _ = create_server("127.0.0.1:0", lambda server: [])
    await server.start()
    try:
        assert await reflection_code(port) == expected
    finally:
        await server.stop(0)


async def test_reflection_answers_v1_and_v1alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    """grpc.reflection.v1 (what current tools ask) and v1alpha both list the services."""
    monkeypatch.setenv("QUIRE_REFLECTION_ENABLED", "true")
    server, port, _ = create_server("127.0.0.1:0", lambda server: [])
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for service in ("grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"):
                # v1's messages are v1alpha's, field for field: the same classes encode both.
                call = channel.stream_stream(
                    f"/{service}/ServerReflectionInfo",
                    request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                    response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
                )
                async for response in call(iter([reflection_pb2.ServerReflectionRequest(list_services="")])):
                    names = {s.name for s in response.list_services_response.service}
                    assert {"grpc.reflection.v1.ServerReflection", "grpc.health.v1.Health"} <= names
    finally:
        await server.stop(0)


def get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_admin_http_and_metrics_are_switchable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIRE_ADMIN_HTTP_ENABLED", "false")
    assert await start_admin_server("TEST_PORT", "127.0.0.1:1", free_port(), dict) is None

    monkeypatch.setenv("QUIRE_ADMIN_HTTP_ENABLED", "true")
    monkeypatch.setenv("QUIRE_METRICS_ENABLED", "false")
    admin = await start_admin_server("TEST_PORT", "127.0.0.1:1", free_port(), dict)
    assert admin is not None
    try:
        import asyncio

        assert await asyncio.to_thread(get, admin.port, "/status") == 200
        assert await asyncio.to_thread(get, admin.port, "/metrics") == 404
    finally:
        await admin.stop()
