"""A unary call behind the guard (quire_common.security.guard_handler),
on a real grpc.aio server: the guard reads its one message itself, after
the caller's check, so whatever can go wrong with that message is answered
there: a call that ends without one, one that does not decode, one that does
not come within the first-message bound."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from quire_common.call_limits import RequestIdle
from quire_common.security import guard_handler
from quire_common.server import create_server
from quire_proto.gateway.v1 import ledger_pb2

METHOD = "/quire.test.v1.Guarded/Echo"
IDLE_SECONDS = 0.5


async def echo(request: ledger_pb2.ReadEntryRequest, context: grpc.aio.ServicerContext) -> ledger_pb2.ReadEntryRequest:
    return request


@pytest.fixture
async def target() -> AsyncIterator[str]:
    handler = grpc.unary_unary_rpc_method_handler(
        echo,
        request_deserializer=ledger_pb2.ReadEntryRequest.FromString,
        response_serializer=ledger_pb2.ReadEntryRequest.SerializeToString,
    )
    guarded = guard_handler(handler, lambda context: None, idle=RequestIdle(IDLE_SECONDS, 0.0))

    def register(server: grpc.aio.Server) -> list[str]:
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("quire.test.v1.Guarded", {"Echo": guarded}),)
        )
        return []

    server, port, _ = create_server("127.0.0.1:0", register)
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def call_with(target: str, messages: AsyncIterator[bytes]) -> tuple[grpc.StatusCode, str, bytes | None]:
    """A call of METHOD sending `messages` as they come (a unary call's client sends one)."""
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.stream_unary(METHOD, request_serializer=None, response_deserializer=None)
        try:
            response = await call(messages, timeout=30)
        except grpc.aio.AioRpcError as error:
            return error.code(), error.details() or "", None
        return grpc.StatusCode.OK, "", response


async def sent(*messages: bytes, then_wait: float = 0.0) -> AsyncIterator[bytes]:
    for message in messages:
        yield message
    await asyncio.sleep(then_wait)


async def test_the_one_message_is_read_after_the_check_and_served(target: str) -> None:
    request = ledger_pb2.ReadEntryRequest(entry_id=7).SerializeToString()
    assert await call_with(target, sent(request)) == (grpc.StatusCode.OK, "", request)


async def test_a_call_that_ends_without_its_message_is_invalid(target: str) -> None:
    code, details, _ = await call_with(target, sent())
    assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, "the call ended without its request message")


async def test_a_message_that_does_not_decode_is_invalid_not_internal(target: str) -> None:
    code, details, _ = await call_with(target, sent(b"\x0a\xff\xff\xff\xff\x0f"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("malformed request message")


async def test_a_message_that_does_not_come_in_time_ends_the_call(target: str) -> None:
    code, details, _ = await call_with(target, sent(then_wait=60))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "QUIRE_GATEWAY_REQUEST_IDLE_SECONDS" in details
