"""Placement policies: pure functions over a snapshot of writable bookies.

Three policies choose ensembles and replacements:

- `default`: E distinct bookies drawn by weight;
- `rack-aware`: every write quorum (W cyclically consecutive ensemble
  positions) spans at least min(W, min_racks_per_write_quorum, racks in the
  cluster) racks; a replacement prefers the failed bookie's rack;
- `region-aware`: the ensemble is spread as evenly as possible over the
  regions, local region first, interleaved so neighbouring positions sit in
  different regions, rack-aware within each region; a replacement prefers the
  failed bookie's region, then its rack.

Draws are weighted by `weights` (BP-2 disk weights times load factors, see
weights.py; empty means uniform). When a topology rule cannot be met the
policy falls back to a weaker one and says so in `Placement.fallback`, unless
its `enforce` setting is on, in which case it refuses with UNAVAILABLE.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from quire_api.errors import InvalidArgument, Reason, Unavailable
from quire_placement.weights import weighted_pick, weighted_sample

DEFAULT_RACK = "/default-rack"
DEFAULT_REGION = "/default-region"
RACK_PROPERTY = "topology.rack"
REGION_PROPERTY = "topology.region"
POLICY_HINT_KEY = "placement.policy"
POLICIES = ("default", "rack-aware", "region-aware")
_ATTEMPTS = 64  # randomised tries at a constrained ensemble before falling back


@dataclass(frozen=True)
class BookieNode:
    """A writable bookie and where it sits."""

    bookie_id: str
    rack: str = DEFAULT_RACK
    region: str = DEFAULT_REGION

    @classmethod
    def from_properties(cls, bookie_id: str, properties: Mapping[str, str]) -> BookieNode:
        return cls(
            bookie_id,
            properties.get(RACK_PROPERTY) or DEFAULT_RACK,
            properties.get(REGION_PROPERTY) or DEFAULT_REGION,
        )


@dataclass(frozen=True)
class PolicySettings:
    policy: str = "default"
    min_racks_per_write_quorum: int = 2
    enforce_min_racks: bool = False
    regions: tuple[str, ...] = ()  # configured regions; empty: the regions the bookies name
    local_region: str = ""
    min_regions_for_durability: int = 2
    enforce_durability: bool = False


@dataclass
class Placement:
    bookie_ids: list[str]
    policy: str
    fallback: str | None = None  # why a weaker rule was used, if one was


@dataclass(frozen=True)
class Request:
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    exclude: frozenset[str] = field(default_factory=frozenset)


def choose_policy(settings: PolicySettings, custom_metadata: Mapping[str, str]) -> str:
    """The configured policy, or the ledger's hint (custom metadata
    `placement.policy`) when it carries one."""
    hint = custom_metadata.get(POLICY_HINT_KEY, "")
    name = hint or settings.policy
    if name not in POLICIES:
        where = f"custom metadata {POLICY_HINT_KEY}" if hint else "the configured placement policy"
        raise InvalidArgument(f"{where} is {name!r}; use one of {', '.join(POLICIES)}")
    return name


def not_enough(needed: int, available: int, what: str) -> Unavailable:
    return Unavailable(
        f"not enough bookies: {what} needs {needed} writable bookies, {available} are available",
        Reason.NOT_ENOUGH_BOOKIES,
        needed=str(needed),
        available=str(available),
    )


def new_ensemble(
    nodes: Sequence[BookieNode],
    request: Request,
    weights: Mapping[str, float],
    settings: PolicySettings,
    rng: random.Random,
    policy: str | None = None,
) -> Placement:
    """E distinct writable bookies in striping order."""
    policy = policy or settings.policy
    candidates = sorted((n for n in nodes if n.bookie_id not in request.exclude), key=lambda n: n.bookie_id)
    if len(candidates) < request.ensemble_size:
        excluded = f" ({len(request.exclude)} excluded)" if request.exclude else ""
        raise not_enough(request.ensemble_size, len(candidates), f"the ensemble{excluded}")
    if policy == "rack-aware":
        return _rack_aware_ensemble(candidates, request, weights, settings, rng)
    if policy == "region-aware":
        return _region_aware_ensemble(candidates, request, weights, settings, rng)
    ids = [n.bookie_id for n in candidates]
    return Placement(weighted_sample(ids, weights, request.ensemble_size, rng), "default")


def replace_bookie(
    nodes: Sequence[BookieNode],
    ensemble: Sequence[str],
    failed: str,
    request: Request,
    weights: Mapping[str, float],
    settings: PolicySettings,
    rng: random.Random,
    policy: str | None = None,
) -> Placement:
    """One writable bookie, not in the ensemble, not the failed one, not
    excluded, to take the failed member's position."""
    policy = policy or settings.policy
    if failed not in ensemble:
        raise InvalidArgument(f"bookie {failed} is not a member of the ensemble it should be replaced in")
    taken = set(ensemble) | {failed} | set(request.exclude)
    candidates = [n for n in sorted(nodes, key=lambda n: n.bookie_id) if n.bookie_id not in taken]
    if not candidates:
        raise Unavailable(
            f"not enough bookies: replacing {failed} needs 1 writable bookie outside the ensemble, 0 are available",
            Reason.NOT_ENOUGH_BOOKIES,
            needed="1",
            available="0",
        )
    known = {n.bookie_id: n for n in nodes}
    failed_node = known.get(failed) or BookieNode(failed)
    if policy == "default":
        return Placement([weighted_pick([n.bookie_id for n in candidates], weights, rng)], "default")
    # Topology-aware: keep the failed member's neighbourhood, then its rules.
    position = list(ensemble).index(failed)
    racks = [(known.get(b) or BookieNode(b)).rack for b in ensemble]
    spread = _racks_per_quorum(candidates + [known[b] for b in ensemble if b in known], request, settings)
    preferences: list[list[BookieNode]] = []
    if policy == "region-aware":
        same_region = [n for n in candidates if n.region == failed_node.region]
        preferences.append([n for n in same_region if n.rack == failed_node.rack])
        preferences.append(same_region)
    else:
        preferences.append([n for n in candidates if n.rack == failed_node.rack])
    preferences.append(candidates)
    for group in preferences:
        allowed = [n for n in group if _rack_fits(racks, position, n.rack, spread)]
        if allowed:
            return Placement([weighted_pick([n.bookie_id for n in allowed], weights, rng)], policy)
    if settings.enforce_min_racks:
        raise Unavailable(
            f"no writable bookie can replace {failed} and keep every write quorum on {spread} racks "
            "(enforced by the placement settings)",
            Reason.NOT_ENOUGH_BOOKIES,
            needed="1",
            available="0",
            needed_racks=str(spread),
        )
    return Placement(
        [weighted_pick([n.bookie_id for n in candidates], weights, rng)],
        policy,
        fallback=f"no replacement keeps {spread} racks per write quorum",
    )


