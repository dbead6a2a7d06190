"""Servers serve their methods through generic handlers only
(quire_common.server): grpc waits on one pending request per method
registered one by one, for every call it accepts, so none is registered;
the generic handlers added with them serve every method."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import quire_common.server
from quire_common.server import create_server
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc


class OneMethodLedgers(ledger_pb2_grpc.LedgerServiceServicer):
    async def ReadEntry(
        self, request: ledger_pb2.ReadEntryRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.ReadEntryResponse:
        return ledger_pb2.ReadEntryResponse(entry=ledger_pb2.Entry(entry_id=request.entry_id, payload=b"found"))


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The services grpc is asked to register method by method."""
    services: list[str] = []
    register_methods = grpc.aio._server.Server.add_registered_method_handlers

    def recording(self: grpc.aio.Server, service_name: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        services.append(service_name)
        register_methods(self, service_name, handlers)

    monkeypatch.setattr(grpc.aio._server.Server, "add_registered_method_handlers", recording)
    return services


async def serve_and_call() -> None:
    """Serve LedgerService and health from a server made by create_server, and call both."""

    def register(server: grpc.aio.Server) -> list[str]:
        ledger_pb2_grpc.add_LedgerServiceServicer_to_server(OneMethodLedgers(), server)
        return ["quire.gateway.v1.LedgerService"]

    server, port, _ = create_server("127.0.0.1:0", register)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            answer = await ledger_pb2_grpc.LedgerServiceStub(channel).ReadEntry(
                ledger_pb2.ReadEntryRequest(entry_id=7), timeout=30
            )
            assert (answer.entry.entry_id, answer.entry.payload) == (7, b"found")
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await server.stop(None)


async def test_methods_are_served_without_registering_any(registered: list[str]) -> None:
    await serve_and_call()
    assert registered == []


async def test_control_the_generated_code_registers_every_service(
    registered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Positive control: left alone, the generated add_*_to_server
    functions register their methods, and the test above sees it."""
    monkeypatch.setattr(quire_common.server, "_serve_by_generic_handlers_only", lambda server: None)
    await serve_and_call()
    assert "quire.gateway.v1.LedgerService" in registered
    assert "grpc.health.v1.Health" in registered
