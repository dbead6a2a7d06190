"""`quire bench`'s one-entry-per-request runs against a real cluster: every
write is acknowledged and every entry written reads back intact (the run
checks each read itself). Its figures are printed, never asserted; with the
servers' PIDs each run reports CPU for each of them, and by thread."""

from __future__ import annotations

import pytest

from quire_client.bench_closed import run_closed_loop
from quire_client.cluster import LocalCluster

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("rpc", ["stream", "unary"])
def test_one_entry_per_request_writes_and_reads_back(cluster: LocalCluster, rpc: str) -> None:
    result = run_closed_loop(cluster.gateway_target, (3, 3, 2), rpc, writers=4, entry_bytes=1024, seconds=1.0)
    assert result.writes > 0 and result.reads > 0
    assert result.reads <= result.writes
    assert result.cores_busy is None, "without the servers' CPU there is no count of the cores kept busy"


def test_with_the_servers_pids_each_process_reports_its_cpu_per_write(cluster: LocalCluster) -> None:
    names = ["gateway", *cluster.bookie_names]
    pids = {name: pid for name in names if (pid := cluster.pid(name)) is not None}
    result = run_closed_loop(
        cluster.gateway_target, (3, 3, 2), "stream", writers=4, entry_bytes=1024, seconds=1.0, server_pids=pids
    )
    assert set(result.server_cpu_us_per_write) == set(names)
    assert all(us >= 0 for us in result.server_cpu_us_per_write.values())
    assert result.server_cpu_us_per_write["gateway"] > 0, "the gateway served every write"
    # The client's own CPU, and the cores servers and client kept busy together.
    assert result.client_cpu_us_per_write > 0
    assert result.cores_busy > 0
    # Each process's CPU by thread, under the names the services give their threads.
    threads = result.server_cpu_us_per_write_by_thread
    assert set(threads) == set(names)
    assert {"main", "grpc-poller"} <= set(threads["gateway"])
    assert all("bookie-writer" in threads[name] for name in cluster.bookie_names)
