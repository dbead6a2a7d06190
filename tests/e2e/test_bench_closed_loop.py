"""`quire bench`'s one-entry-per-request runs against a real cluster: every
write is acknowledged and every entry written reads back intact (the run
checks each read itself). Its figures are printed, never asserted."""

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
