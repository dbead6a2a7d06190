"""What the bookie's admin HTTP endpoint (the `http` endpoint it advertises,
served by quire_common.admin_http) shows: `/status` as JSON, and the
bookie's own counters and gauges in Prometheus text, which `/metrics` puts
before the OpenTelemetry metrics. Every hand-written metric is defined in
`render_metrics`, in one place; none repeats an OpenTelemetry one (entries
and bytes stored, sync counts and times are in the `quire_bookie_*_seconds`
histograms and `quire_bookie_written_bytes_total`), and latency is only a
histogram: a percentile computed here could not be aggregated."""

from __future__ import annotations

from typing import Any

from quire_bookie.bookie import Bookie


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
        "ledgers": len(bookie.ledger_ids()),
    }


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(bookie: Bookie, bookie_id: str) -> str:
    info = bookie.info()
    counters = bookie.counters
    labels = f'{{bookie_id="{_label(bookie_id)}"}}'
    rows: list[tuple[str, str, str, float]] = [
        ("quire_bookie_rejected_adds_total", "counter", "Add requests refused before storage.", counters.rejected_adds),
        ("quire_bookie_reads_total", "counter", "Read requests served.", counters.reads),
        ("quire_bookie_disk_total_bytes", "gauge", "Capacity of the data directories.", info.total_disk_bytes),
        ("quire_bookie_disk_free_bytes", "gauge", "Free bytes of the data directories.", info.free_disk_bytes),
        ("quire_bookie_disk_used_bytes", "gauge", "Bytes the bookie's data takes.", info.used_bytes),
        ("quire_bookie_read_only", "gauge", "1 while the bookie refuses adds.", float(info.read_only)),
        ("quire_bookie_sync_disabled", "gauge", "1 when adds are acknowledged without fsync (unsafe).",
         float(info.sync_disabled)),
        ("quire_bookie_ledgers", "gauge", "Ledgers with state on this bookie.", len(bookie.ledger_ids())),
    ]  # fmt: skip
    lines = []
    for name, kind, text, value in rows:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name}{labels} {float(value)!r}"]
    return "\n".join(lines) + "\n"
