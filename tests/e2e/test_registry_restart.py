"""A registry restart on a cluster of its own: its bookies' leases are long
enough to outlive a restart on a busy machine. At the 3 s the other e2e
clusters use, a restart that took a few seconds under load let the leases
run out, and the bookies registered afresh for a reason the test is not about."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest

from quire_client.cluster import LocalCluster, tooling_channel
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.e2e.conftest import running_cluster

pytestmark = pytest.mark.e2e

# Far longer than a registry's stop and start plus a bookie's reconnect pause.
LEASE_SECONDS = "30"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("registry-restart"), QUIRE_BOOKIE_TTL_SECONDS=LEASE_SECONDS) as local:
        yield local


def test_a_registry_restart_leaves_every_bookie_on_its_lease(cluster, client):
    """SIGTERM the registry and start it again. The stop ends its open-ended
    streams at once with UNAVAILABLE (a bookie watch opened here, and the
    gateway's ledger watch), rather than letting them wait out the drain to
    be cancelled and logged as errors; it revokes no lease, and each bookie
    resumes its own lease with the new registry, so none leaves the cluster.
    Without that, either the stop revoked them (the bookies registered
    afresh) or, as once, the revoke met the closed etcd client."""
    log = cluster.log_path("registry")
    mark = log.stat().st_size
    with tooling_channel(cluster.registry_target, cluster.tls) as channel:
        watch = registry_pb2_grpc.RegistryServiceStub(channel).WatchBookies(registry_pb2.WatchBookiesRequest())
        while next(watch).type != registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE:
            pass
        cluster.restart("registry")  # returns once every bookie registered again
        with pytest.raises(grpc.RpcError) as ended:
            for _ in watch:
                pass
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "registry is stopping" in ended.value.details()
    lines = [json.loads(line) for line in log.read_bytes()[mark:].splitlines() if line.startswith(b"{")]
    messages = [line["msg"] for line in lines]
    assert not [line for line in lines if line["level"] in ("ERROR", "CRITICAL")], messages
    for name in cluster.bookie_names:
        bookie = cluster.bookie_id(name)
        about_this_bookie = [f"{line['ts']} {line['msg']}" for line in lines if bookie in line["msg"]]
        assert any(m.startswith(f"registry stopping: bookie {bookie} keeps lease") for m in messages), about_this_bookie
        assert any(m.startswith(f"bookie {bookie} resumed its registration on lease") for m in messages), (
            about_this_bookie
        )
    assert client.create_ledger().ledger_id  # placement sees every bookie again
