"""The local Docker engine reached over TCP, for the container tests."""

from __future__ import annotations

import ipaddress
import os
import socket
import threading

import pytest


class DockerOverTcp:
    """The local Docker engine reached over TCP: a relay from 127.0.0.1:<port>
    to the engine's unix socket, so that DOCKER_HOST=tcp://127.0.0.1:<port>
    reaches it the way a remote engine, docker:dind or a dockerd with `-H tcp://`
    is reached. Byte for byte, so the Docker API behaves as over its socket."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.docker_host = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0  # accepted so far: proof that the clients came this way
        self.open_sockets: list[socket.socket] = []
        self.closing = threading.Event()
        self.acceptor = threading.Thread(target=self._accept, name="docker-tcp-relay", daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:  # the listener was closed
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.socket_path)
            self.connections += 1
            self.open_sockets += [client, engine]
            for source, sink in ((client, engine), (engine, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
            sink.shutdown(socket.SHUT_WR)
        except OSError:  # the other side went away, or close() below
            pass

    def close(self) -> None:
        self.closing.set()
        self.listener.close()
        for sock in self.open_sockets:
            sock.close()
        self.acceptor.join(timeout=5)


def local_engine_socket() -> str:
    """The unix socket of the engine this machine's Docker clients use."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.skip(f"the TCP relay needs a local engine on a unix socket, not DOCKER_HOST={host}")
    return host.removeprefix("unix://")


# How the container tests reach the engine: its unix socket; DOCKER_HOST=tcp://127.0.0.1:<port>
# (a remote engine); tcp://<this machine's name>:<port> (a name, like docker:dind's tcp://docker:2375).
ENGINES = ["local-socket", "tcp", "tcp-by-name"]


def loopback_host_name() -> str:
    """This machine's name, when it resolves to loopback here (where the relay listens)."""
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    if not ipaddress.ip_address(address).is_loopback:
        pytest.skip(f"this machine's name {name!r} resolves to {address}, not loopback")
    return name


def engine_docker_host(engine: str, request: pytest.FixtureRequest) -> str | None:
    """DOCKER_HOST for `engine`, or None for the default (the local socket)."""
    if engine == "local-socket":
        return None
    relay: DockerOverTcp = request.getfixturevalue("docker_over_tcp")
    if engine == "tcp":
        return relay.docker_host
    return relay.docker_host.replace("127.0.0.1", loopback_host_name())
