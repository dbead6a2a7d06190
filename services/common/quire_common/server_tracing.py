"""The server span of every call, when tracing is on: OpenTelemetry's grpc.aio
interceptor, with streamed answers traced so that an abandoned stream ends
cleanly.

OpenTelemetry's interceptor keeps the call's span current (its context
attached) for as long as a streaming handler runs, across every answer it
yields. When a call ends before its handler does (the caller cancels, the
connection closes, a deadline passes), gRPC stops iterating the handler and
the event loop closes the generator later, from a task of its own. Detaching
a context there, in another context than the one it was attached in, fails:
OpenTelemetry logs "Failed to detach context" at ERROR with a traceback, for
a call that went as it should.

Here the span of a streaming call is current only while the handler works
toward its next answer, and is let go before each answer is handed to gRPC:
nothing is attached across a yield, so closing the generator from anywhere
only ends the span. Unary calls keep OpenTelemetry's own interceptor: they
never yield. The subclass overrides one method of the package's and reads its
tracer and filter; tests/unit/test_server_tracing.py runs both against the
locked version.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import unquote

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor
from opentelemetry.instrumentation.grpc._aio_server import (
    OpenTelemetryAioServerInterceptor,
    _OpenTelemetryAioServicerContext,
)
from opentelemetry.propagate import extract
from opentelemetry.util.types import AttributeValue

StreamBehavior = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


class StreamSafeTracingInterceptor(OpenTelemetryAioServerInterceptor):
    def _intercept_aio_server_stream(
        self, behavior: StreamBehavior, handler_call_details: grpc.HandlerCallDetails
    ) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
        tracer: trace.Tracer = self._tracer
        method: str = handler_call_details.method or ""

        async def traced_stream(request_or_iterator: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            metadata = dict(context.invocation_metadata() or ())
            caller = extract(metadata)
            attributes = server_span_attributes(method, metadata, context.peer() or "")
            span = tracer.start_span(method, context=caller, kind=trace.SpanKind.SERVER, attributes=attributes)
            current = trace.set_span_in_context(span, caller)
            answers = aiter(behavior(request_or_iterator, _OpenTelemetryAioServicerContext(context, span)))
            try:
                while True:
                    token = otel_context.attach(current)
                    try:
                        answer = await anext(answers)
                    except StopAsyncIteration:
                        return
                    finally:
                        otel_context.detach(token)  # in the context it was attached in, always
                    yield answer
            except Exception as error:
                # A bare Exception is an abort, which the wrapped context records itself.
                if type(error) is not Exception:
                    span.record_exception(error)
                raise
            finally:
                # An abandoned handler is closed with this generator, before its span ends
                # (an async iterator that is not a generator has nothing to close).
                close = getattr(answers, "aclose", None)
                try:
                    if close is not None:
                        await close()
                finally:
                    span.end()

        return traced_stream


def server_span_attributes(method: str, metadata: dict[str, Any], peer: str) -> dict[str, AttributeValue]:
    """A server span's attributes, as OpenTelemetry's RPC conventions name them:
    the method and service, the caller's user agent (from the call's metadata) and
    address (its peer)."""
    attributes: dict[str, AttributeValue] = {"rpc.system": "grpc", "rpc.grpc.status_code": grpc.StatusCode.OK.value[0]}
    service, _, name = method.lstrip("/").partition("/")
    if name:
        attributes["rpc.service"], attributes["rpc.method"] = service, name
    user_agent = metadata.get("user-agent")
    if user_agent:
        attributes["rpc.user_agent"] = user_agent
    # A peer reads "ipv4:127.0.0.1:57284" or "ipv6:[::1]:57284" (the first of several when proxied).
    kind, _, address = peer.split(",")[0].partition(":")
    if kind in ("ipv4", "ipv6") and ":" in address:
        ip, port = address.rsplit(":", 1)
        attributes["net.peer.ip"], attributes["net.peer.port"] = unquote(ip), port
        if ip in ("[::1]", "127.0.0.1"):
            attributes["net.peer.name"] = "localhost"
    return attributes


def tracing_interceptor() -> StreamSafeTracingInterceptor:
    """The interceptor every server runs while tracing is on, with the tracer
    OpenTelemetry's own would have."""
    stock = aio_server_interceptor()
    return StreamSafeTracingInterceptor(stock._tracer, filter_=stock._filter)
