"""A streaming call's server span when the call ends before its handler does:
gRPC stops iterating the handler, and the event loop closes the generator
later from a task of its own. The span must end there without OpenTelemetry
failing to detach a context ("Failed to detach context" at ERROR), and while
the handler runs it must be the current span, the caller's span its parent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.grpc._aio_server import OpenTelemetryAioServerInterceptor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from quire_common.server_tracing import StreamSafeTracingInterceptor, server_span_attributes

CALLER_TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
CALLER_SPAN_ID = 0xB7AD6B7169203331
METHOD = "/quire.gateway.v1.LedgerService/AppendEntries"


class Metadatum(NamedTuple):
    key: str
    value: str


class Context:
    """What the interceptor asks of a grpc.aio servicer context."""

    def invocation_metadata(self) -> tuple[Metadatum, ...]:
        return (
            Metadatum("traceparent", f"00-{CALLER_TRACE_ID:032x}-{CALLER_SPAN_ID:016x}-01"),
            Metadatum("user-agent", "grpc-python/1.85"),
        )

    def peer(self) -> str:
        return "ipv4:127.0.0.1:51234"


@pytest.fixture
def spans() -> tuple[trace.Tracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def answering(current_spans: list[trace.Span], answers: int = 3, closed: list[bool] | None = None) -> Any:
    """A streaming handler that notes the current span at each step, and when it is closed."""

    async def behavior(request: object, context: object) -> AsyncIterator[int]:
        try:
            for n in range(answers):
                await asyncio.sleep(0)
                current_spans.append(trace.get_current_span())
                yield n
        finally:
            if closed is not None:
                closed.append(True)

    return behavior


def traced(interceptor: OpenTelemetryAioServerInterceptor, behavior: Any) -> AsyncIterator[int]:
    stream = interceptor._intercept_aio_server_stream(behavior, SimpleNamespace(method=METHOD))
    return stream(object(), Context())  # type: ignore[no-any-return]


async def first_then_abandoned(stream: AsyncIterator[int]) -> int:
    """One answer taken in the call's task, the rest abandoned and closed from another."""

    async def call() -> int:
        return await anext(stream)

    first = await asyncio.create_task(call())
    await asyncio.create_task(stream.aclose())  # type: ignore[attr-defined]
    return first


async def test_an_abandoned_stream_ends_its_span_without_failing_to_detach(spans, caplog):
    tracer, exporter = spans
    current: list[trace.Span] = []
    closed: list[bool] = []
    with caplog.at_level(logging.ERROR):
        stream = traced(StreamSafeTracingInterceptor(tracer), answering(current, closed=closed))
        assert await first_then_abandoned(stream) == 0
    assert "Failed to detach context" not in caplog.text
    assert closed == [True]  # the handler is closed with the stream, not left to the collector
    [span] = exporter.get_finished_spans()
    assert span.name == METHOD and span.kind == trace.SpanKind.SERVER
    assert span.parent is not None and span.parent.span_id == CALLER_SPAN_ID
    assert span.context.trace_id == CALLER_TRACE_ID
    assert current[0].get_span_context().span_id == span.context.span_id  # current while the handler ran


async def test_the_stock_interceptor_fails_to_detach_there(spans, caplog):
    """The positive control: OpenTelemetry's own interceptor, in the same
    sequence, logs the error the test above looks for."""
    tracer, _ = spans
    with caplog.at_level(logging.ERROR):
        await first_then_abandoned(traced(OpenTelemetryAioServerInterceptor(tracer), answering([])))
    assert "Failed to detach context" in caplog.text


async def test_a_whole_stream_is_answered_in_order_with_nothing_left_attached(spans):
    tracer, exporter = spans
    current: list[trace.Span] = []
    before = otel_context.get_current()
    answers = [answer async for answer in traced(StreamSafeTracingInterceptor(tracer), answering(current, 4))]
    assert answers == [0, 1, 2, 3]
    assert otel_context.get_current() == before
    [span] = exporter.get_finished_spans()
    assert {s.get_span_context().span_id for s in current} == {span.context.span_id}
    assert span.attributes is not None and span.attributes["rpc.method"] == "AppendEntries"


async def test_a_handler_that_fails_records_it_on_the_span(spans):
    tracer, exporter = spans

    async def failing(request: object, context: object) -> AsyncIterator[int]:
        yield 1
        raise ValueError("broken")

    stream = traced(StreamSafeTracingInterceptor(tracer), failing)
    assert await anext(stream) == 1
    with pytest.raises(ValueError, match="broken"):
        await anext(stream)
    [span] = exporter.get_finished_spans()
    assert [event.name for event in span.events] == ["exception"]


def test_the_span_names_the_method_and_the_caller():
    context = Context()
    attributes = server_span_attributes(METHOD, dict(context.invocation_metadata()), context.peer())
    assert attributes == {
        "rpc.system": "grpc",
        "rpc.grpc.status_code": 0,
        "rpc.service": "quire.gateway.v1.LedgerService",
        "rpc.method": "AppendEntries",
        "rpc.user_agent": "grpc-python/1.85",
        "net.peer.ip": "127.0.0.1",
        "net.peer.port": "51234",
        "net.peer.name": "localhost",
    }
