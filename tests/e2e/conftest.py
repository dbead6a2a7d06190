"""A whole cluster (etcd and every service as its own process) per module."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from quire_client import QuireClient
from quire_client.cluster import LocalCluster, Ports
from quire_client.devcerts import CertBundle

HAPROXY_INSTALLED = Path("/usr/sbin/haproxy").exists()
NO_HAPROXY = "haproxy is not installed (make setup)"


@contextmanager
def running_cluster(
    data_dir: Path,
    bookies: int = 3,
    gateways: int = 1,
    *,
    balancer: bool = False,
    tls: CertBundle | None = None,
    **env: str,
) -> Iterator[LocalCluster]:
    """Start a local cluster and stop every process it started, whatever happens.
    With `balancer`, HAProxy takes the gateway port in front of the gateways
    (round robin): `gateway_target` is then the balancer. With `tls`, every
    service speaks mutual TLS with certificates of that bundle."""
    local = LocalCluster(
        data_dir,
        Ports.free(bookies=bookies, balanced_gateways=gateways if balancer else 0),
        extra_env={"QUIRE_TELEMETRY_DIR": str(data_dir / "telemetry"), "QUIRE_BOOKIE_TTL_SECONDS": "3", **env},
        gateways=gateways,
        balancer=balancer,
        tls=tls,
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as local:
        yield local


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[QuireClient]:
    with QuireClient(cluster.gateway_target, timeout=30) as quire:
        yield quire
