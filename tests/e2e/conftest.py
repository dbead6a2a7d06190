"""A whole cluster (etcd and every service as its own process) per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from quire_client import QuireClient
from quire_client.cluster import LocalCluster, Ports


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("cluster")
    local = LocalCluster(
        data_dir,
        Ports.free(bookies=3),
        extra_env={"QUIRE_TELEMETRY_DIR": str(data_dir / "telemetry"), "QUIRE_BOOKIE_TTL_SECONDS": "3"},
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[QuireClient]:
    with QuireClient(cluster.gateway_target, cluster.registry_target, timeout=30) as quire:
        yield quire
