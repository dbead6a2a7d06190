"""Placement rows: disk-weight selection with the median cap (ENS-4) and its
edge cases (ENS-5), drawn from the real placement service of a live cluster."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterator

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from quire_client.cluster import LocalCluster, tooling_channel
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

MIB = 1 << 20
# Free space 512, 512, 512 MiB and 20 GiB: the median is 512 MiB, so with the
# default cap multiple of 3 the big bookie draws like 1.5 GiB: half of all draws.
LIGHT, HEAVY = 512 * MIB, 20 * 1024 * MIB
MAX_MULTIPLE = 3.0
DRAWS = 10_000
EQUAL_DRAWS = 3000  # ENS-5's uniform draws
# Both rows' chi-square bound: a fair draw fails it once in a thousand runs.
# 0.01 failed a fair draw about once in a hundred CI runs, in ENS-5 and then in
# ENS-4 (p = 0.0016); a biased draw still falls far below it (an uncapped heavy
# bookie would draw 93 % of 10,000, not 50 %).
FAIR_DRAW_P_VALUE = 0.001


def chi_square_p_value(statistic: float, degrees: int) -> float:
    """P(X >= statistic) for a chi-square variable (closed forms per parity)."""
    half = statistic / 2
    if degrees % 2 == 0:
        return math.exp(-half) * sum(half**i / math.factorial(i) for i in range(degrees // 2))
    tail = math.erfc(math.sqrt(half))
    # erfc(sqrt(x/2)) + sqrt(2x/pi) e^(-x/2) * sum_{i=1}^{(k-1)/2} x^(i-1) / (1*3*...*(2i-1))
    term, series, odd_product = math.sqrt(2 * statistic / math.pi) * math.exp(-half), 0.0, 1.0
    for i in range(1, (degrees - 1) // 2 + 1):
        odd_product *= 2 * i - 1
        series += statistic ** (i - 1) / odd_product
    return tail + term * series


def chi_square(counts: Counter[str], expected: dict[str, float]) -> tuple[float, float]:
    total = sum(counts.values())
    statistic = sum((counts[b] - total * p) ** 2 / (total * p) for b, p in expected.items())
    return statistic, chi_square_p_value(statistic, len(expected) - 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    capacities = {"bookie-1": LIGHT, "bookie-2": LIGHT, "bookie-3": LIGHT, "bookie-4": HEAVY}
    with fault_cluster(
        tmp_path_factory.mktemp("weights"),
        bookies=4,
        env={
            "QUIRE_PLACEMENT_DISK_WEIGHT_ENABLED": "true",
            "QUIRE_PLACEMENT_BOOKIE_INFO_INTERVAL_SECONDS": "0.5",
            "QUIRE_PLACEMENT_BOOKIE_INFO_RETRY_INTERVAL_SECONDS": "0.5",
            "QUIRE_PLACEMENT_BOOKIE_MAX_WEIGHT_MULTIPLE": str(MAX_MULTIPLE),
        },
        bookie_env={name: {"QUIRE_BOOKIE_CAPACITY_BYTES": str(size)} for name, size in capacities.items()},
    ) as local:
        yield local


@pytest.fixture(scope="module")
def placement(cluster: LocalCluster) -> Iterator[placement_pb2_grpc.PlacementServiceStub]:
    with tooling_channel(cluster.placement_target, cluster.tls) as channel:
        yield placement_pb2_grpc.PlacementServiceStub(channel)


def weights(placement: placement_pb2_grpc.PlacementServiceStub) -> placement_pb2.GetPlacementWeightsResponse:
    return placement.GetPlacementWeights(placement_pb2.GetPlacementWeightsRequest(), timeout=5)


def draw(placement: placement_pb2_grpc.PlacementServiceStub, count: int, ensemble: int = 1) -> Counter[str]:
    request = placement_pb2.NewEnsembleRequest(ensemble_size=ensemble, write_quorum_size=1, ack_quorum_size=1)
    counts: Counter[str] = Counter()
    for _ in range(count):
        counts.update(placement.NewEnsemble(request, timeout=5).bookie_ids)
    return counts


def wait_for(condition: Callable[[], bool], within_seconds: float = 30.0) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < within_seconds, "condition not reached in time"
        time.sleep(0.2)
    return time.monotonic() - started


def test_ens4_disk_weights_with_the_median_cap(
    cluster: LocalCluster, placement: placement_pb2_grpc.PlacementServiceStub, scenario: Scenario
) -> None:
    """Free space [1, 1, 1, 40] (512 MiB units), cap multiple 3: the big bookie
    is capped at 3 times the median, so it draws half, the others a sixth each."""
    scenario.start("ENS-4", free_mib=[512, 512, 512, 20480], max_multiple=MAX_MULTIPLE, draws=DRAWS, ensemble=1)
    wait_for(lambda: len(weights(placement).bookies) == 4)
    heavy = cluster.bookie_id("bookie-4")
    expected = {b: (0.5 if b == heavy else 1 / 6) for b in (cluster.bookie_id(n) for n in cluster.bookie_names)}
    reported = {row.bookie_id: row.selection_probability for row in weights(placement).bookies}
    for bookie, probability in expected.items():
        assert reported[bookie] == pytest.approx(probability, abs=0.01), reported

    counts = draw(placement, DRAWS)
    statistic, p_value = chi_square(counts, expected)
    uncapped_share = HEAVY / (HEAVY + 3 * LIGHT)
    scenario.figures.update(
        {
            "heavy_share": round(counts[heavy] / DRAWS, 4),
            "heavy_share_expected": 0.5,
            "heavy_share_uncapped_would_be": round(uncapped_share, 4),
            "light_shares": sorted(round(counts[b] / DRAWS, 4) for b in expected if b != heavy),
            "chi_square": round(statistic, 3),
            "p_value": round(p_value, 4),
        }
    )
    assert counts[heavy] / DRAWS <= MAX_MULTIPLE / (MAX_MULTIPLE + 3) + 0.02
    assert p_value > FAIR_DRAW_P_VALUE, (counts, expected)


def test_ens5_weight_edge_cases(
    cluster: LocalCluster, placement: placement_pb2_grpc.PlacementServiceStub, scenario: Scenario
) -> None:
    """Invalid load factors are refused and store nothing; a stale factor of a
    dead bookie never gets it chosen; equal weights draw uniformly; with one
    bookie left it is the only choice and a larger ensemble is UNAVAILABLE."""
    scenario.start("ENS-5", draws=EQUAL_DRAWS)
    ids = {name: cluster.bookie_id(name) for name in cluster.bookie_names}
    wait_for(lambda: len(weights(placement).bookies) == 4)
    invalid_accepted, stored_before = 0, None
    with tooling_channel(cluster.registry_target, cluster.tls) as channel:
        registry = registry_pb2_grpc.RegistryServiceStub(channel)
        stored_before = len(registry.ListLoadWeights(registry_pb2.ListLoadWeightsRequest(), timeout=5).weights)
        now = Timestamp()
        now.GetCurrentTime()
        for factor in (0.0, -1.0, math.nan, math.inf, 1.5, -math.inf):
            request = registry_pb2.PutLoadWeightsRequest(
                weights=[registry_pb2.LoadWeight(bookie_id=ids["bookie-1"], factor=factor, computed_at=now)]
            )
            try:
                registry.PutLoadWeights(request, timeout=5)
                invalid_accepted += 1
            except grpc.RpcError as invalid:
                assert invalid.code() == grpc.StatusCode.INVALID_ARGUMENT, invalid
                assert "load factor" in (invalid.details() or ""), invalid.details()
        stored_after = len(registry.ListLoadWeights(registry_pb2.ListLoadWeightsRequest(), timeout=5).weights)
        # A fresh, valid factor for the heavy bookie, which then dies: the factor stays in etcd.
        registry.PutLoadWeights(
            registry_pb2.PutLoadWeightsRequest(
                weights=[registry_pb2.LoadWeight(bookie_id=ids["bookie-4"], factor=1.0, computed_at=now)]
            ),
            timeout=5,
        )
    scenario.figures["invalid_factors_accepted"] = invalid_accepted
    scenario.figures["invalid_factors_stored"] = stored_after - stored_before

    cluster.kill("bookie-4")
    scenario.figures["dead_bookie_dropped_seconds"] = round(
        wait_for(lambda: ids["bookie-4"] not in {row.bookie_id for row in weights(placement).bookies}), 2
    )
    # The three light bookies weigh about alike; the draws are tested against
    # the probabilities placement reports (their free space differs by what
    # each one's RocksDB holds), not an assumed third each.
    # Drawn in chunks, with the probabilities read again before each: the
    # expected share of each bookie is the mean of what placement reported.
    equal: Counter[str] = Counter()
    seen: list[dict[str, float]] = []
    for _ in range(10):
        seen.append({row.bookie_id: row.selection_probability for row in weights(placement).bookies})
        equal.update(draw(placement, EQUAL_DRAWS // 10))
    reported = {b: sum(s.get(b, 0.0) for s in seen) / len(seen) for b in seen[0]}
    scenario.figures["equal_weights_reported"] = {
        b: [round(min(s.get(b, 0.0) for s in seen), 4), round(max(s.get(b, 0.0) for s in seen), 4)]
        for b in sorted(reported)
    }
    assert set(reported) == {ids[n] for n in ("bookie-1", "bookie-2", "bookie-3")}, reported
    assert all(p == pytest.approx(1 / 3, abs=0.05) for p in reported.values()), reported
    statistic, p_value = chi_square(equal, reported)
    scenario.figures["equal_weights_chi_square"] = round(statistic, 3)
    scenario.figures["equal_weights_p_value"] = round(p_value, 4)
    scenario.figures["equal_weights_draws"] = dict(sorted(equal.items()))

    cluster.kill("bookie-3")
    cluster.kill("bookie-2")
    wait_for(lambda: {row.bookie_id for row in weights(placement).bookies} == {ids["bookie-1"]})
    single = draw(placement, 200)
    with pytest.raises(grpc.RpcError) as refused:
        draw(placement, 1, ensemble=2)
    dead_or_invalid = equal[ids["bookie-4"]] + sum(n for b, n in single.items() if b != ids["bookie-1"])
    scenario.figures["selections_of_dead_or_invalid"] = dead_or_invalid
    scenario.figures["single_bookie_draws"] = single[ids["bookie-1"]]
    scenario.figures["too_few_code"] = refused.value.code().name

    assert invalid_accepted == 0 and stored_after == stored_before
    assert dead_or_invalid == 0 and single[ids["bookie-1"]] == 200
    assert p_value > FAIR_DRAW_P_VALUE, (equal, reported)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE and "1 are available" in (refused.value.details() or "")
