"""Synthetic telemetry in the services' own line formats, for tests and the
stage's benchmark."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

from quire_telemetry.stage import ADD_SPAN_SUFFIX, SYNC_SPAN

GIB = 1 << 30


def add_span(bookie_id: str, start_ns: int, latency_ms: float, entries: int, size: int, error: bool) -> dict:
    return {
        "record": "span",
        "name": ADD_SPAN_SUFFIX,
        "kind": "SERVER",
        "status": "ERROR" if error else "UNSET",
        "service": "bookie",
        "instance": bookie_id,
        "start_unix_nano": start_ns,
        "end_unix_nano": start_ns + int(latency_ms * 1e6),
        "attributes": {"quire.entries": entries, "quire.bytes": size},
    }


def sync_span(bookie_id: str, start_ns: int, latency_ms: float) -> dict:
    return {
        "record": "span",
        "name": SYNC_SPAN,
        "kind": "INTERNAL",
        "status": "UNSET",
        "service": "bookie",
        "instance": bookie_id,
        "start_unix_nano": start_ns,
        "end_unix_nano": start_ns + int(latency_ms * 1e6),
        "attributes": {"quire.entries": 1},
    }


def disk_sample(bookie_id: str, time_ns: int, free: int, total: int) -> dict:
    return {
        "record": "bookie_info",
        "service": "bookie",
        "instance": bookie_id,
        "time_unix_nano": time_ns,
        "free_bytes": free,
        "total_bytes": total,
    }


def records(
    bookies: int,
    adds_per_bookie: int,
    start_s: float,
    span_s: float,
    seed: int = 7,
    slow: dict[int, float] | None = None,
) -> Iterator[dict]:
    """Adds spread over `span_s` seconds, syncs, and a disk sample every 10 s
    per bookie with free space shrinking at a steady rate. `slow` multiplies
    the latency of the bookies it names (by index)."""
    rng = random.Random(seed)
    slow = slow or {}
    for index in range(bookies):
        bookie_id = f"bookie-{index}"
        factor = slow.get(index, 1.0)
        for _ in range(adds_per_bookie):
            start_ns = int((start_s + rng.uniform(0, span_s)) * 1e9)
            latency = rng.lognormvariate(0.5, 0.6) * factor
            yield add_span(
                bookie_id, start_ns, latency, rng.randint(1, 100), rng.randint(1, 100) * 1024, rng.random() < 0.01
            )
            if rng.random() < 0.5:
                yield sync_span(bookie_id, start_ns, latency * 0.6)
        total = 100 * GIB
        for tick in range(int(span_s // 10) + 1):
            free = int(total * (0.9 - 0.01 * index) - tick * 10 * 1_000_000)
            yield disk_sample(bookie_id, int((start_s + tick * 10) * 1e9), free, total)


def write(path: Path, rows: Iterator[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
            count += 1
    return count
