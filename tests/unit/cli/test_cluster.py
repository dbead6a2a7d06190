"""`quire cluster up` options reach LocalCluster as `make run` passes them (nothing is started)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from quire_client import devcerts
from quire_client.cli import cluster as cluster_cli
from quire_client.cluster import ClusterError, Ports


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


def test_base_port_moves_every_port_of_the_cluster(run, monkeypatch, tmp_path):
    monkeypatch.setattr(cluster_cli, "LocalCluster", RefusingCluster)
    run("cluster", "up", "--base-port", "12000", "--bookies", "4", "--gateways", "2")
    built = RefusingCluster.built[-1]
    assert built["bookies"] == [12010, 12012, 12014, 12016]
    ports = Ports.from_base(12000, bookies=4, balanced_gateways=2)
    every = ports.all(balanced_gateways=2)
    assert len(set(every)) == len(every)  # none shared
    assert min(every) == 12000 and max(every) == 12000 + Ports.span(4, 2) - 1  # none left at a fixed default
    too_high = run("cluster", "up", "--base-port", "65530")
    assert too_high.exit_code == 2 and "--base-port" in too_high.stderr and "65535" in too_high.stderr


class StartingCluster(RefusingCluster):
    """Starts (nothing) and is stopped at once, as Ctrl-C would: what `up` prints and writes."""

    def __init__(self, data_dir: Path, ports: Any, **options: Any) -> None:
        super().__init__(data_dir, ports, **options)
        self.ports = ports
        self.balancer = None
        self.bookie_names = [f"bookie-{i + 1}" for i in range(len(ports.bookies))]
        self.processes: dict[str, Any] = {}
        self.gateway_target = f"127.0.0.1:{ports.gateway}"
        self.registry_target = f"127.0.0.1:{ports.registry}"
        self.placement_target = f"127.0.0.1:{ports.placement}"

    def start(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # `up` handles it: stop at the first wait

    def gateway_http(self, name: str = "gateway") -> str:
        return f"127.0.0.1:{self.ports.gateway_http}"

    def bookie_id(self, name: str) -> str:
        return f"127.0.0.1:{self.ports.bookies[self.bookie_names.index(name)]}"

    def bookie_http(self, name: str) -> str:
        return f"127.0.0.1:{self.ports.http_port(self.bookie_names.index(name))}"

    def stop(self) -> None:
        pass


def test_up_prints_every_port_and_writes_the_context(run, monkeypatch, tmp_path):
    monkeypatch.setattr(cluster_cli, "LocalCluster", StartingCluster)
    started = run("cluster", "up", "--base-port", "20000", "--data-dir", str(tmp_path / "d"))
    assert started.exit_code == 0, started.stderr
    for port in Ports.from_base(20000).all():
        assert f":{port}" in started.stdout or f"on {port}" in started.stdout, port
    shown = json.loads(run("context", "show", "local", "-o", "json").stdout)
    assert (shown["gateway"], shown["registry"], shown["placement"]) == (
        "127.0.0.1:20000", "127.0.0.1:20001", "127.0.0.1:20002"
    )  # fmt: skip
    assert "quire --context local ledger create" in started.stdout
    run("cluster", "up", "--base-port", "21000", "--write-context", "", "--data-dir", str(tmp_path / "d"))
    assert json.loads(run("context", "show", "local", "-o", "json").stdout)["gateway"] == "127.0.0.1:20000"
