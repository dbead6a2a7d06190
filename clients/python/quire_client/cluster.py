"""A local Quire cluster: etcd and every service as its own process.

`quire cluster up` (and so `make run`) uses this, and so do the end-to-end
tests: start(), kill(name) with SIGKILL, pause(name)/resume(name) with
SIGSTOP/SIGCONT, restart(name), stop(). Every process
is started here and stopped here by PID; logs go to <data_dir>/logs/.
`StandaloneBookie` runs one bookie without a registry (for the bookie
benchmark and bookie-only tests).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from quire_client.balancer import HaproxyBalancer
from quire_client.etcd_auth import REGISTRY_USER, EtcdAuthError, EtcdctlAccess, lock_down

if TYPE_CHECKING:  # devcerts needs cryptography, which a client-only install lacks
    from quire_client.devcerts import CertBundle

_ISSUED_PORTS: set[int] = set()
# What a bookie logs each time its registration session is established (quire_bookie.registration).
REGISTERED_LOG_LINE = b'"registered as '


def _ephemeral_port_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range.

    A port taken with bind(0) comes from the ephemeral range, which the kernel also
    hands to outgoing connections: a service's client connection (to etcd, say) can
    take the port in the moment between this choice and the service binding it.
    Ports below the range are never given to outgoing connections. Ports already
    handed out by this process are not handed out again."""
    low, _ = _ephemeral_port_range()
    floor = 10000 if low > 12000 else 1024
    for _ in range(1000):
        port = random.randrange(floor, low)
        if port in _ISSUED_PORTS:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ISSUED_PORTS.add(port)
        return port
    raise RuntimeError(f"no free loopback port between {floor} and {low}")


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


class ClusterError(RuntimeError):
    pass


def tooling_channel(target: str, tls: CertBundle | None) -> grpc.Channel:
    """The cluster runner's own channel: plaintext in development mode, else
    mutual TLS as the operator's service identity (health probes and the
    registry's bookie listing, which is internal)."""
    if tls is None:
        return grpc.insecure_channel(target)
    from quire_client.devcerts import OPERATOR  # a CertBundle means cryptography is installed

    credentials = grpc.ssl_channel_credentials(
        tls.ca.read_bytes(), tls.key(OPERATOR).read_bytes(), tls.cert(OPERATOR).read_bytes()
    )
    return grpc.secure_channel(target, credentials)


def grpc_serving(target: str, service: str = "", tls: CertBundle | None = None) -> bool:
    """Whether `target` answers gRPC health SERVING for `service`."""
    try:
        with tooling_channel(target, tls) as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=1
            )
            return bool(response.status == health_pb2.HealthCheckResponse.SERVING)
    except grpc.RpcError:
        return False


