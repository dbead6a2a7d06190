"""Disk-weight selection (BookKeeper's BP-2), as pure functions.

A bookie's weight is its free bytes. Its chance of being drawn is proportional
to that weight, except that a weight above `max_multiple * median` (the median
over every known bookie, zeros included) is cut to the cap, so one huge new
disk does not attract every new ledger. A bookie with weight 0 is drawn as if
it had the smallest non-zero weight (it may just not have reported yet); when
every weight is 0 the draw is uniform; `max_multiple <= 0` or a median of 0
means no cap. A load factor in (0, 1] from the telemetry stage multiplies the
result.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def median(values: Sequence[float]) -> float:
    """The median; for an even count, the mean of the two middle values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def natural_weights(free_bytes: Mapping[str, int]) -> dict[str, float]:
    """Each bookie's share of the total free space (all 0 when there is none)."""
    total = sum(free_bytes.values())
    if total <= 0:
        return {bookie: 0.0 for bookie in free_bytes}
    return {bookie: free / total for bookie, free in free_bytes.items()}


def capped_weights(weights: Mapping[str, float], max_multiple: float) -> dict[str, float]:
    """Cut every weight above `max_multiple * median weight` to that cap."""
    middle = median(list(weights.values()))
    if max_multiple <= 0 or middle <= 0:
        return dict(weights)
    cap = max_multiple * middle
    return {bookie: min(weight, cap) for bookie, weight in weights.items()}


def draw_weights(capped: Mapping[str, float], load_factors: Mapping[str, float] | None = None) -> dict[str, float]:
    """The weights a draw uses: zeros lifted to the smallest non-zero weight
    (uniform when all are zero), times each bookie's load factor."""
    positive = [weight for weight in capped.values() if weight > 0]
    floor = min(positive) if positive else 1.0
    factors = load_factors or {}
    return {
        bookie: (weight if weight > 0 else floor) * min(max(factors.get(bookie, 1.0), 0.0), 1.0)
        for bookie, weight in capped.items()
    }


def selection_probabilities(draw: Mapping[str, float]) -> dict[str, float]:
    """The chance of each bookie being the first one drawn."""
    total = sum(draw.values())
    if total <= 0:
        return {bookie: 1 / len(draw) for bookie in draw} if draw else {}
    return {bookie: weight / total for bookie, weight in draw.items()}


def weighted_pick(candidates: Sequence[str], weights: Mapping[str, float], rng: random.Random) -> str:
    """One candidate, drawn with probability proportional to its weight. A
    candidate whose weight is unknown (its info could not be read) counts like
    a zero: as the smallest positive weight. Uniform when no weights are known."""
    if not candidates:
        raise ValueError("no candidates to pick from")
    positive = [w for w in weights.values() if w > 0]
    default = min(positive) if positive else 1.0
    values = [max(weights.get(c, default), 0.0) for c in candidates]
    total = sum(values)
    if total <= 0:
        return rng.choice(list(candidates))
    point = rng.uniform(0, total)
    running = 0.0
    for candidate, value in zip(candidates, values, strict=True):
        running += value
        if point < running:
            return candidate
    return candidates[-1]


def weighted_sample(
    candidates: Sequence[str], weights: Mapping[str, float], count: int, rng: random.Random
) -> list[str]:
    """`count` distinct candidates, each drawn in turn from those left in
    proportion to weight."""
    left = list(candidates)
    chosen: list[str] = []
    for _ in range(count):
        picked = weighted_pick(left, weights, rng)
        chosen.append(picked)
        left.remove(picked)
    return chosen


@dataclass(frozen=True)
class BookieWeight:
    """One bookie's row of GetPlacementWeights."""

    bookie_id: str
    free_bytes: int
    total_bytes: int
    natural: float
    capped: float
    load_factor: float
    probability: float


def weight_table(
    disk: Mapping[str, tuple[int, int]],
    max_multiple: float,
    load_factors: Mapping[str, float] | None = None,
) -> list[BookieWeight]:
    """The whole computation for a set of bookies, given (free, total) bytes
    per bookie: what GetPlacementWeights reports and what the draws use."""
    natural = natural_weights({bookie: free for bookie, (free, _) in disk.items()})
    capped = capped_weights(natural, max_multiple)
    draw = draw_weights(capped, load_factors)
    probabilities = selection_probabilities(draw)
    factors = load_factors or {}
    return [
        BookieWeight(
            bookie,
            disk[bookie][0],
            disk[bookie][1],
            natural[bookie],
            capped[bookie],
            factors.get(bookie, 1.0),
            probabilities[bookie],
        )
        for bookie in sorted(disk)
    ]
