"""The gateway's admin API (quire.admin.v1.AdminService) and the commands on
it (`quire bookie list`, `bookieinfo`, `placement weights`, `recovery
status`, `cluster status`, `version`), given nothing but the gateway's
address, against a cluster of real processes. The checks of who may call it
are in test_security.py (they need TLS)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest

from quire_client import QuireClient
from quire_client.admin import QuireAdmin
from quire_client.cluster import LocalCluster, free_port
from quire_client.errors import FailedPreconditionError, NotFoundError
from quire_proto.admin.v1 import admin_pb2, admin_pb2_grpc
from tests.e2e.conftest import running_cluster
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # Its own cluster: the last test stops a bookie and the registry.
    with running_cluster(tmp_path_factory.mktemp("admin")) as local:
        yield local


def quire_gateway_only(gateway: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`quire --gateway GATEWAY ARGS`: no registry or placement address anywhere."""
    env = {"PATH": "/usr/bin:/bin", "QUIRE_CONFIG_DIR": "/nonexistent-quire-config"}
    return subprocess.run(
        [sys.executable, "-m", "quire_client.cli", "--gateway", gateway, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def wait_for_auditor(admin: QuireAdmin) -> str:
    holder = ""

    def held() -> bool:
        nonlocal holder
        holder = admin.auditor().holder
        return bool(holder)

    wait_until("a gateway holds the auditor role", held)
    return holder


def test_each_admin_call_answers_through_the_gateway(cluster: LocalCluster) -> None:
    expected = {cluster.bookie_id(name) for name in cluster.bookie_names}
    with QuireAdmin(cluster.gateway_target) as admin:
        records = admin.list_bookies()
        assert {r.bookie_id for r in records} == expected and not any(r.read_only for r in records)
        one = records[0].bookie_id
        assert admin.bookie_service_info(one).record.bookie_id == one
        with pytest.raises(NotFoundError):
            admin.bookie_service_info("127.0.0.1:1")
        with pytest.raises(grpc.RpcError) as malformed:  # past the client's own check: the gateway's
            stub = admin_pb2_grpc.AdminServiceStub(grpc.insecure_channel(cluster.gateway_target))
            stub.GetBookieServiceInfo(admin_pb2.GetBookieServiceInfoRequest(bookie_id="not a bookie id"), timeout=30)
        assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        disks = admin.bookie_disks()
        assert {d.bookie_id for d in disks} == expected
        assert all(not d.error and 0 < d.free_disk_bytes <= d.total_disk_bytes for d in disks), disks
        weights = admin.placement_weights()
        assert weights.policy == "default"
        assert {b.bookie_id for b in weights.bookies} | set(weights.unknown_bookie_ids) == expected
        holder = wait_for_auditor(admin)
        status = admin.recovery_status()
        assert status.auditor.holder == holder and status.total_segments == 0 and not status.segments
        with pytest.raises(FailedPreconditionError) as registered:
            admin.delete_cookie(one)
        assert registered.value.reason == "ERROR_REASON_BOOKIE_ALREADY_REGISTERED"
        report = admin.cluster_status()
        assert sorted(s.service for s in report.services) == ["bookie"] * 3 + ["gateway", "placement", "registry"]
        assert all(s.health == "SERVING" and s.version for s in report.services), report.services
        assert report.writable_bookies == 3 and report.auditor == holder and not report.certificates


def test_admin_commands_need_only_the_gateway(cluster: LocalCluster) -> None:
    gateway = cluster.gateway_target
    listed = quire_gateway_only(gateway, "bookie", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert {r["bookie_id"] for r in json.loads(listed.stdout)} == {cluster.bookie_id(n) for n in cluster.bookie_names}
    info = quire_gateway_only(gateway, "bookieinfo", "-o", "json")
    assert info.returncode == 0 and len(json.loads(info.stdout)["bookies"]) == 3, info.stderr
    weights = quire_gateway_only(gateway, "placement", "weights", "-o", "json")
    assert weights.returncode == 0 and json.loads(weights.stdout)["policy"] == "default", weights.stderr
    recovery = quire_gateway_only(gateway, "recovery", "status", "-o", "json")
    assert recovery.returncode == 0 and json.loads(recovery.stdout)["under_replicated"] == [], recovery.stderr
    endpoints = quire_gateway_only(gateway, "bookie", "endpoints", cluster.bookie_id("bookie-1"), "-o", "json")
    assert endpoints.returncode == 0 and json.loads(endpoints.stdout)["resolved_address"], endpoints.stderr
    # Break-glass without the registry's address: refused before anything is sent, never 127.0.0.1.
    direct = quire_gateway_only(gateway, "--direct", "bookie", "list")
    assert direct.returncode == 2 and "needs the registry's address" in direct.stderr, direct.stderr


def cluster_status(gateway: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = quire_gateway_only(gateway, "cluster", "status", "-o", "json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


def test_cluster_status_healthy_then_degraded_then_unreachable(cluster: LocalCluster) -> None:
    gateway = cluster.gateway_target
    with QuireAdmin(gateway) as admin:
        wait_for_auditor(admin)
    with QuireClient(gateway) as client:
        client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)

    code, healthy = cluster_status(gateway)
    assert (code, healthy["status"], healthy["problems"]) == (0, "healthy", [])
    assert healthy["bookies"] == {"writable": 3, "read_only": 0, "largest_ensemble": 3, "missing": []}
    versions = {s["version"] for s in healthy["services"]}
    assert len(healthy["services"]) == 6 and "" not in versions
    table = quire_gateway_only(gateway, "cluster", "status")
    assert table.returncode == 0 and table.stdout.startswith("cluster: healthy"), table.stderr

    shown = quire_gateway_only(gateway, "version", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["client"] and {s["version"] for s in document["cluster"]} == versions

    cluster.terminate("bookie-3")  # fewer writable bookies than the ledger's ensemble of 3

    def degraded() -> bool:
        return cluster_status(gateway)[0] == 1

    wait_until("cluster status reports the stopped bookie", degraded, poll_seconds=1.0)
    code, report = cluster_status(gateway)
    assert report["status"] == "degraded" and report["bookies"]["writable"] == 2
    assert any("fewer than the largest ensemble in use (3)" in p for p in report["problems"]), report["problems"]

    cluster.kill("registry")
    code, report = cluster_status(gateway)  # a fresh check at each call: no health interval to wait for
    registry = next(s for s in report["services"] if s["service"] == "registry")
    assert (code, report["status"], registry["health"]) == (1, "degraded", "UNREACHABLE"), report

    closed = f"127.0.0.1:{free_port()}"
    code, report = cluster_status(closed)
    assert (code, report["status"]) == (3, "unreachable") and closed in report["problems"][0], report
    version = quire_gateway_only(closed, "version")
    assert version.returncode == 3 and version.stdout.startswith("client "), version.stderr
