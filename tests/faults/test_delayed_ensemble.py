"""Delayed ensemble change (ENS-3): with Qw=3, Qa=2 and
QUIRE_GATEWAY_DELAY_ENSEMBLE_CHANGE, a dead ensemble member is left out
instead of replaced while every write set keeps Qa live members; the ledger
is marked under-replicated, and once it is closed and the bookie is back, the
auditor copies what the bookie missed back to it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from quire_api.ids import LedgerId
from quire_api.replication import markers
from quire_client.cluster import LocalCluster
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import (
    N,
    client_for,
    finish,
    latency_figures,
    new_ledger,
    thinly_replicated,
    under_replicated,
    writers,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

SETTINGS = {
    "QUIRE_GATEWAY_DELAY_ENSEMBLE_CHANGE": "true",
    "QUIRE_AUDITOR_INTERVAL_SECONDS": "1",
    "QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS": "60",  # the bookie comes back well before it counts as lost
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("delayed"), bookies=4, env=SETTINGS) as local:
        yield local


def test_ens3_delayed_ensemble_change(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("ENS-3", N=N, ledgers=2, E=3, Qw=3, Qa=2, fault="SIGKILL one ensemble member, restart later")
    history = History()
    with client_for(cluster) as client:
        ledgers: list[LedgerId] = [new_ledger(client, history, write_quorum=3) for _ in range(2)]
        first, _ = client.ledger_metadata(ledgers[0].qualified_name)
        victim_id = first.ensembles[0].bookie_ids[1]
        victim = next(n for n in cluster.bookie_names if cluster.bookie_id(n) == victim_id)
        running = [w.start() for w in writers(cluster, ledgers, history, seed, pace_seconds=0.002)]
        running[0].wait_acked(300)
        cluster.kill(victim)
        for writer in running:
            writer.join()
            assert writer.error is None, writer.error
        scenario.figures.update(latency_figures(running))

        ensemble_changes = 0
        marked: dict[str, int] = {}
        for ledger in ledgers:
            metadata, _ = client.ledger_metadata(ledger.qualified_name)
            ensemble_changes += len(metadata.ensembles) - 1
            marked.update({f"{ledger.qualified_name} {b}": first for b, (first, _) in markers(metadata).items()})
        scenario.figures.update(
            {"ensemble_changes": ensemble_changes, "under_replicated_marked": bool(marked), "markers": marked}
        )

        # The bookie returns: `quire recovery status` lists what it may lack (not repaired
        # while the ledgers are open). The checker's read-back closes them (recovery); the
        # auditor then copies what the bookie missed back to it and drops the markers.
        cluster.start_process(victim)
        cluster.wait_bookies_registered(4)
        listed = [s for s in under_replicated(cluster) if s.why == "flagged" and s.bookie_id == victim_id]
        scenario.figures["recovery_status_rows_flagged"] = len(listed)
        finish(scenario, client, history, ledgers)
        started = time.monotonic()
        wait_until(
            "the auditor repairing the marked ledgers",
            lambda: not any(markers(client.ledger_metadata(ledger.qualified_name)[0]) for ledger in ledgers),
            poll_seconds=0.5,
        )
        scenario.figures["repair_seconds"] = round(time.monotonic() - started, 2)
        scenario.figures["entries_below_qw_after"] = sum(
            thinly_replicated(cluster, client, ledger) for ledger in ledgers
        )
    assert ensemble_changes == 0
    assert f"{ledgers[0].qualified_name} {victim_id}" in marked and listed
    assert scenario.figures["entries_below_qw_after"] == 0
