"""OpenTelemetry, set up once per process before anything else runs.

Configured by the standard OTEL_* variables and a few QUIRE_TELEMETRY_*
settings (docs/telemetry.md lists them):

- traces and metrics go to OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the
  per-signal variant) is set;
- with `QUIRE_TELEMETRY_DIR`, finished spans, metric points and samples
  (`record_sample`, e.g. the bookie's disk figures) are appended as JSON lines
  to files in that directory, one set per process, rotated by size with a
  bounded total: the input of the telemetry stage;
- metrics are also readable as Prometheus text (`prometheus_text()`), which
  each service's admin HTTP endpoint serves.

`OTEL_SDK_DISABLED=true` turns all of it off: the API's no-op tracer and
meter are used, which cost next to nothing, and trace context from incoming
calls is still passed on to outgoing ones.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    NumberDataPoint,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from quire_common.config import TRUE_WORDS
from quire_common.deferred_histogram import DeferredHistogram, deferred_histogram
from quire_common.settings import TelemetryEnv

log = logging.getLogger(__name__)

_configured = False
_tracer_provider: TracerProvider | None = None
_meter_provider: MeterProvider | None = None
_samples: RotatingJsonLines | None = None
_service = ""
_instance = ""  # e.g. the bookie's BookieId, once the service knows it


def set_instance(instance_id: str) -> None:
    """Name this process's instance (a bookie's BookieId) in every record
    written from now on, so the telemetry stage can tell bookies apart."""
    global _instance
    _instance = instance_id


class RotatingJsonLines:
    """Appends JSON lines to `<dir>/<stem>.<n>.jsonl`. Past `max_file_bytes` it
    starts the next file; past `max_total_bytes` over its files it deletes the
    oldest, so a long run cannot fill the disk. Thread-safe."""

    def __init__(self, directory: Path, stem: str, max_file_bytes: int, max_total_bytes: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._directory, self._stem = directory, stem
        self._max_file_bytes, self._max_total_bytes = max_file_bytes, max(max_total_bytes, max_file_bytes)
        self._lock = threading.Lock()
        self._files: list[Path] = []
        self._sequence = 0
        self._handle = self._open_next()

    def _open_next(self):  # type: ignore[no-untyped-def]
        self._sequence += 1
        path = self._directory / f"{self._stem}.{self._sequence:06d}.jsonl"
        self._files.append(path)
        self._written = 0
        return path.open("a", encoding="utf-8")

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        if not records:
            return
        text = "".join(json.dumps(record, default=str) + "\n" for record in records)
        with self._lock:
            if self._handle.closed:
                return
            if self._written and self._written + len(text) > self._max_file_bytes:
                self._handle.close()
                self._handle = self._open_next()
                self._prune()
            self._handle.write(text)
            self._handle.flush()
            self._written += len(text)

    def _prune(self) -> None:
        while len(self._files) > 1 and sum(_size(p) for p in self._files) > self._max_total_bytes:
            oldest = self._files.pop(0)
            oldest.unlink(missing_ok=True)

    @property
    def files(self) -> list[Path]:
        return list(self._files)

    def close(self) -> None:
        with self._lock:
            self._handle.close()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


class JsonLinesSpanExporter(SpanExporter):
    """Each finished span as one JSON object per line (`"record": "span"`)."""

    def __init__(self, sink: RotatingJsonLines) -> None:
        self._sink = sink

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        records = []
        for span in spans:
            context = span.get_span_context()
            if context is None:
                continue
            records.append(
                {
                    "record": "span",
                    "name": span.name,
                    "trace_id": f"{context.trace_id:032x}",
                    "span_id": f"{context.span_id:016x}",
                    "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
                    "kind": span.kind.name,
                    "start_unix_nano": span.start_time,
                    "end_unix_nano": span.end_time,
                    "status": span.status.status_code.name,
                    "service": span.resource.attributes.get("service.name"),
                    "instance": _instance or None,
                    "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
                    "links": [
                        {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
                        for link in span.links
                    ],
                }
            )
        self._sink.write(records)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._sink.close()


class JsonLinesMetricExporter(MetricExporter):
    """Each metric point as one JSON line (`"record": "metric"`): sums and
    gauges with their value, histograms with count, sum, bounds and counts."""

    def __init__(self, sink: RotatingJsonLines) -> None:
        super().__init__()
        self._sink = sink

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        records = []
        for resource_metrics in metrics_data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    for point in metric.data.data_points:
                        record: dict[str, Any] = {
                            "record": "metric",
                            "service": _service,
                            "instance": _instance or None,
                            "name": metric.name,
                            "unit": metric.unit,
                            "time_unix_nano": point.time_unix_nano,
                            "attributes": dict(point.attributes or {}),
                        }
                        if isinstance(point, HistogramDataPoint):
                            record |= {
                                "count": point.count,
                                "sum": point.sum,
                                "bounds": list(point.explicit_bounds),
                                "bucket_counts": list(point.bucket_counts),
                            }
                        elif isinstance(point, NumberDataPoint):
                            record["value"] = point.value
                        records.append(record)
        self._sink.write(records)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._sink.close()


def _otlp_configured(signal: str) -> bool:
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
    )


def setup_telemetry(service: str, settings: TelemetryEnv) -> None:
    """Install the tracer and meter providers for this process (idempotent).
    OTEL_SDK_DISABLED and OTEL_EXPORTER_OTLP_* are OpenTelemetry's own variables."""
    global _tracer_provider, _meter_provider, _samples, _service, _configured
    if _configured or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() in TRUE_WORDS:
        return
    _service = service
    resource = Resource.create({"service.name": service})
    directory = settings.directory
    file_bytes, total_bytes = settings.file_max_bytes, settings.max_total_bytes

    def sink(kind: str) -> RotatingJsonLines:
        assert directory
        return RotatingJsonLines(Path(directory), f"{service}-{os.getpid()}-{kind}", file_bytes, total_bytes)

    export_traces = bool(directory) or _otlp_configured("TRACES")
    # No exporter, no provider: the API's no-op tracer stays, and
    # tracing_enabled() keeps the gRPC tracing interceptors out.
    tracer_provider = TracerProvider(resource=resource) if export_traces else None
    readers: list[MetricReader] = []
    interval_ms = settings.metrics_interval_seconds * 1000
    if directory:
        assert tracer_provider is not None
        tracer_provider.add_span_processor(
            BatchSpanProcessor(JsonLinesSpanExporter(sink("spans")), schedule_delay_millis=500)
        )
        readers.append(
            PeriodicExportingMetricReader(JsonLinesMetricExporter(sink("metrics")), export_interval_millis=interval_ms)
        )
        _samples = sink("samples")
    if tracer_provider is not None and _otlp_configured("TRACES"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if _otlp_configured("METRICS"):
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=interval_ms))
    if settings.prometheus:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader())
    if tracer_provider is not None:
        trace.set_tracer_provider(tracer_provider)
        _tracer_provider = tracer_provider
    _configured = True
    if readers:
        _meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        metrics.set_meter_provider(_meter_provider)
    if directory:
        log.info("writing telemetry to %s", directory)