# -- rack-aware -----------------------------------------------------------------


def _racks_per_quorum(nodes: Sequence[BookieNode], request: Request, settings: PolicySettings) -> int:
    """How many racks each write quorum must span: min(W, the setting, racks there are)."""
    return max(1, min(request.write_quorum, settings.min_racks_per_write_quorum, len({n.rack for n in nodes})))


def _rack_fits(racks: Sequence[str | None], position: int, rack: str, spread: int) -> bool:
    """Whether `rack` at `position` differs from the racks of the spread-1
    positions on either side (cyclically). Then any `spread` consecutive
    positions hold distinct racks, so every window of W >= spread does too."""
    size = len(racks)
    for distance in range(1, spread):
        for neighbour in ((position - distance) % size, (position + distance) % size):
            if neighbour != position and racks[neighbour] == rack:
                return False
    return True


def _constrained_ensemble(
    candidates: Sequence[BookieNode],
    size: int,
    spread: int,
    weights: Mapping[str, float],
    rng: random.Random,
) -> list[BookieNode] | None:
    """Fill positions one by one with a weighted draw among bookies whose rack
    fits; a few randomised attempts, None when none succeeds."""
    for _ in range(_ATTEMPTS):
        racks: list[str | None] = [None] * size
        chosen: list[BookieNode] = []
        left = list(candidates)
        for position in range(size):
            allowed = [n for n in left if _rack_fits(racks, position, n.rack, spread)]
            if not allowed:
                break
            picked_id = weighted_pick([n.bookie_id for n in allowed], weights, rng)
            picked = next(n for n in allowed if n.bookie_id == picked_id)
            chosen.append(picked)
            racks[position] = picked.rack
            left.remove(picked)
        else:
            return chosen
    return None


def _rack_aware_ensemble(
    candidates: Sequence[BookieNode],
    request: Request,
    weights: Mapping[str, float],
    settings: PolicySettings,
    rng: random.Random,
) -> Placement:
    wanted = _racks_per_quorum(candidates, request, settings)
    for spread in range(wanted, 0, -1):
        chosen = _constrained_ensemble(candidates, request.ensemble_size, spread, weights, rng)
        if chosen is not None:
            fallback = None if spread == wanted else f"write quorums span {spread} racks, not {wanted}"
            return Placement([n.bookie_id for n in chosen], "rack-aware", fallback)
        if settings.enforce_min_racks:
            racks = len({n.rack for n in candidates})
            raise Unavailable(
                f"cannot place {request.ensemble_size} bookies so that every write quorum of "
                f"{request.write_quorum} spans {wanted} racks with {len(candidates)} bookies on {racks} racks "
                "(enforced by the placement settings)",
                Reason.NOT_ENOUGH_BOOKIES,
                needed=str(request.ensemble_size),
                available=str(len(candidates)),
                needed_racks=str(wanted),
                available_racks=str(racks),
            )
    raise AssertionError("a spread of 1 always fits")  # pragma: no cover


