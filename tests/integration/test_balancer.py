"""The HAProxy balancer local clusters put in front of their gateways, against
the real haproxy: it spreads connections round robin and routes around a
backend that died."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_client.balancer import BalancerError, HaproxyBalancer, haproxy_config
from quire_client.cluster import free_port

pytestmark = pytest.mark.skipif(not Path("/usr/sbin/haproxy").exists(), reason="haproxy is not installed (make setup)")


class _NameServer(socketserver.ThreadingTCPServer):
    """Answers every connection with its own name, then closes it."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, name: str, port: int) -> None:
        self.name = name

        class Handler(socketserver.BaseRequestHandler):
            def handle(inner) -> None:  # inner: the outer self names the server
                inner.request.sendall(name.encode())

        super().__init__(("127.0.0.1", port), Handler)


@pytest.fixture
def backends() -> Iterator[dict[str, _NameServer]]:
    servers = {f"gateway-{i}": _NameServer(f"gateway-{i}", free_port()) for i in range(1, 4)}
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield servers
    for server in servers.values():
        server.shutdown()
        server.server_close()


def _ask(target: str) -> str:
    host, _, port = target.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        return connection.recv(64).decode()


def test_connections_go_round_robin_and_avoid_a_dead_backend(tmp_path: Path, backends: dict[str, _NameServer]) -> None:
    listen = f"127.0.0.1:{free_port()}"
    targets = {name: f"127.0.0.1:{server.server_address[1]}" for name, server in backends.items()}
    with HaproxyBalancer(tmp_path, listen, targets) as balancer:
        before = balancer.connections_per_backend()
        answers = [_ask(listen) for _ in range(6)]
        assert sorted(answers) == sorted(list(targets) * 2), answers
        # HAProxy counts them too.
        after = balancer.connections_per_backend()
        assert all(after[name] - before[name] == 2 for name in targets), (before, after)

        backends["gateway-2"].shutdown()
        backends["gateway-2"].server_close()
        # Connections that land on the dead one are redispatched: every one is answered.
        later = [_ask(listen) for _ in range(9)]
        assert set(later) == {"gateway-1", "gateway-3"}, later
        assert balancer.running()
    assert not balancer.running()


def test_starting_the_balancer_sends_no_connection_to_a_backend(
    tmp_path: Path, backends: dict[str, _NameServer]
) -> None:
    """Start-up asks HAProxy whether it listens on its runtime socket: a test
    connection through the frontend went on to a backend, sometimes after the
    first client's, and took one of their round-robin turns."""
    targets = {name: f"127.0.0.1:{server.server_address[1]}" for name, server in backends.items()}
    with HaproxyBalancer(tmp_path, f"127.0.0.1:{free_port()}", targets) as balancer:
        time.sleep(1.0)  # time for a connection it had made to reach a backend
        assert balancer.connections_per_backend() == dict.fromkeys(targets, 0)


def test_a_configuration_haproxy_refuses_is_reported(tmp_path: Path) -> None:
    balancer = HaproxyBalancer(tmp_path, "127.0.0.1:notaport", {"gateway-1": "127.0.0.1:1"})
    with pytest.raises(BalancerError, match="haproxy rejected"):
        balancer.start()
    assert not balancer.running()


def test_the_configuration_names_every_backend_with_a_health_check() -> None:
    config = haproxy_config("127.0.0.1:9000", {"a": "127.0.0.1:1", "b": "127.0.0.1:2"})
    assert "balance roundrobin" in config and "mode tcp" in config
    assert "server a 127.0.0.1:1 check" in config and "server b 127.0.0.1:2 check" in config
