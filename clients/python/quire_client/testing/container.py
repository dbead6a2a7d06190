"""QuireContainer: the all-in-one Quire image under testcontainers.

The image's `standalone` mode runs etcd, the registry, placement, N bookies and
the gateway in one container, on the engine's default bridge network. Every
service gets a port chosen free here and published on the same number on the
Docker host, and the services advertise that host (testcontainers' Docker
host: the engine's address for a remote or TCP engine). So the addresses a
client is told about (bookie endpoints, the gateway owning a ledger, etcd's
client URL) lead to the container from outside it, and from inside it too,
which the gateway needs to reach the bookies: see docs/decisions.md. Any
number of containers and local test clusters can run side by side.

`host_network=True` shares the host's network instead, for an engine on this
machine that has no bridge network (dockerd --bridge=none); nothing else needs it.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any, Self

from testcontainers.core.container import DockerContainer

from quire_client.cluster import Ports
from quire_client.testing.health import StartupError, wait_until_serving

_LOG_LINES_ON_FAILURE = 60


class QuireContainerError(StartupError):
    """The container exited or did not report SERVING in time; carries its recent logs."""


class QuireContainer(DockerContainer):
    def __init__(
        self,
        image: str | None = None,
        *,
        bookies: int = 3,
        host_network: bool = False,
        startup_timeout_seconds: float = 120.0,
        stop_timeout_seconds: int = 20,
        **kwargs: Any,
    ) -> None:
        from quire_client.testing import DEFAULT_IMAGE

        super().__init__(image or DEFAULT_IMAGE, **kwargs)
        self.bookies = bookies
        self.host_network = host_network
        self.startup_timeout_seconds = startup_timeout_seconds
        self.stop_timeout_seconds = stop_timeout_seconds
        self.quire_ports = Ports.free(bookies)
        # Where the services say they are (set when the container is configured).
        self.advertised_host = "127.0.0.1"

    def with_bookies(self, count: int) -> Self:
        if not 1 <= count <= 32:
            raise ValueError(f"bookies must be between 1 and 32, not {count}")
        self.bookies = count
        self.quire_ports = Ports.free(count)
        return self

    def _configure(self) -> None:
        # Called by DockerContainer.start() just before the container is created.
        ports = self.quire_ports
        bookie_http_ports = [ports.http_port(i) for i in range(self.bookies)]
        if self.host_network:
            # An engine with no bridge network: the services share the host's loopback.
            self._add_kwargs(network_mode="host")
            bind_host, self.advertised_host = "127.0.0.1", "127.0.0.1"
        else:
            # Same number inside and out: an address a service advertises is
            # then right on both sides of the published port.
            published = [ports.etcd, ports.gateway, ports.registry, ports.placement]
            published += [ports.gateway_http, ports.registry_http, ports.placement_http]
            for port in [*published, *ports.bookies, *bookie_http_ports]:
                self.with_bind_ports(port, port)
            bind_host, self.advertised_host = "0.0.0.0", self.get_docker_client().host()
            if _is_host_name(self.advertised_host):
                # A name the engine's host answers to (tcp://docker:2375 of a
                # docker:dind service): inside the container it must lead to
                # that host too, where the ports are published.
                self._add_kwargs(extra_hosts={self.advertised_host: "host-gateway"})
        self.with_envs(
            QUIRE_STANDALONE_BIND_HOST=bind_host,
            QUIRE_STANDALONE_ADVERTISED_HOST=self.advertised_host,
            QUIRE_STANDALONE_BOOKIES=str(self.bookies),
            QUIRE_STANDALONE_BOOKIE_PORTS=",".join(map(str, ports.bookies)),
            QUIRE_STANDALONE_BOOKIE_HTTP_PORTS=",".join(map(str, bookie_http_ports)),
            QUIRE_STANDALONE_GATEWAY_PORT=str(ports.gateway),
            QUIRE_STANDALONE_REGISTRY_PORT=str(ports.registry),
            QUIRE_STANDALONE_PLACEMENT_PORT=str(ports.placement),
            QUIRE_STANDALONE_ETCD_PORT=str(ports.etcd),
            QUIRE_STANDALONE_ETCD_PEER_PORT=str(ports.etcd_peer),
            QUIRE_STANDALONE_GATEWAY_HTTP_PORT=str(ports.gateway_http),
            QUIRE_STANDALONE_REGISTRY_HTTP_PORT=str(ports.registry_http),
            QUIRE_STANDALONE_PLACEMENT_HTTP_PORT=str(ports.placement_http),
            QUIRE_STANDALONE_START_TIMEOUT_SECONDS=str(max(1, math.ceil(self.startup_timeout_seconds))),
        )
        self.with_command("standalone")

    def _add_kwargs(self, **kwargs: Any) -> None:
        # with_kwargs replaces what was given before (including the constructor's **kwargs).
        self.with_kwargs(**{**self._kwargs, **kwargs})

    def start(self) -> Self:
        super().start()
        try:
            wait_until_serving(
                [self.get_registry_target(), self.get_gateway_target()],
                self.startup_timeout_seconds,
                still_running=self._exit_reason,
            )
        except (StartupError, TimeoutError) as exc:
            raise QuireContainerError(f"Quire container {self.image}: {exc}\n{self.recent_logs()}") from None
        return self

    def _exit_reason(self) -> str | None:
        container = self.get_wrapped_container()
        container.reload()
        if container.status in ("exited", "dead"):
            code = container.attrs.get("State", {}).get("ExitCode")
            return f"the container exited with status {code}"
        return None

    def recent_logs(self, lines: int = _LOG_LINES_ON_FAILURE) -> str:
        """The container's last log lines (stdout and stderr), for error messages."""
        try:
            text = self.get_wrapped_container().logs(tail=lines).decode(errors="replace")
        except Exception as exc:  # the logs are a courtesy; never hide the real error
            return f"(container logs unavailable: {exc})"
        return f"--- last {lines} lines of the container's log ---\n{text}".rstrip()

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        # A SIGTERM first, so the services drain and etcd and RocksDB close cleanly.
        if self._container is not None:
            try:
                self._container.stop(timeout=self.stop_timeout_seconds)
            except Exception:  # already gone: the removal below still tidies up
                pass
        super().stop(force=force, delete_volume=delete_volume)

    def get_gateway_target(self) -> str:
        return self._target(self.quire_ports.gateway)

    def get_registry_target(self) -> str:
        return self._target(self.quire_ports.registry)

    def get_placement_target(self) -> str:
        return self._target(self.quire_ports.placement)

    def get_etcd_endpoint(self) -> str:
        return self._target(self.quire_ports.etcd)

    def get_bookie_count(self) -> int:
        return self.bookies

    def _target(self, port: int) -> str:
        if self.host_network:
            return f"127.0.0.1:{port}"
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(port)}"


def _is_host_name(host: str) -> bool:
    """A DNS name other than localhost (which every container resolves to itself), not an IP address."""
    if host == "localhost":
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return True
    return False
