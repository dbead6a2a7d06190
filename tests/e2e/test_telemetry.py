"""Telemetry end to end: every service's metrics over HTTP (the RED metrics
of its calls and its build among them), and the loop from a slowed bookie's
telemetry through the Spark stage to placement's weights."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from quire_client import QuireClient
from quire_client.cluster import LocalCluster, Ports
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc

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


def acknowledged_entries(metrics_text: str) -> float:
    """quire_gateway_entries_acknowledged_total in a /metrics page (0 before the first entry)."""
    found = re.search(r"^quire_gateway_entries_acknowledged_total(?:\{[^}]*\})? (\S+)$", metrics_text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_every_service_serves_prometheus_metrics_and_status(observed_cluster):
    ports = observed_cluster.ports
    acknowledged_before = acknowledged_entries(get(f"http://127.0.0.1:{ports.gateway_http}/metrics"))
    with QuireClient(observed_cluster.gateway_target) as client:
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
    assert acknowledged_entries(gateway) - acknowledged_before == 10, "each of the 10 entries counted once"


Outcome = tuple[str, str, str]  # (rpc_method, rpc_grpc_status_code, quire_error_reason)
NOT_FOUND, INVALID_ARGUMENT = str(grpc.StatusCode.NOT_FOUND.value[0]), str(grpc.StatusCode.INVALID_ARGUMENT.value[0])
MISSING = common_pb2.LedgerId(scope_id=7, ledger_id=987_654_321)


def calls_by_outcome(metrics_url: str, service: str) -> Counter[Outcome]:
    """`rpc_server_duration_seconds_count` of one gRPC service, summed by method, code and reason."""
    calls: Counter[Outcome] = Counter()
    for family in text_string_to_metric_families(get(metrics_url)):
        for sample in family.samples:
            if sample.name == "rpc_server_duration_seconds_count" and sample.labels["rpc_service"] == service:
                labels = sample.labels
                outcome = (labels["rpc_method"], labels["rpc_grpc_status_code"], labels.get("quire_error_reason", ""))
                calls[outcome] += int(sample.value)
    return calls


def failing(call: Callable[[], object], code: grpc.StatusCode) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    assert raised.value.code() == code, raised.value


def test_every_service_counts_calls_and_errors_by_method_code_and_reason(observed_cluster):
    """RED metrics from the one server interceptor, in every service: calls that
    succeed and calls that fail with known codes appear by method, numeric code
    and reason; a streaming call counts once however it ends."""
    cluster = observed_cluster
    endpoints = {
        "gateway": (f"http://{cluster.gateway_http()}/metrics", "quire.gateway.v1.LedgerService"),
        "registry": (f"http://127.0.0.1:{cluster.ports.registry_http}/metrics", "quire.registry.v1.RegistryService"),
        "placement": (
            f"http://127.0.0.1:{cluster.ports.placement_http}/metrics",
            "quire.placement.v1.PlacementService",
        ),
        "bookie": (f"http://{cluster.bookie_http('bookie-1')}/metrics", "quire.bookie.v1.BookieService"),
    }
    before = {name: calls_by_outcome(*endpoint) for name, endpoint in endpoints.items()}

    with grpc.insecure_channel(cluster.gateway_target) as channel:
        ledgers = ledger_pb2_grpc.LedgerServiceStub(channel)
        ledgers.CreateLedger(ledger_pb2.CreateLedgerRequest(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2))
        for _ in range(3):
            failing(
                lambda: ledgers.GetLedgerMetadata(ledger_pb2.GetLedgerMetadataRequest(ledger_id=MISSING), timeout=10),
                grpc.StatusCode.NOT_FOUND,
            )
        bad_quorum = ledger_pb2.CreateLedgerRequest(ensemble_size=3, write_quorum_size=2, ack_quorum_size=3)
        for _ in range(2):
            failing(lambda: ledgers.CreateLedger(bad_quorum, timeout=10), grpc.StatusCode.INVALID_ARGUMENT)
        # A streaming call that fails: one call, recorded at its end.
        failing(
            lambda: list(ledgers.ReadEntries(ledger_pb2.ReadEntriesRequest(ledger_id=MISSING), timeout=10)),
            grpc.StatusCode.NOT_FOUND,
        )
    with grpc.insecure_channel(cluster.registry_target) as channel:
        registry = registry_pb2_grpc.RegistryServiceStub(channel)
        for _ in range(2):
            failing(
                lambda: registry.GetLedgerMetadata(
                    registry_pb2.GetLedgerMetadataRequest(ledger_id=MISSING), timeout=10
                ),
                grpc.StatusCode.NOT_FOUND,
            )
    with grpc.insecure_channel(cluster.placement_target) as channel:
        placement = placement_pb2_grpc.PlacementServiceStub(channel)
        too_small = placement_pb2.NewEnsembleRequest(ensemble_size=2, write_quorum_size=3, ack_quorum_size=2)
        failing(lambda: placement.NewEnsemble(too_small, timeout=10), grpc.StatusCode.INVALID_ARGUMENT)
    with grpc.insecure_channel(cluster.bookie_id("bookie-1")) as channel:
        bookie = bookie_pb2_grpc.BookieServiceStub(channel)
        failing(
            lambda: bookie.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=MISSING, entry_id=0), timeout=10),
            grpc.StatusCode.NOT_FOUND,
        )

    after = {name: calls_by_outcome(*endpoint) for name, endpoint in endpoints.items()}
    made = {name: after[name] - before[name] for name in endpoints}
    ledger_not_found = "ERROR_REASON_LEDGER_NOT_FOUND"
    assert made["gateway"] == Counter(
        {
            ("CreateLedger", "0", ""): 1,
            ("GetLedgerMetadata", NOT_FOUND, ledger_not_found): 3,
            ("CreateLedger", INVALID_ARGUMENT, "ERROR_REASON_INVALID_QUORUM"): 2,
            ("ReadEntries", NOT_FOUND, ledger_not_found): 1,
        }
    ), made["gateway"]
    # The registry also answered the gateway's own lookups of the missing ledger.
    assert made["registry"][("GetLedgerMetadata", NOT_FOUND, ledger_not_found)] >= 2, made["registry"]
    # The gateway's creates go in batches (call_batches.py), a lone one too.
    assert made["registry"][("CreateLedgerMetadataBatch", "0", "")] == 1, made["registry"]
    assert made["placement"][("NewEnsembles", "0", "")] == 1, made["placement"]
    assert made["placement"][("NewEnsemble", INVALID_ARGUMENT, "ERROR_REASON_INVALID_QUORUM")] == 1, made["placement"]
    assert made["bookie"][("ReadEntry", NOT_FOUND, "ERROR_REASON_LEDGER_NOT_FOUND")] == 1, made["bookie"]


def test_every_service_reports_its_version(observed_cluster):
    cluster = observed_cluster
    admin = {
        "gateway": cluster.gateway_http(),
        "registry": f"127.0.0.1:{cluster.ports.registry_http}",
        "placement": f"127.0.0.1:{cluster.ports.placement_http}",
        **{name: cluster.bookie_http(name) for name in cluster.bookie_names},
    }
    release = importlib.metadata.version("quire-ledger")
    for name, address in admin.items():
        status = json.loads(get(f"http://{address}/status"))
        assert status["version"] == release, (name, status)
        assert re.fullmatch("[0-9a-f]{40}", status.get("revision", "0" * 40)), (name, status)
        build = [
            sample
            for family in text_string_to_metric_families(get(f"http://{address}/metrics"))
            for sample in family.samples
            if sample.name == "quire_build_info"
        ]
        assert len(build) == 1 and build[0].value == 1, (name, build)
        assert build[0].labels["version"] == release, (name, build)
        assert build[0].labels.get("revision", "") == status.get("revision", ""), (name, build, status)


def test_a_slow_bookie_gets_a_lower_load_factor_and_is_drawn_less(observed_cluster, tmp_path):
    with QuireClient(observed_cluster.gateway_target) as client:
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
