"""`quire cluster up` options reach LocalCluster as `make run` passes them (nothing is started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quire_client import devcerts
from quire_client.cli import cluster as cluster_cli
from quire_client.cluster import ClusterError


class RefusingCluster:
    """Records how it was built; start() fails as a taken port would."""

    built: list[dict[str, Any]] = []

    def __init__(self, data_dir: Path, ports: Any, **options: Any) -> None:
        self.data_dir = data_dir
        RefusingCluster.built.append({"data_dir": data_dir, "bookies": ports.bookies, **options})

    def start(self) -> None:
        raise ClusterError("etcd did not start: port 2379 is taken")


def test_up_passes_gateways_bookies_data_dir_and_tls(run, monkeypatch, tmp_path):
    monkeypatch.setattr(cluster_cli, "LocalCluster", RefusingCluster)
    monkeypatch.setattr(devcerts, "CertBundle", lambda directory: ("bundle", directory))
    result = run(
        "cluster", "up", "--gateways", "3", "--tls", str(tmp_path), "--bookies", "4", "--data-dir", str(tmp_path / "d")
    )
    assert result.exit_code == 3 and "port 2379 is taken" in result.stderr
    built = RefusingCluster.built[-1]
    assert built["data_dir"] == tmp_path / "d" and built["bookies"] == [3181, 3182, 3183, 3184]
    assert built["gateways"] == 3 and built["balancer"] is True and built["tls"] == ("bundle", tmp_path)


def test_up_defaults_to_data_or_quire_data_dir(run, monkeypatch, tmp_path):
    monkeypatch.setattr(cluster_cli, "LocalCluster", RefusingCluster)
    run("cluster", "up")
    assert RefusingCluster.built[-1]["data_dir"] == Path("data") and RefusingCluster.built[-1]["balancer"] is False
    monkeypatch.setenv("QUIRE_DATA_DIR", str(tmp_path))
    plain = run("cluster", "up")
    assert RefusingCluster.built[-1]["data_dir"] == tmp_path and RefusingCluster.built[-1]["tls"] is None
    assert plain.stdout.startswith("plaintext development mode")
