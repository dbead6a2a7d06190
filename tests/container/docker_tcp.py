"""The local Docker engine reached over TCP, for the container tests."""

from __future__ import annotations

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
