"""OpenTelemetry, set up once per process before anything else runs.

Tracing is configured by the standard OTEL_* variables plus QUIRE_TELEMETRY_DIR:
when that directory is set, finished spans are appended as JSON lines to
`<dir>/<service>-<pid>-spans.jsonl` (one file per process, so several
bookies never interleave their lines). With no exporter configured (or
OTEL_SDK_DISABLED=true) the API's no-op tracer is used, and context from
incoming calls is still passed on to outgoing ones.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

_provider: TracerProvider | None = None


class JsonLinesSpanExporter(SpanExporter):
    """Appends each finished span as one JSON object per line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = []
        for span in spans:
            context = span.get_span_context()
            if context is None:
                continue
            lines.append(
                json.dumps(
                    {
                        "name": span.name,
                        "trace_id": f"{context.trace_id:032x}",
                        "span_id": f"{context.span_id:016x}",
                        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
                        "kind": span.kind.name,
                        "start_unix_nano": span.start_time,
                        "end_unix_nano": span.end_time,
                        "status": span.status.status_code.name,
                        "service": span.resource.attributes.get("service.name"),
                        "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
                    }
                )
            )
        with self._lock:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def setup_telemetry(service: str) -> None:
    """Install the tracer provider for this process (idempotent)."""
    global _provider
    if _provider is not None or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    telemetry_dir = os.environ.get("QUIRE_TELEMETRY_DIR")
    if not telemetry_dir:
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    path = Path(telemetry_dir) / f"{service}-{os.getpid()}-spans.jsonl"
    provider.add_span_processor(BatchSpanProcessor(JsonLinesSpanExporter(path), schedule_delay_millis=500))
    trace.set_tracer_provider(provider)
    _provider = provider
    log.info("exporting spans to %s", path)


def shutdown_telemetry() -> None:
    """Flush and stop exporters; call on the way out."""
    if _provider is not None:
        _provider.shutdown()


def tracing_enabled() -> bool:
    """Whether this process exports spans. Without it the gRPC tracing
    interceptors are left out: they cost a noticeable share of every call
    and would only feed the no-op tracer."""
    return _provider is not None


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)
