"""The load factor of a bookie, as a pure function (documented in
docs/telemetry.md).

    latency_penalty = min(1, cluster_p99 / bookie_p99)
    disk_penalty    = min(1, (1 - bookie_utilisation) / (1 - cluster_utilisation))
    factor          = clamp(latency_penalty * disk_penalty, MIN_FACTOR, 1)

`cluster_p99` is the median of the bookies' p99 add latencies in the latest
window, and `cluster_utilisation` the used share of the whole cluster's disk.
A bookie as fast and as empty as the cluster's middle gets 1; twice as slow
gets 1/2; one whose free share is half the cluster's gets 1/2; both gives 1/4.
The floor keeps a slow bookie drawable (placement never starves it entirely),
and the factor never rewards a bookie above 1: weights only ever go down.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_FACTOR = 0.05


@dataclass(frozen=True)
class BookieLoad:
    bookie_id: str
    add_latency_p99_ms: float | None  # None: no adds seen in the window
    free_bytes: int | None  # None: no disk sample seen
    total_bytes: int | None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def load_factors(loads: list[BookieLoad]) -> dict[str, float]:
    latencies = [b.add_latency_p99_ms for b in loads if b.add_latency_p99_ms]
    cluster_p99 = _median(latencies) if latencies else None
    disks = [b for b in loads if b.total_bytes and b.free_bytes is not None]
    total = sum(b.total_bytes or 0 for b in disks)
    free = sum(b.free_bytes or 0 for b in disks)
    cluster_free_share = free / total if total else None
    factors = {}
    for bookie in loads:
        latency_penalty = 1.0
        if cluster_p99 and bookie.add_latency_p99_ms:
            latency_penalty = min(1.0, cluster_p99 / bookie.add_latency_p99_ms)
        disk_penalty = 1.0
        if cluster_free_share and bookie.total_bytes and bookie.free_bytes is not None:
            disk_penalty = min(1.0, (bookie.free_bytes / bookie.total_bytes) / cluster_free_share)
        factors[bookie.bookie_id] = min(1.0, max(MIN_FACTOR, latency_penalty * disk_penalty))
    return factors
