"""BP-2 disk weights: the proposal's worked example and the draw statistics."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from quire_placement.weights import (
    capped_weights,
    draw_weights,
    median,
    natural_weights,
    selection_probabilities,
    weight_table,
    weighted_pick,
    weighted_sample,
)

GB = 1 << 30


def test_the_proposals_worked_example():
    free = {"a": 200 * GB, "b": 200 * GB, "c": 300 * GB, "d": 500 * GB, "e": 1000 * GB}
    natural = natural_weights(free)
    assert [round(natural[b], 4) for b in "abcde"] == [0.0909, 0.0909, 0.1364, 0.2273, 0.4545]
    capped = capped_weights(natural, 2)
    assert capped["e"] == pytest.approx(2 * natural["c"]) and round(capped["e"], 3) == 0.273
    assert [capped[b] for b in "abcd"] == [natural[b] for b in "abcd"]


def test_median_counts_zeros_and_averages_the_middle_pair():
    assert median([0, 0, 100, 200]) == 50
    assert median([3, 1, 2]) == 2
    assert median([]) == 0


def test_no_cap_for_a_non_positive_multiple_or_a_zero_median():
    weights = {"a": 0.0, "b": 0.0, "c": 1.0}
    assert capped_weights(weights, 3) == weights  # median 0
    assert capped_weights({"a": 0.1, "b": 0.9}, 0) == {"a": 0.1, "b": 0.9}
    assert capped_weights({"a": 0.1, "b": 0.9}, -1) == {"a": 0.1, "b": 0.9}


def test_zeros_draw_like_the_smallest_weight_and_all_zeros_draw_uniformly():
    assert draw_weights({"a": 0.0, "b": 0.2, "c": 0.5}) == {"a": 0.2, "b": 0.2, "c": 0.5}
    assert selection_probabilities(draw_weights({"a": 0.0, "b": 0.0})) == {"a": 0.5, "b": 0.5}


def test_load_factors_multiply_and_are_clamped():
    assert draw_weights({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 7.0}) == {"a": 0.25, "b": 0.5}


def draws(free: dict[str, int], multiple: float, count: int, seed: int) -> Counter[str]:
    table = weight_table({b: (f, f) for b, f in free.items()}, multiple)
    weights = draw_weights({row.bookie_id: row.capped for row in table})
    rng = random.Random(seed)
    names = sorted(free)
    return Counter(weighted_pick(names, weights, rng) for _ in range(count))


def test_fifty_bookies_zeros_as_often_as_hundreds_two_hundreds_twice_as_often():
    free = {f"z{i:02}": 0 for i in range(16)}
    free |= {f"h{i:02}": 100 for i in range(16)}
    free |= {f"t{i:02}": 200 for i in range(18)}
    counts = draws(free, 3, 80_000, seed=11)
    per_bookie = {
        group: sum(v for k, v in counts.items() if k[0] == group) / n for group, n in [("z", 16), ("h", 16), ("t", 18)]
    }
    assert per_bookie["z"] / per_bookie["h"] == pytest.approx(1.0, rel=0.05)
    assert per_bookie["t"] / per_bookie["h"] == pytest.approx(2.0, rel=0.05)


def test_one_huge_bookie_is_capped_at_three_times_the_median():
    free = {f"b{i:02}": 100 for i in range(49)} | {"huge": 49_000}
    counts = draws(free, 3, 80_000, seed=12)
    others = sum(v for k, v in counts.items() if k != "huge") / 49
    assert counts["huge"] / others == pytest.approx(3.0, rel=0.05)


def test_weighted_sample_is_distinct_and_unknown_bookies_count_as_the_smallest():
    rng = random.Random(5)
    for _ in range(200):
        chosen = weighted_sample(["a", "b", "c", "d"], {"a": 1.0, "b": 2.0}, 3, rng)
        assert len(set(chosen)) == 3
    counts = Counter(weighted_pick(["a", "b", "new"], {"a": 1.0, "b": 3.0}, rng) for _ in range(50_000))
    assert counts["new"] / counts["a"] == pytest.approx(1.0, rel=0.1)
    with pytest.raises(ValueError):
        weighted_pick([], {}, rng)
