"""The RED metrics the error-mapping interceptor records (quire_common.rpc_metrics),
on a real grpc.aio server: one sample per call, however the call ends, with the
method, the numeric status code and the Quire error's reason."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from quire_api.errors import NotFound, Reason
from quire_common.server import ErrorMappingInterceptor
from tests.waiting import EVENT_DEADLINE_SECONDS

SERVICE = "quire.test.v1.Probe"
Outcome = tuple[str, int, str]  # (method, numeric status code, reason)


async def ok(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


async def missing(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    raise NotFound("no such ledger", Reason.LEDGER_NOT_FOUND)


async def broken(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    raise RuntimeError("a bug")


async def refused(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not you")
    raise AssertionError("unreachable")


async def slow(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    await asyncio.sleep(60)
    return request


async def echo(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request


async def endless(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    while True:
        yield request
        await asyncio.sleep(0.01)


HANDLERS = {
    "Ok": grpc.unary_unary_rpc_method_handler(ok),
    "Missing": grpc.unary_unary_rpc_method_handler(missing),
    "Broken": grpc.unary_unary_rpc_method_handler(broken),
    "Refused": grpc.unary_unary_rpc_method_handler(refused),
    "Slow": grpc.unary_unary_rpc_method_handler(slow),
    "Echo": grpc.stream_stream_rpc_method_handler(echo),
    "Endless": grpc.unary_stream_rpc_method_handler(endless),
}


def recorded(reader: InMemoryMetricReader) -> Counter[Outcome]:
    calls: Counter[Outcome] = Counter()
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "rpc.server.duration":
                    continue
                for point in metric.data.data_points:
                    assert isinstance(point, HistogramDataPoint)
                    a = point.attributes or {}
                    assert (a["rpc.system"], a["rpc.service"]) == ("grpc", SERVICE)
                    outcome = (
                        str(a["rpc.method"]),
                        int(a["rpc.grpc.status_code"]),
                        str(a.get("quire.error.reason", "")),
                    )  # type: ignore[call-overload]
                    calls[outcome] += point.count
    return calls


@pytest.fixture
def provider() -> Iterator[tuple[MeterProvider, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


async def test_each_call_is_recorded_once_with_its_method_code_and_reason(provider):
    meter_provider, reader = provider
    server = grpc.aio.server(interceptors=[ErrorMappingInterceptor(meter_provider.get_meter("test"))])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, HANDLERS),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:

            def unary(name: str) -> grpc.aio.UnaryUnaryMultiCallable:
                return channel.unary_unary(f"/{SERVICE}/{name}")

            for _ in range(3):
                assert await unary("Ok")(b"x") == b"x"
            for name, code in [
                ("Missing", grpc.StatusCode.NOT_FOUND),
                ("Missing", grpc.StatusCode.NOT_FOUND),
                ("Broken", grpc.StatusCode.INTERNAL),
                ("Refused", grpc.StatusCode.PERMISSION_DENIED),
            ]:
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await unary(name)(b"x")
                assert raised.value.code() == code
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await unary("Slow")(b"x", timeout=0.5)
            assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

            # A stream of five messages each way is one call.
            replies = [r async for r in channel.stream_stream(f"/{SERVICE}/Echo")(iter([b"m"] * 5))]
            assert replies == [b"m"] * 5
            # A stream the client gives up on after two messages: one CANCELLED call.
            endless_call = channel.unary_stream(f"/{SERVICE}/Endless")(b"e")
            assert [await endless_call.read(), await endless_call.read()] == [b"e", b"e"]
            endless_call.cancel()

        expected = Counter(
            {
                ("Ok", 0, ""): 3,
                ("Missing", 5, Reason.LEDGER_NOT_FOUND.value): 2,
                ("Broken", 13, ""): 1,
                ("Refused", 7, ""): 1,
                ("Slow", 4, ""): 1,
                ("Echo", 0, ""): 1,
                ("Endless", 1, ""): 1,
            }
        )
        # The server learns of the deadline and the cancellation on its own time.
        deadline = time.monotonic() + EVENT_DEADLINE_SECONDS
        while True:
            seen = recorded(reader)
            if seen == expected or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert seen == expected
    finally:
        await server.stop(None)
