"""The standalone (all-in-one) mode's settings and its listener rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from quire_client.cluster import LocalCluster, Ports
from quire_client.standalone import advertised_host, ports_from_env, publish
from quire_common.config import ConfigError


def test_defaults_are_the_design_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "QUIRE_STANDALONE_BOOKIES",
        "QUIRE_STANDALONE_BOOKIE_PORTS",
        "QUIRE_STANDALONE_BOOKIE_HTTP_PORTS",
        "QUIRE_STANDALONE_GATEWAY_PORT",
        "QUIRE_STANDALONE_GATEWAY_HTTP_PORT",
    ):
        monkeypatch.delenv(name, raising=False)
    assert ports_from_env() == Ports()


def test_ports_and_bookie_count_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIRE_STANDALONE_BOOKIES", "2")
    monkeypatch.setenv("QUIRE_STANDALONE_BOOKIE_PORTS", "4001,4002")
    monkeypatch.setenv("QUIRE_STANDALONE_BOOKIE_HTTP_PORTS", "5001,5002")
    monkeypatch.setenv("QUIRE_STANDALONE_GATEWAY_PORT", "4000")
    monkeypatch.setenv("QUIRE_STANDALONE_GATEWAY_HTTP_PORT", "4100")
    ports = ports_from_env()
    assert ports.gateway_http == 4100
    assert ports.bookies == [4001, 4002]
    assert [ports.http_port(i) for i in range(2)] == [5001, 5002]
    assert ports.gateway == 4000


def test_consecutive_bookie_ports_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIRE_STANDALONE_BOOKIES", "5")
    monkeypatch.delenv("QUIRE_STANDALONE_BOOKIE_PORTS", raising=False)
    monkeypatch.delenv("QUIRE_STANDALONE_BOOKIE_HTTP_PORTS", raising=False)
    ports = ports_from_env()
    assert ports.bookies == [3181, 3182, 3183, 3184, 3185]
    assert ports.http_port(0) == 8181


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"QUIRE_STANDALONE_BOOKIES": "0"}, "below the minimum"),
        ({"QUIRE_STANDALONE_BOOKIES": "2", "QUIRE_STANDALONE_BOOKIE_PORTS": "4001"}, "names 1 ports for 2"),
        ({"QUIRE_STANDALONE_BOOKIES": "1", "QUIRE_STANDALONE_BOOKIE_PORTS": "x"}, "not a list of ports"),
        ({"QUIRE_STANDALONE_GATEWAY_PORT": "70000"}, "QUIRE_STANDALONE_GATEWAY_PORT"),
        ({"QUIRE_STANDALONE_BOOKIES": "1", "QUIRE_STANDALONE_BOOKIE_HTTP_PORTS": "70000"}, "ports are 1-65535"),
    ],
)
def test_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], message: str
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        ports_from_env()


def test_publish_listens_everywhere_and_advertises_the_host_clients_use(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, Ports())
    publish(cluster, "0.0.0.0", "docker-host.example")
    assert cluster.processes["gateway"].env["QUIRE_GATEWAY_ADDRESS"] == "0.0.0.0:7000"
    assert cluster.processes["gateway"].env["QUIRE_GATEWAY_ADVERTISED_ADDRESS"] == "docker-host.example:7000"
    assert cluster.processes["registry"].env["QUIRE_REGISTRY_ADDRESS"] == "0.0.0.0:7001"
    assert cluster.processes["placement"].env["QUIRE_PLACEMENT_ADDRESS"] == "0.0.0.0:7002"
    for name in cluster.bookie_names:
        assert cluster.processes[name].env["QUIRE_BOOKIE_LISTEN_HOST"] == "0.0.0.0"
        assert cluster.processes[name].env["QUIRE_BOOKIE_ADVERTISED_HOST"] == "docker-host.example"
    etcd = cluster.processes["etcd"].command
    assert etcd[etcd.index("--listen-client-urls") + 1] == "http://0.0.0.0:2379"
    assert etcd[etcd.index("--advertise-client-urls") + 1] == "http://docker-host.example:2379"
    # The services find each other, and health checks find them, on loopback.
    assert cluster.processes["gateway"].env["QUIRE_REGISTRY_TARGET"] == "127.0.0.1:7001"
    assert cluster.processes["gateway"].health_target == "127.0.0.1:7000"


def test_loopback_keeps_listeners_on_loopback(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, Ports())
    publish(cluster, "127.0.0.1", "127.0.0.1")
    assert cluster.processes["gateway"].env["QUIRE_GATEWAY_ADDRESS"] == "127.0.0.1:7000"
    assert cluster.processes["gateway"].env["QUIRE_GATEWAY_ADVERTISED_ADDRESS"] == "127.0.0.1:7000"
    assert cluster.processes["bookie-1"].env["QUIRE_BOOKIE_LISTEN_HOST"] == "127.0.0.1"
    etcd = cluster.processes["etcd"].command
    assert etcd[etcd.index("--listen-client-urls") + 1] == "http://127.0.0.1:2379"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "docker", "docker-host.example"])
def test_advertised_host_takes_names_and_ipv4(host: str) -> None:
    assert advertised_host(host) == host


@pytest.mark.parametrize("host", ["", "::1", "host:7000", "http://host", "-host", "a b"])
def test_advertised_host_refuses_what_is_not_a_host(host: str) -> None:
    with pytest.raises(ConfigError, match="QUIRE_STANDALONE_ADVERTISED_HOST"):
        advertised_host(host)
