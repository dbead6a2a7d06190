"""Placement policies: pure functions over a snapshot of bookies."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from quire_api.errors import InvalidArgument, Unavailable
from quire_common.quorum_sizes import validate_quorum
from quire_placement.placement import EnsembleAsk, Placer
from quire_placement.placement_policies import (
    BookieNode,
    PolicySettings,
    Request,
    choose_policy,
    new_ensemble,
    replace_bookie,
    validate_durability,
)
from quire_placement.tracker import WeightSettings, WeightTracker

BOOKIES = [BookieNode(f"b{i}") for i in range(5)]
DEFAULT = PolicySettings()
RACK = PolicySettings(policy="rack-aware")


def request(e: int = 3, w: int = 2, a: int = 2, exclude: tuple[str, ...] = ()) -> Request:
    return Request(e, w, a, frozenset(exclude))


def test_default_ensemble_is_distinct_and_respects_exclusions():
    rng = random.Random(1)
    for _ in range(50):
        chosen = new_ensemble(BOOKIES, request(exclude=("b0",)), {}, DEFAULT, rng).bookie_ids
        assert len(set(chosen)) == 3 and "b0" not in chosen


def test_default_ensemble_uses_every_bookie_over_time():
    rng = random.Random(2)
    seen = {b for _ in range(100) for b in new_ensemble(BOOKIES, request(2, 2, 1), {}, DEFAULT, rng).bookie_ids}
    assert seen == {n.bookie_id for n in BOOKIES}


def test_too_few_bookies_names_needed_and_available():
    with pytest.raises(Unavailable) as caught:
        new_ensemble(BOOKIES[:2], request(), {}, DEFAULT, random.Random())
    assert "needs 3" in caught.value.message and "2 are available" in caught.value.message
    assert caught.value.metadata == {"needed": "3", "available": "2"}


def test_replacement_is_outside_the_ensemble_and_never_excluded():
    rng = random.Random(3)
    for _ in range(50):
        placed = replace_bookie(BOOKIES, ["b0", "b1", "b2"], "b1", request(exclude=("b3",)), {}, DEFAULT, rng)
        assert placed.bookie_ids == ["b4"]
    with pytest.raises(Unavailable):
        replace_bookie(BOOKIES, ["b0", "b1", "b2"], "b1", request(exclude=("b3", "b4")), {}, DEFAULT, rng)
    with pytest.raises(InvalidArgument):
        replace_bookie(BOOKIES, ["b0", "b1", "b2"], "b4", request(), {}, DEFAULT, rng)


def test_weights_steer_the_default_policy():
    rng = random.Random(4)
    counts = Counter(
        new_ensemble(
            BOOKIES, request(1, 1, 1), {"b0": 8.0, "b1": 1.0, "b2": 1.0, "b3": 1.0, "b4": 1.0}, DEFAULT, rng
        ).bookie_ids[0]
        for _ in range(6000)
    )
    assert counts["b0"] / counts["b1"] == pytest.approx(8, rel=0.15)


RACKED = [BookieNode(f"r{r}-b{i}", rack=f"/rack-{r}") for r in range(3) for i in range(3)]


def windows(ensemble: list[str], w: int) -> list[list[str]]:
    return [[ensemble[(start + i) % len(ensemble)] for i in range(w)] for start in range(len(ensemble))]


def rack_of(bookie_id: str) -> str:
    return "/rack-" + bookie_id[1]


@pytest.mark.parametrize(("e", "w", "a"), [(3, 2, 2), (3, 3, 2), (5, 3, 2), (6, 2, 2), (4, 4, 3)])
def test_every_write_quorum_spans_min_w_and_two_racks(e, w, a):
    rng = random.Random(e * 10 + w)
    for _ in range(100):
        placed = new_ensemble(RACKED, request(e, w, a), {}, RACK, rng)
        assert placed.fallback is None and len(set(placed.bookie_ids)) == e
        for quorum in windows(placed.bookie_ids, w):
            assert len({rack_of(b) for b in quorum}) >= min(w, 2)


def test_three_racks_per_quorum_when_asked():
    settings = PolicySettings(policy="rack-aware", min_racks_per_write_quorum=3)
    for _ in range(50):
        placed = new_ensemble(RACKED, request(6, 3, 2), {}, settings, random.Random())
        assert all(len({rack_of(b) for b in q}) == 3 for q in windows(placed.bookie_ids, 3))


def test_one_rack_cluster_is_placed_without_complaint():
    placed = new_ensemble(BOOKIES, request(), {}, RACK, random.Random(1))
    assert len(placed.bookie_ids) == 3 and placed.fallback is None


def test_impossible_rack_spread_falls_back_or_refuses_when_enforced():
    # Two racks and an odd ensemble with W=2: neighbours around the ring cannot all differ.
    nodes = [BookieNode(f"x{i}", rack="/x") for i in range(3)] + [BookieNode(f"y{i}", rack="/y") for i in range(3)]
    placed = new_ensemble(nodes, request(3, 2, 2), {}, RACK, random.Random(1))
    assert placed.fallback and len(set(placed.bookie_ids)) == 3
    enforced = PolicySettings(policy="rack-aware", enforce_min_racks=True)
    with pytest.raises(Unavailable, match="spans 2 racks") as refused:
        new_ensemble(nodes, request(3, 2, 2), {}, enforced, random.Random(1))
    assert refused.value.metadata == {"needed": "3", "available": "6", "needed_racks": "2", "available_racks": "2"}
    ok = new_ensemble(nodes, request(4, 2, 2), {}, enforced, random.Random(1))
    assert all(len({b[0] for b in q}) == 2 for q in windows(ok.bookie_ids, 2))


def test_rack_aware_replacement_prefers_the_failed_bookies_rack():
    ensemble = ["r0-b0", "r1-b0", "r2-b0"]
    for seed in range(30):
        placed = replace_bookie(RACKED, ensemble, "r1-b0", request(), {}, RACK, random.Random(seed))
        assert rack_of(placed.bookie_ids[0]) == "/rack-1" and placed.bookie_ids[0] != "r1-b0"


def test_rack_aware_replacement_keeps_the_spread_when_its_rack_is_empty():
    nodes = [n for n in RACKED if n.bookie_id not in ("r1-b1", "r1-b2")]
    ensemble = ["r0-b0", "r1-b0", "r0-b1", "r2-b0"]
    for seed in range(30):
        chosen = replace_bookie(nodes, ensemble, "r1-b0", request(4, 2, 2), {}, RACK, random.Random(seed))
        assert chosen.fallback is None and rack_of(chosen.bookie_ids[0]) == "/rack-2"
    # No bookie fits between two racks it would repeat: fall back, or refuse when enforced.
    squeezed = ["r0-b0", "r1-b0", "r2-b0", "r0-b1"]
    fallback = replace_bookie(nodes, squeezed, "r1-b0", request(4, 2, 2), {}, RACK, random.Random(1))
    assert fallback.fallback and fallback.bookie_ids[0] not in squeezed
    with pytest.raises(Unavailable) as refused:
        enforced = PolicySettings(policy="rack-aware", enforce_min_racks=True)
        replace_bookie(nodes, squeezed, "r1-b0", request(4, 2, 2), {}, enforced, random.Random(1))
    assert refused.value.metadata == {"needed": "1", "available": "0", "needed_racks": "2"}


REGIONS = [
    BookieNode(f"{region}{r}-{i}", rack=f"/{region}{r}", region=region)
    for region in ("east", "west", "north")
    for r in range(2)
    for i in range(2)
]
REGION = PolicySettings(policy="region-aware", local_region="west")


def region_of(bookie_id: str) -> str:
    return next(n.region for n in REGIONS if n.bookie_id == bookie_id)


def test_region_aware_spreads_evenly_local_region_first_and_interleaves():
    for seed in range(40):
        placed = new_ensemble(REGIONS, request(5, 3, 2), {}, REGION, random.Random(seed)).bookie_ids
        regions = [region_of(b) for b in placed]
        assert Counter(regions) == {"west": 2, "east": 2, "north": 1}
        assert regions[0] == "west"
        assert all(regions[i] != regions[i + 1] for i in range(len(regions) - 1))
        west = [b for b in placed if region_of(b) == "west"]
        assert len({n.rack for n in REGIONS if n.bookie_id in west}) == 2  # rack-aware inside the region


def test_region_durability_is_validated_against_a_and_w():
    two = PolicySettings(min_regions_for_durability=2)
    with pytest.raises(InvalidArgument, match="cannot span"):
        validate_durability(request(3, 1, 1), two, 3)
    assert "alone" in validate_durability(request(3, 3, 2), two, 2)  # 2 of 3 copies share a region
    assert validate_durability(request(3, 3, 2), two, 3) is None  # one copy per region
    assert validate_durability(request(3, 2, 2), two, 2) is None
    assert "fewer than" in validate_durability(request(3, 2, 2), two, 1)
    enforced = PolicySettings(policy="region-aware", enforce_durability=True)
    two_regions = [n for n in REGIONS if n.region != "north"]
    with pytest.raises(Unavailable, match="alone"):
        new_ensemble(two_regions, request(3, 3, 2), {}, enforced, random.Random(1))


def test_too_few_regions_fall_back_or_refuse_when_enforced():
    one_region = [n for n in REGIONS if n.region == "east"]
    placed = new_ensemble(one_region, request(3, 2, 2), {}, REGION, random.Random(1))
    assert placed.fallback and len(placed.bookie_ids) == 3
    enforced = PolicySettings(policy="region-aware", enforce_durability=True)
    with pytest.raises(Unavailable, match="fewer than the 2") as refused:
        new_ensemble(one_region, request(3, 2, 2), {}, enforced, random.Random(1))
    assert refused.value.metadata == {"needed": "3", "available": "4", "available_regions": "1"}


def test_a_short_region_hands_its_share_on():
    nodes = [n for n in REGIONS if n.region != "north"] + [BookieNode("north-only", region="north")]
    placed = new_ensemble(nodes, request(6, 2, 2), {}, REGION, random.Random(3)).bookie_ids
    assert len(set(placed)) == 6 and "north-only" in placed


def test_region_aware_replacement_stays_in_the_region():
    ensemble = ["west0-0", "east0-0", "north0-0"]
    for seed in range(30):
        placed = replace_bookie(REGIONS, ensemble, "east0-0", request(), {}, REGION, random.Random(seed))
        assert placed.bookie_ids[0] == "east0-1"  # same region and rack


def test_policy_hint_in_custom_metadata():
    assert choose_policy(DEFAULT, {}) == "default"
    assert choose_policy(DEFAULT, {"placement.policy": "rack-aware"}) == "rack-aware"
    with pytest.raises(InvalidArgument, match="custom metadata"):
        choose_policy(DEFAULT, {"placement.policy": "nearest"})


def test_properties_give_the_topology_with_defaults():
    assert BookieNode.from_properties("b", {}) == BookieNode("b", "/default-rack", "/default-region")
    node = BookieNode.from_properties("b", {"topology.rack": "/r1", "topology.region": "eu"})
    assert (node.rack, node.region) == ("/r1", "eu")


@pytest.mark.parametrize("sizes", [(2, 3, 2), (3, 2, 3), (3, 0, 0), (0, 0, 0)])
def test_bad_quorums(sizes):
    with pytest.raises(InvalidArgument):
        validate_quorum(*sizes)


async def test_new_ensembles_answers_each_ask_alone_from_one_listing():
    listings = 0

    async def writable() -> list[tuple[str, dict[str, str]]]:
        nonlocal listings
        listings += 1
        return [(f"b{i}:1", {}) for i in range(3)]

    async def no_info(bookie_id: str) -> None:
        raise AssertionError("disk weights are off")

    placer = Placer(PolicySettings(), WeightTracker(WeightSettings(enabled=False), no_info), writable)
    outcomes = await placer.new_ensembles(
        [
            EnsembleAsk(3, 2, 2, (), {}),
            EnsembleAsk(5, 5, 3, (), {}),  # more bookies than there are
            EnsembleAsk(2, 3, 2, (), {}),  # W > E
            EnsembleAsk(2, 2, 2, ("b0:1",), {}),
        ]
    )
    assert listings == 1
    assert sorted(outcomes[0]) == ["b0:1", "b1:1", "b2:1"]  # type: ignore[arg-type]
    assert isinstance(outcomes[1], Unavailable) and outcomes[1].reason == "ERROR_REASON_NOT_ENOUGH_BOOKIES"
    assert isinstance(outcomes[2], InvalidArgument)
    assert sorted(outcomes[3]) == ["b1:1", "b2:1"]  # type: ignore[arg-type]