@dataclass(frozen=True)
class EtcdTls:
    """etcd over TLS: its own certificate (server and peer), the CA it
    requires client and peer certificates from, and a certificate of that CA
    for tooling (health checks, setting up users)."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def from_bundle(cls, bundle: CertBundle) -> EtcdTls:
        return cls(
            bundle.etcd_ca, bundle.cert("etcd"), bundle.key("etcd"), bundle.cert("registry"), bundle.key("registry")
        )


def etcd_command(
    binary: str,
    name: str,
    data_dir: Path,
    client_port: int,
    peer_port: int,
    extra_args: Sequence[str] = (),
    tls: EtcdTls | None = None,
    *,
    host: str = "127.0.0.1",
    initial_cluster: str = "",
) -> list[str]:
    """An etcd member listening on `host` (loopback by default); alone unless
    `initial_cluster` names its peers ("name=url,..."). `extra_args` go last (a
    space quota, say). With `tls`, clients and peers need certificates of its CA.

    Pre-vote is on: a member cut off from the others asks before it campaigns,
    so on rejoining it does not unseat a healthy leader with the higher term it
    counted up alone (etcd 3.4 has it off by default).

    Memory and history are bounded as in the Kubernetes manifests: a raft
    snapshot every 10,000 writes rather than 3.4's 100,000, since etcd keeps
    the raft entries since the last snapshot in memory (etcd 3.6's default;
    with 100,000 the entries of every ledger written since start stayed
    resident: 400 MB after 200,000 writes of 1.1 KB, 153 MB with 10,000), and
    revisions older than an hour compacted away."""
    scheme = "https" if tls is not None else "http"
    client, peer = f"{scheme}://{host}:{client_port}", f"{scheme}://{host}:{peer_port}"
    secure: list[str] = []
    if tls is not None:
        secure = [
            "--cert-file", str(tls.cert), "--key-file", str(tls.key),
            "--trusted-ca-file", str(tls.ca), "--client-cert-auth",
            "--peer-cert-file", str(tls.cert), "--peer-key-file", str(tls.key),
            "--peer-trusted-ca-file", str(tls.ca), "--peer-client-cert-auth",
        ]  # fmt: skip
    return [
        binary, "--name", name, "--data-dir", str(data_dir),
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", initial_cluster or f"{name}={peer}", "--pre-vote", "--log-level", "warn",
        "--snapshot-count", "10000", "--auto-compaction-retention", "1",
        *secure, *extra_args,
    ]  # fmt: skip


def etcd_healthy(client_port: int, tls: EtcdTls | None = None, host: str = "127.0.0.1") -> bool:
    context = None
    if tls is not None:
        context = ssl.create_default_context(cafile=str(tls.ca))
        context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    scheme = "https" if tls is not None else "http"
    try:
        with urllib.request.urlopen(f"{scheme}://{host}:{client_port}/health", timeout=1, context=context) as response:
            return bool(json.loads(response.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def lock_down_etcd(etcdctl: str, endpoint: str, tls: EtcdTls, cluster: str, secrets_dir: Path) -> None:
    """Authentication on, with passwords kept in `secrets_dir`: root's
    (`etcd-root-password`) for an operator and no service, the registry's
    (`etcd-registry-password`) for the registry alone."""
    secrets_dir.mkdir(parents=True, exist_ok=True)
    passwords = {}
    for user in ("root", "registry"):
        path = secrets_dir / f"etcd-{user}-password"
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(secrets.token_hex(24) + "\n")
        passwords[user] = path.read_text().strip()
    access = EtcdctlAccess(etcdctl, [f"https://{endpoint}"], str(tls.ca), str(tls.client_cert), str(tls.client_key))
    try:
        lock_down(access, cluster, passwords["root"], passwords["registry"])
    except EtcdAuthError as exc:
        raise ClusterError(f"etcd setup failed: {exc}") from None


@dataclass
class Ports:
    etcd: int = 2379
    etcd_peer: int = 2380
    gateway: int = 7000
    registry: int = 7001
    placement: int = 7002
    bookies: list[int] = field(default_factory=lambda: [3181, 3182, 3183])
    # The bookies' admin HTTP ports; empty: each bookie's port + 5000 (3181 -> 8181).
    bookie_http: list[int] = field(default_factory=list)
    # The other services' admin HTTP ports (/status, /metrics).
    gateway_http: int = 8000
    registry_http: int = 8001
    placement_http: int = 8002
    # With gateways behind a balancer, `gateway` is the balancer's port and the
    # gateways listen here (gRPC, admin HTTP); empty: gateway + 10 + i and gateway_http + 10 + i.
    gateway_replicas: list[int] = field(default_factory=list)
    gateway_replicas_http: list[int] = field(default_factory=list)

    @classmethod
    def free(cls, bookies: int = 3, balanced_gateways: int = 0) -> Ports:
        replicas = balanced_gateways
        return cls(
            free_port(),
            free_port(),
            free_port(),
            free_port(),
            free_port(),
            [free_port() for _ in range(bookies)],
            [free_port() for _ in range(bookies)],
            gateway_http=free_port(),
            registry_http=free_port(),
            placement_http=free_port(),
            gateway_replicas=[free_port() for _ in range(replicas)],
            gateway_replicas_http=[free_port() for _ in range(replicas)],
        )

    @classmethod
    def from_base(cls, base: int, bookies: int = 3, balanced_gateways: int = 0) -> Ports:
        """Every port from `base` up (`quire cluster up --base-port`): base the
        gateway (or the balancer), +1 registry, +2 placement, +3 etcd, +4 etcd
        peers, +5..+7 the admin HTTP ports of gateway, registry and placement,
        then from +10 each bookie's gRPC and admin HTTP port in pairs, then
        each balanced gateway's pair."""
        bookie_ports = [base + 10 + 2 * i for i in range(bookies)]
        first_replica = base + 10 + 2 * bookies
        replicas = [first_replica + 2 * i for i in range(balanced_gateways)]
        return cls(
            etcd=base + 3,
            etcd_peer=base + 4,
            gateway=base,
            registry=base + 1,
            placement=base + 2,
            bookies=bookie_ports,
            bookie_http=[port + 1 for port in bookie_ports],
            gateway_http=base + 5,
            registry_http=base + 6,
            placement_http=base + 7,
            gateway_replicas=replicas,
            gateway_replicas_http=[port + 1 for port in replicas],
        )

    @staticmethod
    def span(bookies: int, balanced_gateways: int = 0) -> int:
        """How many ports from_base uses from its base on."""
        return 10 + 2 * bookies + 2 * balanced_gateways

    def http_port(self, index: int) -> int:
        return self.bookie_http[index] if self.bookie_http else self.bookies[index] + 5000

    def gateway_replica_ports(self, count: int) -> list[tuple[int, int]]:
        """(gRPC, admin HTTP) ports of `count` gateways behind the balancer."""
        grpc_ports = self.gateway_replicas or [self.gateway + 10 + i for i in range(count)]
        http_ports = self.gateway_replicas_http or [self.gateway_http + 10 + i for i in range(count)]
        if len(grpc_ports) < count or len(http_ports) < count:
            raise ClusterError(f"{count} gateways need {count} replica ports, {len(grpc_ports)} are given")
        return list(zip(grpc_ports[:count], http_ports[:count], strict=True))

    def all(self, balanced_gateways: int = 0) -> list[int]:
        http = [self.http_port(i) for i in range(len(self.bookies))]
        admin = [self.gateway_http, self.registry_http, self.placement_http]
        replicas = [port for pair in self.gateway_replica_ports(balanced_gateways) for port in pair]
        return [
            *(self.etcd, self.etcd_peer, self.gateway, self.registry, self.placement),
            *(self.bookies + http + admin + replicas),
        ]