def record_sample(record: str, **fields: Any) -> None:
    """Append one sample (e.g. `bookie_info` with free and total bytes) to the
    telemetry files, if they are configured."""
    if _samples is not None:
        _samples.write(
            [
                {"record": record, "service": _service, "instance": _instance or None, "time_unix_nano": time.time_ns()}
                | fields
            ]
        )


def prometheus_text() -> bytes:
    """This process's metrics in the Prometheus text format."""
    from prometheus_client import REGISTRY, generate_latest

    return bytes(generate_latest(REGISTRY))


def shutdown_telemetry() -> None:
    """Flush and stop exporters; call on the way out."""
    if _tracer_provider is not None:
        _tracer_provider.shutdown()
    if _meter_provider is not None:
        _meter_provider.shutdown()
    if _samples is not None:
        _samples.close()


def tracing_enabled() -> bool:
    """Whether this process exports spans. Without it the gRPC tracing
    interceptors are left out: they cost a noticeable share of every call
    and would only feed the no-op tracer."""
    return _tracer_provider is not None


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


# A batch span links at most this many requests besides its parent.
_MAX_BATCH_LINKS = 32


def current_span_context() -> trace.SpanContext | None:
    """The active span's context while tracing (None otherwise): what work
    done later on this request's behalf, in another task, is attributed to."""
    if _tracer_provider is None:
        return None
    span_context = trace.get_current_span().get_span_context()
    return span_context if span_context.is_valid else None


def _batch_parent(origins: Sequence[trace.SpanContext | None]) -> tuple[otel_context.Context, list[trace.Link]]:
    distinct: list[trace.SpanContext] = []
    seen: set[tuple[int, int]] = set()  # SpanContext itself is not hashable
    for origin in origins:
        if origin is not None and (origin.trace_id, origin.span_id) not in seen:
            seen.add((origin.trace_id, origin.span_id))
            distinct.append(origin)
    parent = trace.set_span_in_context(trace.NonRecordingSpan(distinct[0])) if distinct else otel_context.Context()
    return parent, [trace.Link(origin) for origin in distinct[1 : 1 + _MAX_BATCH_LINKS]]


@contextmanager
def batch_span(
    tracer_: trace.Tracer, name: str, origins: Sequence[trace.SpanContext | None], attributes: dict[str, Any]
) -> Iterator[trace.Span]:
    """A span for one piece of work done for several requests (a batch of
    entries from many adds): a child of the first request's span, linked to
    the others. Not the context of whichever task happens to run it: a
    background task keeps the context of the request that started it."""
    parent, links = _batch_parent(origins)
    with tracer_.start_as_current_span(name, context=parent, links=links, attributes=attributes) as span:
        yield span


def start_batch_span(
    tracer_: trace.Tracer, name: str, origins: Sequence[trace.SpanContext | None], attributes: dict[str, Any]
) -> trace.Span:
    """`batch_span` for work that ends in a callback: started now, ended by the caller."""
    parent, links = _batch_parent(origins)
    return tracer_.start_span(name, context=parent, links=links, attributes=attributes)


def meter(name: str) -> metrics.Meter:
    return metrics.get_meter(name)


# Every duration histogram's bucket upper bounds, in seconds: from a fast
# synced write (well under a millisecond on NVMe) to the slowest call a
# client waits for. Shared so that a dashboard or alert can sum and compare
# histograms across services, and set nowhere else.
DURATION_BUCKETS_SECONDS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


def duration_histogram(meter_: metrics.Meter, name: str, description: str) -> DeferredHistogram:
    """A histogram of durations in seconds (record seconds), with the shared
    buckets; Prometheus shows it as `<name>_seconds_bucket/_sum/_count`. Its
    samples reach the SDK off the path that takes them (quire_common.deferred_histogram)."""
    return deferred_histogram(meter_, name, "s", description, DURATION_BUCKETS_SECONDS)
