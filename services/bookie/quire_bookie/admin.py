"""What the bookie's admin HTTP endpoint (the `http` endpoint it advertises,
served by quire_common.admin_http) shows: `/status` as JSON, and the
bookie's own counters and gauges as OpenTelemetry instruments, so they reach
`/metrics` and OTLP alike. Every one of them is defined in
`register_metrics`, in one place (the histograms of entries per group
commit, sync and add times are recorded in bookie.py); none repeats
another, and latency is only a histogram: a percentile computed here could
not be aggregated."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation

from quire_bookie.bookie import Bookie
from quire_common.telemetry import meter

_meter = meter("quire.bookie")


def status(bookie: Bookie, bookie_id: str) -> dict[str, Any]:
    info = bookie.info()
    return {
        "bookie_id": bookie_id,
        "read_only": info.read_only,
        "read_only_reason": info.read_only_reason,
        "sync": "disabled (unsafe: acknowledged adds may be lost)" if info.sync_disabled else "fsync per group commit",
        "disk": {
            "total_bytes": info.total_disk_bytes,
            "free_bytes": info.free_disk_bytes,
            "used_bytes": info.used_bytes,
        },
        "load": {
            "adds_per_second": info.adds_per_second,
            "add_bytes_per_second": info.add_bytes_per_second,
            "sync_latency_ms": info.sync_latency_ms,
            "sync_latency_p50_ms": info.sync_latency_p50_ms,
            "sync_latency_p99_ms": info.sync_latency_p99_ms,
        },
        "ledgers": bookie.ledger_count(),
    }


def register_metrics(bookie: Bookie, bookie_id: str) -> None:
    """The bookie's own counters and gauges, each labelled `bookie_id`, read
    from the bookie when the metrics are collected: on a scrape of `/metrics`
    and by the OTLP and file exporters (on their own thread, so the callbacks
    read only plain fields). Call once per process."""
    labels = {"bookie_id": bookie_id}

    def observe(read: Callable[[], float]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        return lambda _: [Observation(read(), labels)]

    counters = bookie.counters
    _meter.create_observable_counter(
        "quire.bookie.rejected_adds",
        [observe(lambda: counters.rejected_adds)],
        unit="{add}",
        description="Add requests refused before storage",
    )
    _meter.create_observable_counter(
        "quire.bookie.reads", [observe(lambda: counters.reads)], unit="{read}", description="Read requests served"
    )
    _meter.create_observable_counter(
        "quire.bookie.written",
        [observe(lambda: counters.bytes_written)],
        unit="By",
        description="Bytes of entries stored",
    )
    _meter.create_observable_counter(
        "quire.bookie.read", [observe(lambda: counters.bytes_read)], unit="By", description="Bytes of entries read"
    )
    _meter.create_observable_gauge(
        "quire.bookie.disk.total",
        [observe(lambda: bookie.disk.total_bytes)],
        unit="By",
        description="Capacity of the data directories",
    )
    _meter.create_observable_gauge(
        "quire.bookie.disk.free",
        [observe(lambda: bookie.disk.free_bytes)],
        unit="By",
        description="Free bytes of the data directories",
    )
    _meter.create_observable_gauge(
        "quire.bookie.disk.used",
        [observe(lambda: bookie.disk.used_bytes)],
        unit="By",
        description="Bytes the bookie's data takes",
    )
    _meter.create_observable_gauge(
        "quire.bookie.read_only",
        [observe(lambda: int(bookie.read_only))],
        unit="1",
        description="1 while the bookie refuses adds",
    )
    _meter.create_observable_gauge(
        "quire.bookie.sync_disabled",
        [observe(lambda: int(not bookie.settings.sync))],
        unit="1",
        description="1 when adds are acknowledged without fsync (unsafe)",
    )
    _meter.create_observable_gauge(
        "quire.bookie.ledgers",
        [observe(bookie.ledger_count)],
        unit="{ledger}",
        description="Ledgers with state on this bookie",
    )
