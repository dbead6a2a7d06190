"""Durability and crash rows (DUR-*) and the power-loss positive control."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from quire_client.cluster import LocalCluster, grpc_serving
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import N, client_for, finish, latency_figures, metric_sum, new_ledger, scrape, writers

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("durability"), bookies=4) as local:
        yield local


def test_dur1_fault_free_baseline(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("DUR-1", ledgers=4, N=N, E=3, Qw=2, Qa=2)
    history = History()
    with client_for(cluster) as client:
        ledgers = [new_ledger(client, history) for _ in range(4)]
        started = time.monotonic()
        running = [w.start() for w in writers(cluster, ledgers, history, seed)]
        for writer in running:
            writer.join()
            assert writer.error is None, writer.error
        scenario.figures["write_seconds"] = round(time.monotonic() - started, 2)
        scenario.figures.update(latency_figures(running))
        verdict = finish(scenario, client, history, ledgers)
    assert verdict.acked == 4 * N


def test_dur2_one_bookie_sigkill_mid_stream_then_restart(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("DUR-2", N=N, restart_after_seconds=5)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        writer.start()
        kill_at = 200 + seed % 1000
        writer.wait_acked(kill_at)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        victim = next(n for n in cluster.bookie_names if cluster.bookie_id(n) in metadata.ensembles[-1].bookie_ids)
        cluster.kill(victim)
        killed_at = time.monotonic()
        time.sleep(5)
        cluster.start_process(victim)
        writer.join()
        assert writer.error is None, writer.error
        during = [
            (writer.ack_times[i] - writer.invoke_times[i]) * 1000
            for i in writer.ack_times
            if writer.invoke_times.get(i, 0) >= killed_at - 1
        ]
        scenario.figures["killed_at_entry"] = kill_at
        scenario.figures["max_add_ms_during_fault"] = round(max(during), 1) if during else 0.0
        finish(scenario, client, history, [ledger])
    cluster.wait_bookies_registered(4)


def test_dur3_all_bookies_sigkill_then_restart(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("DUR-3", ledgers=2, N=N)
    history = History()
    with client_for(cluster) as client:
        ledgers = [new_ledger(client, history) for _ in range(2)]
        running = [w.start() for w in writers(cluster, ledgers, history, seed, pace_seconds=0.001)]
        for writer in running:
            writer.wait_acked(500)
        for name in cluster.bookie_names:
            cluster.kill(name)
        killed = time.monotonic()
        for writer in running:
            writer.join()
        for name in cluster.bookie_names:
            cluster.start_process(name, wait=False)
        for name in cluster.bookie_names:
            cluster.wait_healthy(name)
        cluster.wait_bookies_registered(4)
        deadline = time.monotonic() + 60
        while True:  # the first successful read after the crash
            try:
                list(client.read(ledgers[0].qualified_name, 0, 0))
                break
            except Exception:
                assert time.monotonic() < deadline, "no read succeeded within 60s of the restart"
                time.sleep(0.2)
        scenario.figures["seconds_to_first_read"] = round(time.monotonic() - killed, 2)
        finish(scenario, client, history, ledgers)


def test_dur8_unsafe_no_sync_is_loud(tmp_path, scenario: Scenario) -> None:  # type: ignore[no-untyped-def]
    scenario.start("DUR-8")
    with fault_cluster(tmp_path, env={"QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA": "true"}) as local:
        name = local.bookie_names[0]
        metrics = scrape(local.bookie_http(name))
        log_text = local.log_path(name).read_text()
        scenario.figures["unsafe_flag_exported"] = metric_sum(metrics, "quire_bookie_sync_disabled") == 1.0
        scenario.figures["warning_logged"] = "QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA" in log_text
        scenario.figures["durable_health_serving"] = grpc_serving(local.bookie_id(name), "durable")
    assert scenario.figures["unsafe_flag_exported"] and scenario.figures["warning_logged"]


@pytest.mark.parametrize("lose_unsynced", [True, False], ids=["control-sync-off", "sync-on"])
def test_dur5_power_loss_positive_control(tmp_path, scenario: Scenario, lose_unsynced: bool) -> None:  # type: ignore[no-untyped-def]
    """Acked entries held only in 'page cache' (never written) are lost by a
    SIGKILL; the checker must see it. With sync on, the same run loses nothing."""
    seed = scenario.start("DUR-5" + ("-control" if lose_unsynced else ""), N=500, lose_unsynced=lose_unsynced)
    env = (
        {"QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA": "true", "QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES": "true"}
        if lose_unsynced
        else {}
    )
    history = History()
    with fault_cluster(tmp_path, env=env) as local, client_for(local) as client:
        ledger = new_ledger(client, history, write_quorum=3, ack_quorum=3)
        (writer,) = writers(local, [ledger], history, seed, count=500)
        writer.start().join()
        assert writer.error is None
        for name in local.bookie_names:
            local.kill(name)  # the "power loss"
        for name in local.bookie_names:
            local.start_process(name)
        local.wait_bookies_registered(3)
        verdict = finish(scenario, client, history, [ledger], expect_clean=not lose_unsynced)
    if lose_unsynced:
        assert verdict.acked_lost > 0, "positive control: the checker must see the lost acknowledged entries"
