"""quire_client.testing.LocalQuireCluster: the Docker-free twin of QuireContainer."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from quire_api.ids import LedgerId
from quire_client import QuireAdmin, QuireClient
from quire_client.testing import LocalQuireCluster
from quire_proto.registry.v1 import registry_pb2

pytestmark = pytest.mark.e2e


def test_local_cluster_getters_write_read_and_stop() -> None:
    cluster = LocalQuireCluster().with_bookies(3)
    with cluster:
        with QuireClient(cluster.get_gateway_target(), timeout=30) as quire:
            metadata = quire.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
            ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
            quire.append_all(ledger, [b"a", b"b"])
            assert [entry.payload for entry in quire.read(ledger)] == [b"a", b"b"]
        with QuireAdmin(cluster.get_gateway_target(), timeout=30) as admin:
            assert len(admin.list_bookies(registry_pb2.BOOKIE_STATE_WRITABLE)) == 3
        with urllib.request.urlopen(f"http://{cluster.get_etcd_endpoint()}/health", timeout=5) as response:
            assert json.loads(response.read())["health"] == "true"
        pids = [cluster.cluster.pid(name) for name in cluster.cluster.processes]
        data_dir = cluster.cluster.data_dir
    assert all(pid is not None for pid in pids)
    assert not data_dir.exists()  # its own temporary directory is removed at stop


def test_configuring_a_started_cluster_is_refused() -> None:
    cluster = LocalQuireCluster()
    cluster._cluster = object()  # type: ignore[assignment]  # as if started
    with pytest.raises(RuntimeError, match="before start"):
        cluster.with_bookies(1)


def test_testing_module_imports_without_testcontainers() -> None:
    # LocalQuireCluster users need not install testcontainers: block it and import.
    code = (
        "import sys; sys.modules['testcontainers'] = None; sys.modules['docker'] = None\n"
        "import quire_client.testing as t\n"
        "assert t.LocalQuireCluster\n"
        "assert 'testcontainers' in t.container_support()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