@dataclass
class _Process:
    name: str
    command: list[str]
    env: dict[str, str]
    health_target: str | None  # host:port answering grpc.health.v1, or None for etcd
    popen: subprocess.Popen[bytes] | None = None


def process_names(*, bookies: int = 3, gateways: int = 1, etcd_members: int = 1) -> list[str]:
    """The names of a LocalCluster's processes, in the order it starts them."""
    return [
        *etcd_member_names(etcd_members),
        "registry",
        "placement",
        *(f"bookie-{i + 1}" for i in range(bookies)),
        *gateway_names(gateways),
    ]


def etcd_member_names(count: int) -> list[str]:
    return ["etcd"] + [f"etcd-{i}" for i in range(2, count + 1)]


def gateway_names(count: int) -> list[str]:
    return ["gateway"] + [f"gateway-{i}" for i in range(2, count + 1)]


class LocalCluster:
    def __init__(
        self,
        data_dir: Path,
        ports: Ports | None = None,
        *,
        cluster_name: str = "local",
        extra_env: dict[str, str] | None = None,
        bookie_env: dict[str, dict[str, str]] | None = None,
        gateway_env: dict[str, dict[str, str]] | None = None,
        etcd_binary: str | None = None,
        etcd_args: Sequence[str] = (),
        tls: CertBundle | None = None,
        hosts: dict[str, str] | None = None,
        command_prefix: dict[str, list[str]] | None = None,
        gateways: int = 1,
        balancer: bool = False,
        etcd_members: int = 1,
    ) -> None:
        """Without `tls` every service runs in plaintext development mode
        (QUIRE_INSECURE_PLAINTEXT_DEV); with it, mutual TLS between all of
        them and bearer-token or client-certificate authentication at the
        gateway, from a `quire dev certs` bundle; etcd then requires client and
        peer certificates and has authentication on (`lock_down_etcd`), and
        only the registry is given an etcd user. `etcd_args` are extra etcd
        flags (e.g. `--quota-backend-bytes`). `bookie_env` and `gateway_env`
        add settings for single processes, by name.

        `hosts` gives a process (by name: "gateway", "registry", "placement",
        "bookie-1", ...) the address it listens on and is reached at instead of
        127.0.0.1; `command_prefix` runs a process under a wrapper (the fault
        lab's `ip netns exec NAME`).

        `etcd_members` > 1 starts that many etcd members ("etcd", "etcd-2",
        ...) as one etcd cluster, and the registry is given all of them.

        `gateways` > 1 starts that many gateway processes ("gateway",
        "gateway-2", ...), each with its own name, ports and advertised
        address, behind the same registry and placement;
        `gateway_targets` lists them in that order. With `balancer` they
        listen on the replica ports (Ports.gateway_replica_ports) and HAProxy
        takes the gateway port in front of them, round robin, as a Kubernetes
        Service would: `gateway_target` is then the balancer."""
        self.balancer: HaproxyBalancer | None = None
        self.data_dir = data_dir.resolve()
        self.hosts = hosts or {}
        self.command_prefix = command_prefix or {}
        self.tls = tls
        # With TLS, etcd too: client and peer certificates required, and authentication on.
        self.etcd_tls = EtcdTls.from_bundle(tls) if tls is not None else None
        self.ports = ports or Ports()
        self.cluster_name = cluster_name
        self.extra_env = extra_env or {}
        self.bookie_env = bookie_env or {}  # settings for single bookies, by name
        self.gateway_env = gateway_env or {}  # settings for single gateways, by name ("gateway", "gateway-2", ...)
        self.etcd_binary = etcd_binary or shutil.which("etcd") or "/usr/bin/etcd"
        self.etcd_args = list(etcd_args)
        self.processes: dict[str, _Process] = {}
        if gateways < 1:
            raise ClusterError(f"gateways={gateways}: a cluster needs at least one gateway")
        self.gateway_names = gateway_names(gateways)
        if etcd_members < 1:
            raise ClusterError(f"etcd_members={etcd_members}: a cluster needs at least one etcd member")
        self.etcd_names = etcd_member_names(etcd_members)
        # (client port, peer port) of each etcd member; the first keeps the Ports' pair.
        self.etcd_ports = {"etcd": (self.ports.etcd, self.ports.etcd_peer)}
        self.etcd_ports.update({name: (free_port(), free_port()) for name in self.etcd_names[1:]})
        self.balancer_requested = balancer
        self._define()

    @property
    def etcd_secrets_dir(self) -> Path:
        """Where the etcd users' passwords are kept (with TLS): root's for an
        operator, the registry's for the registry alone."""
        return self.data_dir / "etcd-auth"

    def host(self, name: str) -> str:
        """The address process `name` listens on."""
        return self.hosts.get(name, "127.0.0.1")

    def etcd_endpoint(self, name: str = "etcd") -> str:
        """host:port of an etcd member's client URL."""
        return f"{self.host(name)}:{self.etcd_ports[name][0]}"

    @property
    def gateway_target(self) -> str:
        """Where clients connect: the gateway, or the balancer in front of several."""
        return f"{self.host('gateway')}:{self.ports.gateway}"

    @property
    def gateway_targets(self) -> list[str]:
        """Each gateway's own address, in the order of gateway_names."""
        return [self.processes[name].health_target or "" for name in self.gateway_names]

    def gateway_http(self, name: str = "gateway") -> str:
        """host:port of a gateway's admin HTTP endpoint (/status, /metrics)."""
        return f"{self.host(name)}:{self.processes[name].env['QUIRE_GATEWAY_HTTP_PORT']}"

    @property
    def registry_target(self) -> str:
        return f"{self.host('registry')}:{self.ports.registry}"

    @property
    def placement_target(self) -> str:
        return f"{self.host('placement')}:{self.ports.placement}"

    @property
    def bookie_names(self) -> list[str]:
        return [f"bookie-{i + 1}" for i in range(len(self.ports.bookies))]

    def bookie_id(self, name: str) -> str:
        return f"{self.host(name)}:{self.ports.bookies[self.bookie_names.index(name)]}"

    def bookie_http(self, name: str) -> str:
        """host:port of a bookie's admin HTTP endpoint (/status, /metrics)."""
        return f"{self.host(name)}:{self.ports.http_port(self.bookie_names.index(name))}"

    def _env(self, service: str = "", **settings: str) -> dict[str, str]:
        env = dict(os.environ)
        if self.tls is None:
            env["QUIRE_INSECURE_PLAINTEXT_DEV"] = "true"
        else:
            env["QUIRE_INSECURE_PLAINTEXT_DEV"] = "false"
            if service:
                env.update(self.tls.service_env(service))
            # Bearer tokens for every admin HTTP endpoint; roles of client certificates at the gateway.
            env["QUIRE_AUTH_JWT_KEY_FILE"] = str(self.tls.jwt_secret)
            if service == "gateway":
                env.update(self.tls.auth_env())
        env.update(
            QUIRE_CLUSTER=self.cluster_name,
            QUIRE_ETCD_ENDPOINTS=",".join(self.etcd_endpoint(name) for name in self.etcd_names),
            QUIRE_REGISTRY_TARGET=self.registry_target,
            QUIRE_PLACEMENT_TARGET=self.placement_target,
        )
        env.update(self.extra_env)
        env.update(settings)
        return env

    def _define_etcd(self) -> None:
        scheme = "https" if self.etcd_tls is not None else "http"
        member_names = {name: "quire-" + name for name in self.etcd_names}
        peers = ",".join(
            f"{member_names[name]}={scheme}://{self.host(name)}:{self.etcd_ports[name][1]}" for name in self.etcd_names
        )
        for name in self.etcd_names:
            client_port, peer_port = self.etcd_ports[name]
            command = etcd_command(
                self.etcd_binary,
                member_names[name],
                self.data_dir / name,
                client_port,
                peer_port,
                self.etcd_args,
                self.etcd_tls,
                host=self.host(name),
                initial_cluster=peers,
            )
            self._add(name, command, self._env(), None)

    def _define(self) -> None:
        self._define_etcd()
        etcd_access: dict[str, str] = {}
        if self.etcd_tls is not None:
            etcd_access = {
                "QUIRE_ETCD_CA": str(self.etcd_tls.ca),
                "QUIRE_ETCD_CERT": str(self.etcd_tls.client_cert),
                "QUIRE_ETCD_KEY": str(self.etcd_tls.client_key),
                "QUIRE_ETCD_USER": REGISTRY_USER,
                "QUIRE_ETCD_PASSWORD_FILE": str(self.etcd_secrets_dir / "etcd-registry-password"),
            }
        python = sys.executable
        self._add(
            "registry",
            [python, "-m", "quire_registry"],
            self._env(
                "registry",
                QUIRE_REGISTRY_ADDRESS=self.registry_target,
                QUIRE_REGISTRY_HTTP_PORT=str(self.ports.registry_http),
                **etcd_access,
            ),
            self.registry_target,
        )
        placement = self.placement_target
        self._add(
            "placement",
            [python, "-m", "quire_placement"],
            self._env(
                "placement", QUIRE_PLACEMENT_ADDRESS=placement, QUIRE_PLACEMENT_HTTP_PORT=str(self.ports.placement_http)
            ),
            placement,
        )
        for index, (name, port) in enumerate(zip(self.bookie_names, self.ports.bookies, strict=True)):
            self._add(
                name,
                [python, "-m", "quire_bookie"],
                self._env(
                    "bookie",
                    **{
                        "QUIRE_BOOKIE_PORT": str(port),
                        "QUIRE_BOOKIE_LISTEN_HOST": self.host(name),
                        "QUIRE_BOOKIE_ADVERTISED_HOST": self.host(name),
                        "QUIRE_BOOKIE_HTTP_PORT": str(self.ports.http_port(index)),
                        "QUIRE_BOOKIE_DATA_DIR": str(self.data_dir / name),
                        **self.bookie_env.get(name, {}),  # may override the defaults above (a tmpfs data dir)
                    },
                ),
                self.bookie_id(name),
            )
        if self.balancer_requested:
            replica_ports = self.ports.gateway_replica_ports(len(self.gateway_names))
            for name, (port, http_port) in zip(self.gateway_names, replica_ports, strict=True):
                self._define_gateway(name, f"{self.host(name)}:{port}", http_port)
            self.balancer = HaproxyBalancer(
                self.data_dir / "balancer",
                self.gateway_target,
                dict(zip(self.gateway_names, self.gateway_targets, strict=True)),
            )
            return
        self._define_gateway("gateway", self.gateway_target, self.ports.gateway_http)
        for name in self.gateway_names[1:]:
            self._define_gateway(name, f"{self.host(name)}:{free_port()}", free_port())

    def _define_gateway(self, name: str, target: str, http_port: int) -> None:
        settings = {"QUIRE_GATEWAY_ADDRESS": target, "QUIRE_GATEWAY_HTTP_PORT": str(http_port)}
        if name != "gateway" or self.balancer_requested:  # a lone gateway keeps its default name (<hostname>:<port>)
            settings.update(QUIRE_GATEWAY_NAME=name, QUIRE_GATEWAY_ADVERTISED_ADDRESS=target)
        settings.update(self.gateway_env.get(name, {}))
        self._add(name, [sys.executable, "-m", "quire_gateway"], self._env("gateway", **settings), target)

    def add_gateway(self, name: str, timeout: float = 60.0) -> str:
        """Start one more gateway process on fresh ports (another replica behind
        the same registry and placement, as on Kubernetes) and return its
        target. It is stopped with the rest of the cluster."""
        target = f"{self.host(name)}:{free_port()}"
        self._define_gateway(name, target, free_port())
        self.start_process(name, timeout)
        return target

    def _add(self, name: str, command: list[str], env: dict[str, str], health_target: str | None) -> None:
        self.processes[name] = _Process(name, [*self.command_prefix.get(name, []), *command], env, health_target)

    # -- lifecycle ---------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        busy = [p for p in self.ports.all(len(self.gateway_names) if self.balancer_requested else 0) if port_in_use(p)]
        if busy:
            raise ClusterError(
                f"ports already in use: {', '.join(map(str, busy))}; stop whatever holds them "
                "(another Quire cluster or a system etcd) or choose other ports (`quire cluster up --base-port N`)"
            )
        if not Path(self.etcd_binary).exists():
            raise ClusterError(f"etcd not found at {self.etcd_binary}; install Debian's etcd-server (make setup)")
        if self.etcd_tls is not None and not self.etcd_tls.cert.exists():
            raise ClusterError(
                f"{self.etcd_tls.cert} is missing: certificates from before etcd ran with TLS; "
                "run `quire dev certs` again"
            )
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            for name in self.etcd_names:
                self.start_process(name, timeout, wait=False)
            self.wait_all_healthy(self.etcd_names, timeout)
            if self.etcd_tls is not None:
                etcdctl = shutil.which("etcdctl") or str(Path(self.etcd_binary).with_name("etcdctl"))
                lock_down_etcd(
                    etcdctl,
                    self.etcd_endpoint(),
                    self.etcd_tls,
                    self.cluster_name,
                    self.etcd_secrets_dir,
                )
            self.start_process("registry", timeout)
            self.start_process("placement", timeout)
            for name in self.bookie_names:
                self.start_process(name, timeout, wait=False)
            for name in self.bookie_names:
                self.wait_healthy(name, timeout)
            self.wait_bookies_registered(len(self.bookie_names), timeout)
            for name in self.gateway_names:
                self.start_process(name, timeout, wait=False)
            self.wait_all_healthy(self.gateway_names, timeout)
            if self.balancer is not None:
                self.balancer.start(timeout)
        except BaseException:
            self.stop()
            raise

    def start_process(self, name: str, timeout: float = 60.0, wait: bool = True) -> None:
        process = self.processes[name]
        if process.popen is not None and process.popen.poll() is None:
            return
        log = (self.data_dir / "logs" / f"{name}.log").open("ab")
        process.popen = subprocess.Popen(
            process.command,
            env=process.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in the terminal reaches only the supervisor
        )
        log.close()
        if wait:
            self.wait_healthy(name, timeout)

    def wait_healthy(self, name: str, timeout: float = 60.0) -> None:
        process = self.processes[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.popen is not None and process.popen.poll() is not None:
                raise ClusterError(f"{name} exited with status {process.popen.returncode}; see {self.log_path(name)}")
            if self._is_healthy(process):
                return
            time.sleep(0.1)
        raise ClusterError(f"{name} did not become healthy within {timeout:.0f}s; see {self.log_path(name)}")

    def wait_all_healthy(self, names: Sequence[str], timeout: float = 60.0) -> None:
        """Wait for several processes started with `wait=False` at once; fails
        as soon as any of them exits (a service must wait for a missing
        dependency, not die of it)."""
        waiting = list(names)
        deadline = time.monotonic() + timeout
        while waiting:
            for name in list(waiting):
                popen = self.processes[name].popen
                if popen is not None and popen.poll() is not None:
                    raise ClusterError(f"{name} exited with status {popen.returncode}; see {self.log_path(name)}")
                if self._is_healthy(self.processes[name]):
                    waiting.remove(name)
            if waiting and time.monotonic() > deadline:
                raise ClusterError(
                    f"{', '.join(waiting)} not healthy within {timeout:.0f}s; see {self.data_dir / 'logs'}"
                )
            if waiting:
                time.sleep(0.1)

    def _is_healthy(self, process: _Process) -> bool:
        if process.health_target is None:
            return etcd_healthy(self.etcd_ports[process.name][0], self.etcd_tls, self.host(process.name))
        return grpc_serving(process.health_target, tls=self.tls)

    def wait_bookies_registered(self, count: int, timeout: float = 60.0) -> None:
        from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc

        deadline = time.monotonic() + timeout
        with tooling_channel(self.registry_target, self.tls) as channel:
            stub = registry_pb2_grpc.RegistryServiceStub(channel)
            while time.monotonic() < deadline:
                try:
                    response = stub.ListBookies(
                        registry_pb2.ListBookiesRequest(state=registry_pb2.BOOKIE_STATE_WRITABLE), timeout=2
                    )
                    if len(response.bookies) >= count:
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.1)
        raise ClusterError(f"fewer than {count} bookies registered within {timeout:.0f}s")

    def log_path(self, name: str) -> Path:
        return self.data_dir / "logs" / f"{name}.log"

    def pid(self, name: str) -> int | None:
        popen = self.processes[name].popen
        return popen.pid if popen is not None and popen.poll() is None else None

    def kill(self, name: str) -> None:
        """SIGKILL: no chance to flush or clean up."""
        popen = self.processes[name].popen
        if popen is not None and popen.poll() is None:
            popen.send_signal(signal.SIGKILL)
            popen.wait(timeout=10)

    def pause(self, name: str) -> None:
        """SIGSTOP: the process hangs, its sockets stay open (a hung bookie)."""
        popen = self.processes[name].popen
        if popen is not None and popen.poll() is None:
            popen.send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        """SIGCONT after pause()."""
        popen = self.processes[name].popen
        if popen is not None and popen.poll() is None:
            popen.send_signal(signal.SIGCONT)

    def terminate(self, name: str, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
        popen = self.processes[name].popen
        if popen is None or popen.poll() is not None:
            return
        popen.send_signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout=10)

    def restart(self, name: str, timeout: float = 60.0) -> None:
        """Stop `name` and start it again. After the registry, also wait until
        every running bookie has registered with it again: until then a
        registration whose session ended with the old registry still counts
        (its lease lives out its TTL), and a bookie gone from it leaves the
        cluster one short a moment later."""
        marks = self._bookie_log_sizes() if name == "registry" else {}
        self.terminate(name)
        self.start_process(name, timeout)
        if marks:
            self._wait_registered_since(marks, timeout)

    def _bookie_log_sizes(self) -> dict[str, int]:
        """Each running bookie's log size: where its lines after now begin."""
        sizes = {}
        for name in self.bookie_names:
            popen = self.processes[name].popen
            if popen is not None and popen.poll() is None:
                path = self.log_path(name)
                sizes[name] = path.stat().st_size if path.exists() else 0
        return sizes

    def _wait_registered_since(self, marks: dict[str, int], timeout: float) -> None:
        """Until each bookie in `marks` logs a registration after its mark (a
        bookie logs one whenever its session is established again)."""
        deadline = time.monotonic() + timeout
        waiting = dict(marks)
        while waiting:
            for name, offset in list(waiting.items()):
                with self.log_path(name).open("rb") as log:
                    log.seek(offset)
                    if REGISTERED_LOG_LINE in log.read():
                        del waiting[name]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{sorted(waiting)} did not register with the restarted registry within {timeout:.0f}s"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop everything this cluster started: the balancer and gateways
        first, etcd last."""
        if self.balancer is not None:
            self.balancer.stop()
        for name in reversed(list(self.processes)):
            self.terminate(name)

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class StandaloneBookie:
    """One bookie process with QUIRE_BOOKIE_STANDALONE=true: no registry, no
    cookie check, no garbage collection. Started and stopped here by PID."""

    def __init__(self, data_dir: Path, *, port: int = 0, http_port: int = 0, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port or free_port()
        self.http_port = http_port or free_port()
        self.env = dict(os.environ)
        self.env.update(
            QUIRE_INSECURE_PLAINTEXT_DEV="true",
            QUIRE_BOOKIE_STANDALONE="true",
            QUIRE_BOOKIE_PORT=str(self.port),
            QUIRE_BOOKIE_HTTP_PORT=str(self.http_port),
            QUIRE_BOOKIE_DATA_DIR=str(self.data_dir / "bookie"),
        )
        self.env.update(env or {})
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "bookie.log"

    def start(self, timeout: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "quire_bookie"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise ClusterError(f"bookie exited with status {self.popen.returncode}; see {self.log_path}")
            if grpc_serving(self.target):
                return
            time.sleep(0.1)
        self.stop()
        raise ClusterError(f"bookie did not become healthy within {timeout:.0f}s; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: no chance to flush or clean up."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        return self.popen.returncode

    def __enter__(self) -> StandaloneBookie:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
