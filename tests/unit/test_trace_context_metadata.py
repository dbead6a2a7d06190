"""A relayed AppendEntries session carries its caller's trace context in its
metadata (quire_common.channels.trace_context_metadata): service channels
leave OpenTelemetry's bidirectional-stream interceptor out, which used to."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider

from quire_common import channels


def test_the_current_span_goes_as_a_w3c_traceparent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channels, "tracing_enabled", lambda: True)
    with TracerProvider().get_tracer("relay").start_as_current_span("append") as span:
        metadata = dict(channels.trace_context_metadata())
    context = span.get_span_context()
    version, trace_id, span_id, _flags = metadata["traceparent"].split("-")
    assert (version, trace_id, span_id) == ("00", f"{context.trace_id:032x}", f"{context.span_id:016x}")


def test_nothing_is_sent_with_tracing_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channels, "tracing_enabled", lambda: False)
    with TracerProvider().get_tracer("relay").start_as_current_span("append"):
        assert channels.trace_context_metadata() == ()
