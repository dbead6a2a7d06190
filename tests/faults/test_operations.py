"""Operations rows (OPS-*): auto-recovery after a permanent bookie loss, the
decommission command, rolling restarts, graceful shutdown, smoke as health check."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from quire_client.cli import main as cli_main
from quire_client.cluster import LocalCluster, grpc_serving
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import (
    admin_for,
    client_for,
    closed_ledgers,
    finish,
    metric_sum,
    new_ledger,
    registered_bookies,
    scrape,
    thinly_replicated,
    under_replicated,
    writers,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

AUDITOR = {"QUIRE_AUDITOR_INTERVAL_SECONDS": "1", "QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS": "4"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("operations"), bookies=5, env=AUDITOR) as local:
        yield local


def name_of(cluster: LocalCluster, bookie_id: str) -> str:
    return next(n for n in cluster.bookie_names if cluster.bookie_id(n) == bookie_id)


def live_names(cluster: LocalCluster) -> list[str]:
    return [n for n in cluster.bookie_names if cluster.pid(n) is not None]


def rereplications(cluster: LocalCluster) -> int:
    return cluster.log_path("gateway").read_text().count("entries copied from lost bookie")


def test_ops3_rolling_restart_causes_no_rereplication(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("OPS-3", N=300, lost_bookie_delay_seconds=4)
    history = History()
    with client_for(cluster) as client:
        ledgers = closed_ledgers(cluster, client, history, seed, 300)
        before = rereplications(cluster)
        for name in cluster.bookie_names:
            cluster.restart(name)  # back well within the auditor's delay
        cluster.wait_bookies_registered(5)
        time.sleep(3)
        scenario.figures["rereplication_tasks"] = rereplications(cluster) - before
        finish(scenario, client, history, ledgers)
    assert scenario.figures["rereplication_tasks"] == 0


def test_ops4_permanent_bookie_loss_is_rereplicated(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("OPS-4", N=300, ledgers=3, **{k.lower(): v for k, v in AUDITOR.items()})
    history = History()
    with client_for(cluster) as client:
        ledgers = closed_ledgers(cluster, client, history, seed, 300)
        metadata, _ = client.ledger_metadata(ledgers[0].qualified_name)
        victim_id = metadata.ensembles[0].bookie_ids[0]
        cluster.terminate(name_of(cluster, victim_id))  # gone for good
        lost_at = time.monotonic()
        deadline = lost_at + 90
        seen_under = False
        gauge_max = 0.0
        while True:
            left = [s for s in under_replicated(cluster) if s.bookie_id == victim_id]
            seen_under = seen_under or bool(left)
            gauge_max = max(gauge_max, metric_sum(scrape(f"127.0.0.1:{cluster.ports.gateway_http}"),
                                                  "quire_gateway_under_replicated_segments"))  # fmt: skip
            if seen_under and not left:
                break
            assert time.monotonic() < deadline, f"still under-replicated after 90s: {left}"
            time.sleep(0.5)
        scenario.figures["seconds_to_full_replication"] = round(time.monotonic() - lost_at, 2)
        scenario.figures["under_replicated_gauge_max"] = gauge_max
        scenario.figures["entries_below_qw_after"] = sum(
            thinly_replicated(cluster, client, ledger) for ledger in ledgers
        )
        finish(scenario, client, history, ledgers)
    assert scenario.figures["entries_below_qw_after"] == 0
    assert gauge_max >= 1  # OBS-1: the under-replicated gauge showed the lost bookie's segments


def test_ops5_decommission_via_cli(cluster: LocalCluster, scenario: Scenario, capsys) -> None:  # type: ignore[no-untyped-def]
    seed = scenario.start("OPS-5", N=300)
    history = History()
    with client_for(cluster) as client:
        ledgers = closed_ledgers(cluster, client, history, seed, 300)
        metadata, _ = client.ledger_metadata(ledgers[0].qualified_name)
        victim_id = metadata.ensembles[0].bookie_ids[1]
        target = ["--gateway", cluster.gateway_target, "--registry", cluster.registry_target]
        assert cli_main([*target, "bookie", "decommission", victim_id, "--timeout", "1"]) == 1  # still running
        cluster.terminate(name_of(cluster, victim_id))
        started = time.monotonic()
        status = cli_main([*target, "bookie", "decommission", victim_id, "--timeout", "90"])
        scenario.figures["decommission_seconds"] = round(time.monotonic() - started, 2)
        scenario.figures["exit_status"] = status
        scenario.figures["entries_below_qw_after"] = sum(
            thinly_replicated(cluster, client, ledger) for ledger in ledgers
        )
        scenario.figures["registration_removed"] = all(r.bookie_id != victim_id for r in registered_bookies(cluster))
        with admin_for(cluster) as admin:
            scenario.figures["cookie_removed"] = not admin.delete_cookie(victim_id)  # already gone: nothing to delete
        finish(scenario, client, history, ledgers)
    assert status == 0
    assert scenario.figures["registration_removed"] and scenario.figures["cookie_removed"]
    assert scenario.figures["entries_below_qw_after"] == 0
    assert "decommissioned" in capsys.readouterr().out


def test_ops6_graceful_shutdown_under_load(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("OPS-6", N=2000)
    history = History()
    for name in cluster.bookie_names:  # a spare for the ensemble change (earlier rows stopped some)
        cluster.start_process(name)
    cluster.wait_bookies_registered(5)
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.001)
        writer.start().wait_acked(300)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        victim = name_of(cluster, metadata.ensembles[-1].bookie_ids[0])
        cluster.terminate(victim)  # SIGTERM: health NOT_SERVING, drain, sync
        writer.join()
        scenario.figures["writer_error"] = str(writer.error or "")
        scenario.figures["inflight_adds_left_unknown"] = len(history.of("add", "unknown"))
        finish(scenario, client, history, [ledger])
        cluster.start_process(victim)
    assert writer.error is None


def test_ops7_smoke_command_as_health_check(cluster: LocalCluster, scenario: Scenario) -> None:
    scenario.start("OPS-7")
    target = ["--gateway", cluster.gateway_target, "--registry", cluster.registry_target]
    healthy = cli_main([*target, "dev", "smoke"])
    live = live_names(cluster)
    for name in live:
        cluster.kill(name)  # degraded: no bookie at all
    try:
        degraded = cli_main([*target, "dev", "smoke"])
    finally:
        for name in live:
            cluster.start_process(name)
    scenario.figures["healthy_exit"] = healthy
    scenario.figures["degraded_exit"] = degraded
    scenario.figures["correct_exit_codes"] = int(healthy == 0) + int(degraded != 0)
    assert scenario.figures["correct_exit_codes"] == 2


def test_obs3_bookie_health_goes_not_serving_on_sigterm(cluster: LocalCluster, scenario: Scenario) -> None:
    scenario.start("OBS-3")
    name = live_names(cluster)[0]
    target = cluster.bookie_id(name)
    assert grpc_serving(target)
    popen = cluster.processes[name].popen
    assert popen is not None
    popen.terminate()
    transitions = ["SERVING"]
    deadline = time.monotonic() + 15
    while popen.poll() is None and time.monotonic() < deadline:
        state = "SERVING" if grpc_serving(target) else "NOT_SERVING"
        if state != transitions[-1]:
            transitions.append(state)
        time.sleep(0.02)
    popen.wait(10)
    cluster.start_process(name)
    scenario.figures["health_sequence"] = transitions
    assert transitions[-1:] == ["NOT_SERVING"] or popen.returncode is not None
