"""Network rows through the userspace TCP proxy (no network namespaces here)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from quire_client.cluster import LocalCluster
from quire_common.ids import LedgerId
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.proxy import TcpProxy
from tests.faults.report import Scenario
from tests.faults.scenarios import N, client_for, finish, latency_figures, new_ledger, writers

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("network"), bookies=4) as local:
        yield local


def test_net6_latency_jitter_and_drop(cluster: LocalCluster, scenario: Scenario) -> None:
    """One bookie behind the proxy: 75 ms ± 50 ms per chunk throughout, and 50 %
    of chunks dropped (connection reset) for one second mid-stream."""
    seed = scenario.start("NET-6", N=N, delay_ms=75, jitter_ms=50, drop=0.5, drop_seconds=1)
    history = History()
    name = cluster.bookie_names[0]
    port = cluster.ports.bookies[0]
    process = cluster.processes[name]
    with TcpProxy("127.0.0.1", port, seed=seed) as proxy:
        process.env["QUIRE_BOOKIE_ADVERTISED_PORT"] = str(proxy.listen_port)
        cluster.restart(name)
        cluster.wait_bookies_registered(4)
        try:
            with client_for(cluster) as client:
                ledgers: list[LedgerId] = []
                while len(ledgers) < 2:  # ledgers whose ensemble includes the proxied bookie
                    ledger = new_ledger(client, history)
                    metadata, _ = client.ledger_metadata(ledger.qualified_name)
                    if cluster.bookie_id(name) in metadata.ensembles[0].bookie_ids:
                        ledgers.append(ledger)
                proxy.faults.delay_seconds, proxy.faults.jitter_seconds = 0.075, 0.05
                running = [w.start() for w in writers(cluster, ledgers, history, seed, pace_seconds=0.002)]
                running[0].wait_acked(300)
                proxy.faults.drop = 0.5
                time.sleep(1)
                proxy.faults.drop = 0.0
                for writer in running:
                    writer.join()
                    assert writer.error is None, writer.error
                scenario.figures.update(latency_figures(running))
                scenario.figures["chunks_dropped"] = proxy.dropped
                scenario.figures["chunks_forwarded"] = proxy.chunks
                proxy.faults.delay_seconds = proxy.faults.jitter_seconds = 0.0
                finish(scenario, client, history, ledgers)
        finally:
            del process.env["QUIRE_BOOKIE_ADVERTISED_PORT"]
            cluster.restart(name)
