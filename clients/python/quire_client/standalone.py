"""All of Quire in one process tree: `python -m quire_client.standalone`.

The container image's `standalone` mode (like `pulsar standalone`) runs this:
etcd, the registry, placement, N bookies and the gateway, started and stopped
by `LocalCluster` exactly as `quire cluster up` does, with every service's log
copied to stdout (prefixed with its name) so `docker logs` shows them all.
Settings, all optional:

    QUIRE_STANDALONE_BOOKIES         number of bookies (3)
    QUIRE_STANDALONE_BIND_HOST       where the services listen: 0.0.0.0 (default,
                                     for published ports) or 127.0.0.1 (host
                                     networking)
    QUIRE_STANDALONE_ADVERTISED_HOST the host clients reach the published ports
                                     at (127.0.0.1); see below
    QUIRE_STANDALONE_ETCD_PORT       2379     QUIRE_STANDALONE_ETCD_PEER_PORT  2380
    QUIRE_STANDALONE_GATEWAY_PORT    7000     QUIRE_STANDALONE_REGISTRY_PORT   7001
    QUIRE_STANDALONE_PLACEMENT_PORT  7002
    QUIRE_STANDALONE_GATEWAY_HTTP_PORT 8000, QUIRE_STANDALONE_REGISTRY_HTTP_PORT 8001,
    QUIRE_STANDALONE_PLACEMENT_HTTP_PORT 8002: the services' admin HTTP ports
    QUIRE_STANDALONE_BOOKIE_PORTS    comma-separated, one per bookie
                                     (default 3181, 3182, ... consecutive)
    QUIRE_STANDALONE_BOOKIE_HTTP_PORTS  the bookies' admin HTTP ports, one per
                                     bookie (default: each bookie port + 5000)
    QUIRE_STANDALONE_DATA_DIR        data and logs (data/standalone)
    QUIRE_STANDALONE_START_TIMEOUT_SECONDS  (120)

The services tell clients where they are: the bookies' endpoints and ids, the
gateway's advertised address (ledger owners, which `follow_owner` clients
resume at) and etcd's client URL all name QUIRE_STANDALONE_ADVERTISED_HOST and
the port inside the container. They are right outside only when each port is
published on the same number (`-p 7000:7000`, as QuireContainer does); the
gateway reaches the bookies at those addresses too, so the advertised host must
lead back to the container from inside it as well (127.0.0.1 and localhost do;
so does the Docker host's own address, through the published port). Any other
QUIRE_* variable is passed on to every service.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quire_client.cluster import ClusterError, LocalCluster, Ports
from quire_client.optional import SERVER, MissingPackage, import_for

try:
    # Standalone runs the services: it needs the server package, and reads its settings as they do.
    config = import_for("quire_common.config", "standalone mode", SERVER)
except MissingPackage as missing:
    print(f"quire standalone: cannot start: {missing}", file=sys.stderr)
    sys.exit(2)
ConfigError, setting = config.ConfigError, config.setting

READY_LINE = "quire standalone: ready"
STANDALONE = "standalone"


def _port(env: str, default: int, doc: str) -> Any:
    return setting(env, default, doc, services=STANDALONE, section=STANDALONE, minimum=1, maximum=65535)


@dataclass(frozen=True)
class StandaloneEnv:
    bookies: int = setting(
        "QUIRE_STANDALONE_BOOKIES",
        3,
        "number of bookies",
        services=STANDALONE,
        section=STANDALONE,
        minimum=1,
        maximum=32,
    )
    bind_host: str = setting(
        "QUIRE_STANDALONE_BIND_HOST",
        "0.0.0.0",
        "where the services listen",
        services=STANDALONE,
        section=STANDALONE,
    )
    advertised_host: str = setting(
        "QUIRE_STANDALONE_ADVERTISED_HOST",
        "127.0.0.1",
        "the host name or IPv4 address clients reach the published ports at, named in the addresses the "
        "services advertise (bookie endpoints and ids, the gateway's address, etcd's client URL); with the "
        "ports published on the same numbers",
        services=STANDALONE,
        section=STANDALONE,
    )
    data_dir: str = setting(
        "QUIRE_STANDALONE_DATA_DIR", "data/standalone", "data and logs", services=STANDALONE, section=STANDALONE
    )
    start_timeout_seconds: float = setting(
        "QUIRE_STANDALONE_START_TIMEOUT_SECONDS",
        120.0,
        "how long the cluster may take to start",
        services=STANDALONE,
        section=STANDALONE,
        unit="seconds",
        minimum=1,
    )
    etcd_port: int = _port("QUIRE_STANDALONE_ETCD_PORT", 2379, "etcd's client port")
    etcd_peer_port: int = _port("QUIRE_STANDALONE_ETCD_PEER_PORT", 2380, "etcd's peer port")
    gateway_port: int = _port("QUIRE_STANDALONE_GATEWAY_PORT", 7000, "the gateway's port")
    registry_port: int = _port("QUIRE_STANDALONE_REGISTRY_PORT", 7001, "the registry's port")
    placement_port: int = _port("QUIRE_STANDALONE_PLACEMENT_PORT", 7002, "placement's port")
    gateway_http_port: int = _port("QUIRE_STANDALONE_GATEWAY_HTTP_PORT", 8000, "the gateway's admin HTTP port")
    registry_http_port: int = _port("QUIRE_STANDALONE_REGISTRY_HTTP_PORT", 8001, "the registry's admin HTTP port")
    placement_http_port: int = _port("QUIRE_STANDALONE_PLACEMENT_HTTP_PORT", 8002, "placement's admin HTTP port")
    bookie_ports: str = setting(
        "QUIRE_STANDALONE_BOOKIE_PORTS", "", "one port per bookie", services=STANDALONE, section=STANDALONE
    )
    bookie_http_ports: str = setting(
        "QUIRE_STANDALONE_BOOKIE_HTTP_PORTS",
        "",
        "one admin HTTP port per bookie",
        services=STANDALONE,
        section=STANDALONE,
    )


def ports_from_env(env: StandaloneEnv | None = None) -> Ports:
    env = config.load_settings(StandaloneEnv) if env is None else env
    bookies = env.bookies
    bookie_ports = port_list("QUIRE_STANDALONE_BOOKIE_PORTS", env.bookie_ports, bookies) or [
        3181 + i for i in range(bookies)
    ]
    # Empty: LocalCluster gives each bookie its port + 5000 (3181 -> 8181).
    bookie_http_ports = port_list("QUIRE_STANDALONE_BOOKIE_HTTP_PORTS", env.bookie_http_ports, bookies)
    return Ports(
        etcd=env.etcd_port,
        etcd_peer=env.etcd_peer_port,
        gateway=env.gateway_port,
        registry=env.registry_port,
        placement=env.placement_port,
        bookies=bookie_ports,
        bookie_http=bookie_http_ports,
        gateway_http=env.gateway_http_port,
        registry_http=env.registry_http_port,
        placement_http=env.placement_http_port,
    )


def port_list(name: str, listed: str, count: int) -> list[int]:
    """The comma-separated list of `count` ports `listed` (setting `name`), or [] when unset."""
    if not listed:
        return []
    try:
        ports = [int(port) for port in listed.split(",") if port.strip()]
    except ValueError:
        raise ConfigError(f"{name}: not a list of ports: {listed!r}") from None
    if len(ports) != count:
        raise ConfigError(f"{name} names {len(ports)} ports for {count} bookies (QUIRE_STANDALONE_BOOKIES)")
    if not all(1 <= port <= 65535 for port in ports):
        raise ConfigError(f"{name}: ports are 1-65535: {listed!r}")
    return ports


# A DNS name or an IPv4 address: it becomes part of bookie ids (`host:port`), so no IPv6 literal.
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


def advertised_host(value: str) -> str:
    if not _HOST_NAME.fullmatch(value):
        raise ConfigError(f"QUIRE_STANDALONE_ADVERTISED_HOST={value!r} is not a host name or IPv4 address")
    return value


def publish(cluster: LocalCluster, bind_host: str, advertised: str) -> None:
    """Make the services listen on `bind_host` and advertise `advertised`.

    LocalCluster binds and advertises 127.0.0.1, which is right on a
    developer's machine; in a container with published ports they must listen
    on 0.0.0.0 and name the host clients reach the ports at. The processes
    still find each other's registry, placement and etcd on loopback, and
    health checks keep using 127.0.0.1, which a 0.0.0.0 listener answers.
    """
    ports = cluster.ports
    if bind_host != "127.0.0.1":
        cluster.processes["registry"].env["QUIRE_REGISTRY_ADDRESS"] = f"{bind_host}:{ports.registry}"
        cluster.processes["placement"].env["QUIRE_PLACEMENT_ADDRESS"] = f"{bind_host}:{ports.placement}"
        cluster.processes["gateway"].env["QUIRE_GATEWAY_ADDRESS"] = f"{bind_host}:{ports.gateway}"
    cluster.processes["gateway"].env["QUIRE_GATEWAY_ADVERTISED_ADDRESS"] = f"{advertised}:{ports.gateway}"
    for name in cluster.bookie_names:
        cluster.processes[name].env["QUIRE_BOOKIE_LISTEN_HOST"] = bind_host
        cluster.processes[name].env["QUIRE_BOOKIE_ADVERTISED_HOST"] = advertised
    etcd = cluster.processes["etcd"].command
    etcd[etcd.index("--listen-client-urls") + 1] = f"http://{bind_host}:{ports.etcd}"
    etcd[etcd.index("--advertise-client-urls") + 1] = f"http://{advertised}:{ports.etcd}"


class LogFollower(threading.Thread):
    """Copies every service's log file to stdout, each line prefixed with its name."""

    def __init__(self, cluster: LocalCluster, interval_seconds: float = 0.2) -> None:
        super().__init__(name="log-follower", daemon=True)
        self.cluster = cluster
        self.interval_seconds = interval_seconds
        self.offsets: dict[str, int] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.interval_seconds):
            self.copy_new_lines()
        self.copy_new_lines()

    def copy_new_lines(self) -> None:
        for name in self.cluster.processes:
            path = self.cluster.log_path(name)
            try:
                with path.open("rb") as log:
                    log.seek(self.offsets.get(name, 0))
                    chunk = log.read()
            except FileNotFoundError:
                continue
            complete = chunk.rfind(b"\n") + 1  # leave a half-written line for next time
            self.offsets[name] = self.offsets.get(name, 0) + complete
            for line in chunk[:complete].decode(errors="replace").splitlines():
                print(f"[{name}] {line}", flush=True)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)


