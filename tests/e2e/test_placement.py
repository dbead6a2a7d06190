"""Placement on a live cluster: ensembles follow the bookies' free space
(BP-2), a bookie that dies is never chosen once its registration is gone,
and it is chosen again when it comes back."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import grpc
import pytest

from quire_client.cluster import LocalCluster, Ports
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc

pytestmark = pytest.mark.e2e

GIB = 1 << 30
# Free space 1, 1, 2 and 8 GiB: median 1.5 GiB, so the 8 GiB bookie is capped at 4.5.
CAPACITIES = {"bookie-1": 1 * GIB, "bookie-2": 1 * GIB, "bookie-3": 2 * GIB, "bookie-4": 8 * GIB}
EXPECTED = {"bookie-1": 1 / 8.5, "bookie-2": 1 / 8.5, "bookie-3": 2 / 8.5, "bookie-4": 4.5 / 8.5}


@pytest.fixture(scope="module")
def weighted_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("placement"),
        Ports.free(bookies=4),
        extra_env={
            "QUIRE_BOOKIE_TTL_SECONDS": "3",
            "QUIRE_PLACEMENT_DISK_WEIGHT_ENABLED": "true",
            "QUIRE_PLACEMENT_BOOKIE_INFO_INTERVAL_SECONDS": "1",
            "QUIRE_PLACEMENT_BOOKIE_INFO_RETRY_INTERVAL_SECONDS": "0.5",
        },
        bookie_env={name: {"QUIRE_BOOKIE_CAPACITY_BYTES": str(size)} for name, size in CAPACITIES.items()},
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def placement(weighted_cluster) -> Iterator[placement_pb2_grpc.PlacementServiceStub]:
    with grpc.insecure_channel(weighted_cluster.placement_target) as channel:
        yield placement_pb2_grpc.PlacementServiceStub(channel)


def names(cluster: LocalCluster) -> dict[str, str]:
    return {cluster.bookie_id(name): name for name in cluster.bookie_names}


def draw(placement, count: int) -> Counter[str]:
    request = placement_pb2.NewEnsembleRequest(ensemble_size=1, write_quorum_size=1, ack_quorum_size=1)
    return Counter(placement.NewEnsemble(request, timeout=5).bookie_ids[0] for _ in range(count))


def wait_for(predicate, within_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + within_seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("condition not reached in time")
        time.sleep(0.2)


def known_weights(placement) -> dict[str, placement_pb2.BookieWeight]:
    response = placement.GetPlacementWeights(placement_pb2.GetPlacementWeightsRequest(), timeout=5)
    return {b.bookie_id: b for b in response.bookies}


def writable_members(placement) -> set[str]:
    response = placement.GetPlacementWeights(placement_pb2.GetPlacementWeightsRequest(), timeout=5)
    return {b.bookie_id for b in response.bookies} | set(response.unknown_bookie_ids)


def test_ensembles_follow_the_capped_disk_weights(weighted_cluster, placement):
    by_id = names(weighted_cluster)
    wait_for(lambda: len(known_weights(placement)) == 4)
    weights = known_weights(placement)
    for bookie_id, row in weights.items():
        assert row.selection_probability == pytest.approx(EXPECTED[by_id[bookie_id]], abs=0.02)
    counts = draw(placement, 3000)
    for bookie_id, name in by_id.items():
        assert counts[bookie_id] / 3000 == pytest.approx(EXPECTED[name], abs=0.04), (name, counts)


def test_a_killed_bookie_is_never_chosen_and_a_restarted_one_is_again(weighted_cluster, placement):
    heavy = weighted_cluster.bookie_id("bookie-4")
    weighted_cluster.kill("bookie-4")
    wait_for(lambda: heavy not in writable_members(placement))  # its registration expired
    request = placement_pb2.NewEnsembleRequest(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
    for _ in range(300):
        assert heavy not in placement.NewEnsemble(request, timeout=5).bookie_ids
    with pytest.raises(grpc.RpcError) as refused:
        placement.NewEnsemble(
            placement_pb2.NewEnsembleRequest(ensemble_size=4, write_quorum_size=2, ack_quorum_size=2), timeout=5
        )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE and "3 are available" in refused.value.details()

    weighted_cluster.start_process("bookie-4")
    wait_for(lambda: heavy in known_weights(placement))
    assert draw(placement, 400)[heavy] > 100  # about half of the draws again


def test_bookieinfo_says_so_when_no_bookie_answers(weighted_cluster):
    import subprocess
    import sys

    for name in weighted_cluster.bookie_names:
        weighted_cluster.kill(name)  # registrations outlive them for a few seconds
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "quire_client.cli",
            "--direct",
            "--registry",
            weighted_cluster.registry_target,
            "bookieinfo",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "Failed to retrieve bookie information from any of the bookies" in result.stderr
