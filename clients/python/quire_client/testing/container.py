"""QuireContainer: the all-in-one Quire image under testcontainers.

The image's `standalone` mode runs etcd, the registry, placement, N bookies and
the gateway in one container. On Linux the container shares the host's network
(`network_mode="host"`) and every service gets a free host port chosen here, so
any number of containers and local test clusters can run side by side and no
bridge network is needed. Elsewhere (Docker Desktop) the default ports are
published instead.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Self

from testcontainers.core.container import DockerContainer

from quire_client.cluster import Ports
from quire_client.testing.health import StartupError, wait_until_serving

# Inside the container when ports are published rather than shared (the default ports, docs/configuration.md).
_DEFAULT_PORTS = Ports()
_LOG_LINES_ON_FAILURE = 60


class QuireContainerError(StartupError):
    """The container exited or did not report SERVING in time; carries its recent logs."""


class QuireContainer(DockerContainer):
    def __init__(
        self,
        image: str | None = None,
        *,
        bookies: int = 3,
        host_network: bool | None = None,
        startup_timeout_seconds: float = 120.0,
        stop_timeout_seconds: int = 20,
        **kwargs: Any,
    ) -> None:
        from quire_client.testing import DEFAULT_IMAGE

        super().__init__(image or DEFAULT_IMAGE, **kwargs)
        self.bookies = bookies
        self.host_network = sys.platform.startswith("linux") if host_network is None else host_network
        self.startup_timeout_seconds = startup_timeout_seconds
        self.stop_timeout_seconds = stop_timeout_seconds
        self.quire_ports = Ports.free(bookies) if self.host_network else _DEFAULT_PORTS

    def with_bookies(self, count: int) -> Self:
        if not 1 <= count <= 32:
            raise ValueError(f"bookies must be between 1 and 32, not {count}")
        self.bookies = count
        self.quire_ports = Ports.free(count) if self.host_network else _DEFAULT_PORTS
        return self

    def _configure(self) -> None:
        # Called by DockerContainer.start() just before the container is created.
        ports = self.quire_ports
        if self.host_network:
            bookie_ports = ports.bookies
            bookie_http_ports = [ports.http_port(i) for i in range(self.bookies)]
            self.with_kwargs(network_mode="host")
            self.with_env("QUIRE_STANDALONE_BIND_HOST", "127.0.0.1")
        else:
            bookie_ports = [3181 + i for i in range(self.bookies)]
            bookie_http_ports = [8181 + i for i in range(self.bookies)]
            self.with_exposed_ports(ports.gateway, ports.registry, ports.placement, ports.etcd)
            self.with_env("QUIRE_STANDALONE_BIND_HOST", "0.0.0.0")
        self.with_envs(
            QUIRE_STANDALONE_BOOKIES=str(self.bookies),
            QUIRE_STANDALONE_BOOKIE_PORTS=",".join(map(str, bookie_ports)),
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