def _print_ready(seconds: float, ports: Ports, bind_host: str, advertised: str) -> None:
    print(
        f"{READY_LINE} in {seconds:.1f}s: gateway {advertised}:{ports.gateway}, "
        f"registry {advertised}:{ports.registry}, placement {advertised}:{ports.placement}, "
        f"etcd {advertised}:{ports.etcd}, bookies {', '.join(f'{advertised}:{port}' for port in ports.bookies)} "
        f"(listening on {bind_host})",
        flush=True,
    )


def _serve_until(stop: threading.Event, cluster: LocalCluster) -> int:
    """Wait for `stop`: 0; or, first, for a service to exit: 1."""
    while not stop.wait(1.0):
        exited = [name for name in cluster.processes if cluster.pid(name) is None]
        if exited:
            # A dead service makes the whole container unhealthy: say so and exit.
            print(f"quire standalone: {', '.join(exited)} exited; stopping", file=sys.stderr, flush=True)
            return 1
    return 0


def main() -> int:
    try:
        env = config.load_settings(StandaloneEnv)
        ports = ports_from_env(env)
        bind_host = env.bind_host
        advertised = advertised_host(env.advertised_host)
        data_dir = Path(env.data_dir)
        timeout = env.start_timeout_seconds
    except ConfigError as exc:
        print(f"quire standalone: cannot start: {exc}", file=sys.stderr)
        return 2

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    cluster = LocalCluster(data_dir, ports)
    publish(cluster, bind_host, advertised)
    (data_dir / "logs").mkdir(parents=True, exist_ok=True)
    follower = LogFollower(cluster)
    follower.start()
    print(f"quire standalone: starting etcd, registry, placement, {len(ports.bookies)} bookies, gateway", flush=True)
    started = time.monotonic()
    try:
        cluster.start(timeout)
    except ClusterError as exc:
        follower.stop()
        print(f"quire standalone: cannot start: {exc}", file=sys.stderr, flush=True)
        return 1
    _print_ready(time.monotonic() - started, ports, bind_host, advertised)
    status = _serve_until(stop, cluster)
    print("quire standalone: stopping", flush=True)
    cluster.stop()
    follower.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
