"""Telemetry end to end: every service's metrics over HTTP, and the loop from
a slowed bookie's telemetry through the Spark stage to placement's weights."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import grpc
import pytest

from quire.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_client import QuireClient
from quire_client.cluster import LocalCluster, Ports

pytestmark = pytest.mark.e2e

SLOW = "bookie-3"


@pytest.fixture(scope="module")
def observed_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data = tmp_path_factory.mktemp("observed")
    local = LocalCluster(
        data,
        Ports.free(bookies=3),
        extra_env={
            "QUIRE_TELEMETRY_DIR": str(data / "telemetry"),
            "QUIRE_TELEMETRY_METRICS_INTERVAL_SECONDS": "1",
            "QUIRE_BOOKIE_DISK_CHECK_INTERVAL_SECONDS": "0.5",
            "QUIRE_BOOKIE_TTL_SECONDS": "3",
            "QUIRE_PLACEMENT_BOOKIE_INFO_INTERVAL_SECONDS": "1",
        },
        bookie_env={SLOW: {"QUIRE_BOOKIE_FAULT_SYNC_DELAY_SECONDS": "0.03"}},
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_every_service_serves_prometheus_metrics_and_status(observed_cluster):
    ports = observed_cluster.ports
    with QuireClient(observed_cluster.gateway_target, observed_cluster.registry_target) as client:
        metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
        client.append_all(f"{metadata.ledger_id.scope_id}:{metadata.ledger_id.ledger_id}", [b"x"] * 10)
    time.sleep(1.5)  # one metrics interval
    registry = get(f"http://127.0.0.1:{ports.registry_http}/metrics")
    assert "quire_etcd_operation_duration_seconds_bucket" in registry
    placement = get(f"http://127.0.0.1:{ports.placement_http}/metrics")
    assert "quire_placement_selections" in placement
    bookie = get(f"http://{observed_cluster.bookie_http('bookie-1')}/metrics")
    assert "quire_bookie_written_bytes_total" in bookie and "quire_bookie_sync_duration_seconds_bucket" in bookie
    assert "quire_bookie_adds_total" not in bookie and "p99" not in bookie  # no hand-written duplicates
    assert json.loads(get(f"http://127.0.0.1:{ports.placement_http}/status"))["service"] == "placement"
    gateway = get(f"http://127.0.0.1:{ports.gateway_http}/metrics")
    assert "quire_gateway_add_duration_seconds_count" in gateway


def test_a_slow_bookie_gets_a_lower_load_factor_and_is_drawn_less(observed_cluster, tmp_path):
    with QuireClient(observed_cluster.gateway_target, observed_cluster.registry_target) as client:
        for _ in range(6):
            metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2)
            ledger = f"{metadata.ledger_id.scope_id}:{metadata.ledger_id.ledger_id}"
            for _ in range(20):
                client.append_all(ledger, [b"y" * 1024] * 5)
    time.sleep(1.5)  # spans are exported in batches every half second
    telemetry = observed_cluster.data_dir / "telemetry"
    assert list(telemetry.glob("bookie-*-samples.*.jsonl")), "bookies wrote no disk samples"

    result = subprocess.run(
        [
            sys.executable, "-m", "quire_client.cli", "--registry", observed_cluster.registry_target,
            "telemetry", "analyze", "--input", str(telemetry), "--output", str(tmp_path / "report"),
            "--master", "local[2]", "--window", "1m", "--publish",
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    factors = json.loads((tmp_path / "report" / "load_factors.json").read_text())
    slow_id = observed_cluster.bookie_id(SLOW)
    others = [observed_cluster.bookie_id(name) for name in observed_cluster.bookie_names if name != SLOW]
    assert factors[slow_id] < min(factors[b] for b in others), factors
    assert "published 3 load factors" in result.stdout

    with grpc.insecure_channel(observed_cluster.placement_target) as channel:
        stub = placement_pb2_grpc.PlacementServiceStub(channel)
        deadline = time.monotonic() + 30
        while True:
            weights = stub.GetPlacementWeights(placement_pb2.GetPlacementWeightsRequest(), timeout=5)
            rows = {b.bookie_id: b for b in weights.bookies}
            if slow_id in rows and rows[slow_id].load_factor < 1:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"placement never picked up the load factors: {weights}")
            time.sleep(0.5)
    assert rows[slow_id].selection_probability < min(rows[b].selection_probability for b in others)
    assert rows[slow_id].load_factor == pytest.approx(factors[slow_id])