# -- region-aware ---------------------------------------------------------------


def validate_durability(request: Request, settings: PolicySettings, regions_available: int) -> str | None:
    """Check min_regions_for_durability = N against W and A. A write quorum
    smaller than N can never span N regions: INVALID_ARGUMENT. Otherwise the W
    copies of an entry are interleaved over r = min(W, regions available)
    regions, so one region holds up to ceil(W/r) of them; returns why
    durability is short when that many can make up an ack quorum alone, or
    when fewer than N regions have writable bookies; None when all is well."""
    needed = settings.min_regions_for_durability
    if needed <= 1:
        return None
    if request.write_quorum < needed:
        raise InvalidArgument(
            f"a write quorum of {request.write_quorum} cannot span the {needed} regions "
            "min_regions_for_durability asks for",
            Reason.INVALID_QUORUM,
        )
    if regions_available < needed:
        return f"writable bookies are in {regions_available} regions, fewer than the {needed} durability needs"
    spanned = min(request.write_quorum, regions_available)
    most_in_one_region = math.ceil(request.write_quorum / spanned)
    if request.ack_quorum <= most_in_one_region:
        return (
            f"with W={request.write_quorum} over {spanned} regions one region holds {most_in_one_region} copies, "
            f"enough for the ack quorum {request.ack_quorum} alone"
        )
    return None


def _region_order(candidates: Sequence[BookieNode], settings: PolicySettings) -> list[str]:
    """Regions that have candidates: local region first, then configured
    order (or name order)."""
    present = {n.region for n in candidates}
    ordered = [r for r in settings.regions if r in present] or sorted(present)
    ordered += sorted(present - set(ordered))
    if settings.local_region in ordered:
        ordered.remove(settings.local_region)
        ordered.insert(0, settings.local_region)
    return ordered


def _spread_counts(size: int, regions: Sequence[str]) -> dict[str, int]:
    """`size` split as evenly as possible, the remainder to the first regions."""
    used = list(regions[:size])
    base, extra = divmod(size, len(used))
    return {region: base + (1 if index < extra else 0) for index, region in enumerate(used)}


def _region_aware_ensemble(
    candidates: Sequence[BookieNode],
    request: Request,
    weights: Mapping[str, float],
    settings: PolicySettings,
    rng: random.Random,
) -> Placement:
    regions = _region_order(candidates, settings)
    fallback = validate_durability(request, settings, len(regions))
    if fallback and settings.enforce_durability:
        raise Unavailable(
            f"cannot place a durable ensemble: {fallback} (regions with writable bookies: {', '.join(regions)})",
            Reason.NOT_ENOUGH_BOOKIES,
            needed=str(request.ensemble_size),
            available=str(len(candidates)),
            available_regions=str(len(regions)),
        )
    by_region = {region: [n for n in candidates if n.region == region] for region in regions}
    counts = _spread_counts(request.ensemble_size, regions)
    # A region short of bookies hands its share to the next ones with room.
    shortfall = 0
    for region in regions:
        wanted = counts.get(region, 0) + shortfall
        counts[region] = min(wanted, len(by_region[region]))
        shortfall = wanted - counts[region]
    for region in regions:
        room = len(by_region[region]) - counts[region]
        moved = min(room, shortfall)
        counts[region] += moved
        shortfall -= moved
    picks = {
        region: _rack_spread_sample(by_region[region], counts[region], weights, rng)
        for region in regions
        if counts[region]
    }
    # Interleave so that neighbouring positions (and so write quorums) cross regions.
    ensemble: list[str] = []
    while any(picks.values()):
        for region in regions:
            if picks.get(region):
                ensemble.append(picks[region].pop(0).bookie_id)
    return Placement(ensemble, "region-aware", fallback)


def _rack_spread_sample(
    nodes: Sequence[BookieNode], count: int, weights: Mapping[str, float], rng: random.Random
) -> list[BookieNode]:
    """`count` bookies of one region, by weight, each from a rack not used yet
    while there is one."""
    left = list(nodes)
    used_racks: set[str] = set()
    chosen: list[BookieNode] = []
    for _ in range(count):
        fresh = [n for n in left if n.rack not in used_racks] or left
        picked_id = weighted_pick([n.bookie_id for n in fresh], weights, rng)
        picked = next(n for n in fresh if n.bookie_id == picked_id)
        chosen.append(picked)
        used_racks.add(picked.rack)
        left.remove(picked)
    return chosen


def request_of(ensemble_size: int, write_quorum: int, ack_quorum: int, exclude: Iterable[str]) -> Request:
    return Request(ensemble_size, write_quorum, ack_quorum, frozenset(exclude))
