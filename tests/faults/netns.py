"""The network-namespace lab: every process of a cluster in a Linux network
namespace of its own, all joined by one bridge, so that the link between any
two of them can be cut, thinned or slowed while both run on.

Topology (one /24 per run out of 198.18.0.0/16, in the RFC 2544 benchmark
range 198.18.0.0/15; the third octet is the run's *slot*):

    quire-faults-<pid>-hub      a bridge; nothing runs here
    quire-faults-<pid>-m<k>     member k (a gateway, the registry, placement, an
                                etcd member, a bookie): 198.18.S.(10+k)/24 on
                                its `lab0`, whose peer `m<k>` is a port of the bridge
    the root namespace          the test and its clients ("clients"):
                                198.18.S.254/24 on qf<pid>c, whose peer `c` is a
                                port of the bridge

Members reach each other and the clients over the bridge; nothing of the lab
is routed through the root namespace, so the host's own firewall (a Docker
engine's FORWARD policy, say) never sees lab traffic.

Faults (each removed by `heal`, and everything removed in `finally`):
- `partition(a, b)`: the bridge drops every packet between `a` and `b`, both
  ways: each side's packets vanish silently, as in a real partition.
  `isolate(a)` partitions `a` from every other member and from the clients.
- `lose(a, b, percent)`: the bridge drops that share of the packets between
  `a` and `b`, both ways, at random.
- `block_receiver(member, host)`: a blackhole route in the member's namespace
  toward `host` — packets from `host` arrive, the member's answers vanish
  (a silent drop seen from `host`).
- `block_sender(member)`: every other namespace's route to the member (the
  clients' too) becomes a blackhole — senders fail at once.
- `shape(member, ...)`: a `tc tbf` qdisc on the member's bridge port (traffic
  toward the member).
This kernel has no netem, so there is no delay or jitter here; the userspace
proxy (proxy.py) adds those on one link.

Pair faults are nftables rules of the hub's bridge table: they go with the hub.
Names carry the pytest pid; a dead run's leftovers make the suite refuse to
start. `python -m tests.faults.netns --cleanup` removes the leftovers of dead
runs (never a live run's).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

NAMESPACE_PREFIX = "quire-faults-"
LINK_PREFIX = "qf"
LAB_NETWORK = ipaddress.ip_network("198.18.0.0/15")
CLIENTS = "clients"  # the root namespace, where the test and its clients run
CLIENTS_OCTET = 254
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLEANUP_COMMAND = f"cd {_REPO} && {sys.executable} -m tests.faults.netns --cleanup"
_TABLE = "quire_lab"  # the hub's nftables bridge table
_CHAIN = "pairs"


def _run(command: list[str], check: bool) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")
    return result.stdout


def ip(*args: str, check: bool = True) -> str:
    return _run(["ip", *args], check)


def tc(*args: str, check: bool = True) -> None:
    _run(["tc", *args], check)


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


@dataclass(frozen=True)
class Leftovers:
    """What runs of the lab left in the kernel, by the pid that made it."""

    namespaces: dict[str, int] = field(default_factory=dict)  # name -> pid
    addresses: dict[str, int] = field(default_factory=dict)  # the clients' address in the root namespace -> pid
    blackholes: list[str] = field(default_factory=list)  # root-namespace blackhole routes in the lab network

    def slots(self, pids: set[int]) -> set[int]:
        return {int(a.split(".")[2]) for a, p in self.addresses.items() if p in pids}

    def stale(self) -> Leftovers:
        live_slots = self.slots({p for p in self.addresses.values() if _alive(p)})
        return Leftovers(
            {n: p for n, p in self.namespaces.items() if not _alive(p)},
            {a: p for a, p in self.addresses.items() if not _alive(p)},
            [r for r in self.blackholes if int(r.split(".")[2]) not in live_slots],
        )

    def of(self, pid: int) -> Leftovers:
        return Leftovers(
            {n: p for n, p in self.namespaces.items() if p == pid},
            {a: p for a, p in self.addresses.items() if p == pid},
            [r for r in self.blackholes if int(r.split(".")[2]) in self.slots({pid})],
        )

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.addresses or self.blackholes)

    def describe(self) -> str:
        return ", ".join([*self.namespaces, *self.addresses, *(f"blackhole {r}" for r in self.blackholes)])


def leftovers() -> Leftovers:
    if shutil.which("ip") is None:
        return Leftovers()  # no iproute2: nothing can have been left (and the lab rows cannot run)
    namespaces = {}
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        match = re.fullmatch(rf"{NAMESPACE_PREFIX}(\d+)-\w+", name)
        if match:
            namespaces[name] = int(match.group(1))
    addresses = {}
    for line in ip("-o", "-4", "addr", "show").splitlines():
        match = re.search(rf"{LINK_PREFIX}(\d+)c\s+inet ([\d.]+)/", line)
        if match:
            addresses[match.group(2)] = int(match.group(1))
    blackholes = [
        line.split()[1]
        for line in ip("-4", "route", "show", "type", "blackhole", "root", str(LAB_NETWORK)).splitlines()
        if line.strip()
    ]
    return Leftovers(namespaces, addresses, blackholes)


def remove(found: Leftovers) -> None:
    for route in found.blackholes:
        ip("route", "del", "blackhole", route, check=False)
    for namespace in found.namespaces:
        ip("netns", "delete", namespace, check=False)  # its links go with it, and their veth peers
    for pid in set(found.addresses.values()):
        ip("link", "delete", f"{LINK_PREFIX}{pid}c", check=False)  # if the hub was already gone


def _free_slot(pid: int) -> int:
    taken = {int(a.split(".")[2]) for a in leftovers().addresses}
    for offset in range(254):
        slot = (pid + offset) % 254 + 1
        if slot not in taken:
            return slot
    raise RuntimeError("no free /24 for the network lab in 198.18.0.0/16")


class NetLab:
    """A namespace for each of `members` (process names: "gateway", "registry",
    "etcd-2", "bookie-1", ...), joined by one bridge; see the module doc."""

    def __init__(self, members: Sequence[str]) -> None:
        if CLIENTS in members or len(set(members)) != len(members) or len(members) > CLIENTS_OCTET - 11:
            raise ValueError(f"lab members must be distinct, fewer than {CLIENTS_OCTET - 10}, none {CLIENTS!r}")
        self.pid = os.getpid()
        self.members = list(members)
        self.slot = _free_slot(self.pid)
        self._pairs: set[frozenset[str]] = set()
        self._losses: dict[frozenset[str], int] = {}  # pair -> percent of packets dropped
        self._receiver_blocks: set[tuple[str, str]] = set()
        self._sender_blocks: set[str] = set()
        self._shaped: set[str] = set()

    # -- names and addresses ------------------------------------------------------

    def host(self, name: str) -> str:
        """The address of a member, or of the clients (the root namespace)."""
        octet = CLIENTS_OCTET if name == CLIENTS else 10 + self.members.index(name)
        return f"198.18.{self.slot}.{octet}"

    def _index(self, member: str) -> int:
        return self.members.index(member)

    def namespace(self, member: str) -> str:
        return f"{NAMESPACE_PREFIX}{self.pid}-m{self._index(member)}"

    @property
    def hub(self) -> str:
        return f"{NAMESPACE_PREFIX}{self.pid}-hub"

    def port(self, member: str) -> str:
        """The member's port on the bridge (in the hub namespace)."""
        return f"m{self._index(member)}"

    def hosts(self) -> dict[str, str]:
        """For LocalCluster(hosts=...)."""
        return {name: self.host(name) for name in self.members}

    def command_prefix(self) -> dict[str, list[str]]:
        """For LocalCluster(command_prefix=...): each member runs in its namespace."""
        return {name: ["ip", "netns", "exec", self.namespace(name)] for name in self.members}

    def _namespaces_but(self, member: str) -> list[list[str]]:
        """`ip` argument prefixes for every namespace a packet toward `member` may start in."""
        return [[]] + [["-n", self.namespace(other)] for other in self.members if other != member]

    # -- set-up and tear-down -----------------------------------------------------

    def create(self) -> None:
        hub = self.hub
        ip("netns", "add", hub)
        ip("-n", hub, "link", "add", "lab", "type", "bridge")
        ip("-n", hub, "link", "set", "lab", "up")
        _run(["ip", "netns", "exec", hub, "nft", "add", "table", "bridge", _TABLE], check=True)
        chain = "{ type filter hook forward priority 0; policy accept; }"
        _run(["ip", "netns", "exec", hub, "nft", "add", "chain", "bridge", _TABLE, _CHAIN, chain], check=True)
        clients_link = f"{LINK_PREFIX}{self.pid}c"
        ip("link", "add", clients_link, "type", "veth", "peer", "name", "c", "netns", hub)
        self._attach("c")
        ip("addr", "add", f"{self.host(CLIENTS)}/24", "dev", clients_link)
        ip("link", "set", clients_link, "up")
        for member in self.members:
            namespace, port = self.namespace(member), self.port(member)
            ip("netns", "add", namespace)
            ip("link", "add", "lab0", "netns", namespace, "type", "veth", "peer", "name", port, "netns", hub)
            self._attach(port)
            ip("-n", namespace, "link", "set", "lo", "up")
            ip("-n", namespace, "addr", "add", f"{self.host(member)}/24", "dev", "lab0")
            ip("-n", namespace, "link", "set", "lab0", "up")

    def _attach(self, port: str) -> None:
        ip("-n", self.hub, "link", "set", port, "master", "lab")
        ip("-n", self.hub, "link", "set", port, "up")

    def destroy(self) -> None:
        self.heal()
        remove(leftovers().of(self.pid))

    # -- faults -------------------------------------------------------------------

    def _nft(self, *args: str) -> None:
        _run(["ip", "netns", "exec", self.hub, "nft", *args], check=True)

    def _drops(self, a: str, b: str, extra: tuple[str, ...] = ()) -> list[str]:
        """nftables commands dropping what `a` and `b` send each other (all of it, or a share)."""
        rule = f"add rule bridge {_TABLE} {_CHAIN} ip saddr {{}} ip daddr {{}} {' '.join(extra)} drop"
        return [rule.format(self.host(source), self.host(destination)) for source, destination in ((a, b), (b, a))]

    def _drop_between(self, a: str, b: str, extra: tuple[str, ...] = ()) -> None:
        self._nft_script(self._drops(a, b, extra))

    def _nft_script(self, commands: list[str]) -> None:
        """Several nftables commands as one transaction: all of them take effect at once."""
        script = "".join(command + "\n" for command in commands)
        result = subprocess.run(["ip", "netns", "exec", self.hub, "nft", "-f", "-"], input=script,
                                capture_output=True, text=True)  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"nft -f in {self.hub}: {result.stderr.strip()}")

    def partition(self, a: str, b: str) -> None:
        """Every packet between `a` and `b` dropped on the bridge, both ways."""
        if frozenset((a, b)) not in self._pairs:
            self._drop_between(a, b)
            self._pairs.add(frozenset((a, b)))

    def reconnect(self, a: str, b: str) -> None:
        """Undo partition(a, b) and lose(a, b), leaving every other fault in place."""
        pair = frozenset((a, b))
        if pair in self._pairs or pair in self._losses:
            self._pairs.discard(pair)
            self._losses.pop(pair, None)
            commands = [f"flush chain bridge {_TABLE} {_CHAIN}"]
            for cut in self._pairs:
                one, other = sorted(cut)
                commands += self._drops(one, other)
            for lossy, percent in self._losses.items():
                one, other = sorted(lossy)
                commands += self._drops(one, other, _random_share(percent))
            self._nft_script(commands)

    def isolate(self, member: str, from_: Sequence[str] | None = None) -> None:
        """`member` partitioned from each of `from_` (every other member and the clients by default)."""
        for other in from_ if from_ is not None else [*self.members, CLIENTS]:
            if other != member:
                self.partition(member, other)

    def lose(self, a: str, b: str, percent: int) -> None:
        """`percent` (1 to 99; partition() is 100) of the packets between `a`
        and `b` dropped at random, both ways."""
        if not 0 < percent < 100:
            raise ValueError(f"lose: percent={percent}, not 1 to 99")
        self._drop_between(a, b, _random_share(percent))
        self._losses[frozenset((a, b))] = percent

    def block_receiver(self, member: str, host: str) -> None:
        """Receiver-side blackhole: in the member's namespace, a blackhole route toward `host`."""
        ip("-n", self.namespace(member), "route", "add", "blackhole", f"{host}/32")
        self._receiver_blocks.add((member, host))

    def block_sender(self, member: str) -> None:
        """Sender-side blackhole: every other namespace's route to the member becomes a blackhole."""
        for where in self._namespaces_but(member):
            ip(*where, "route", "replace", "blackhole", f"{self.host(member)}/32")
        self._sender_blocks.add(member)

    def shape(self, member: str, rate: str = "1mbit", burst: str = "32kbit", latency: str = "400ms") -> None:
        """`tc tbf` on the member's bridge port: traffic toward the member."""
        tc("-n", self.hub, "qdisc", "add", "dev", self.port(member), "root", "tbf",
           "rate", rate, "burst", burst, "latency", latency)  # fmt: skip
        self._shaped.add(member)

    def heal(self) -> int:
        """Remove every fault; returns how many were removed."""
        removed = len(self._pairs) + len(self._losses)
        if removed:
            self._nft("flush", "chain", "bridge", _TABLE, _CHAIN)
        self._pairs.clear()
        self._losses.clear()
        for member, host in list(self._receiver_blocks):
            ip("-n", self.namespace(member), "route", "del", "blackhole", f"{host}/32", check=False)
            self._receiver_blocks.discard((member, host))
            removed += 1
        for member in list(self._sender_blocks):
            for where in self._namespaces_but(member):
                ip(*where, "route", "del", "blackhole", f"{self.host(member)}/32", check=False)
            self._sender_blocks.discard(member)
            removed += 1
        for member in list(self._shaped):
            tc("-n", self.hub, "qdisc", "del", "dev", self.port(member), "root", check=False)
            self._shaped.discard(member)
            removed += 1
        return removed


def _random_share(percent: int) -> tuple[str, ...]:
    """An nftables match true for `percent` of the packets, at random."""
    return ("numgen", "random", "mod", "100", "<", str(percent))


@contextmanager
def net_lab(members: Sequence[str]) -> Iterator[NetLab]:
    """A NetLab, created now and removed (faults, namespaces, links, addresses) in finally."""
    lab = NetLab(members)
    try:
        lab.create()
        yield lab
    finally:
        lab.destroy()


def main() -> None:
    if sys.argv[1:] != ["--cleanup"]:
        sys.exit(f"usage: {sys.argv[0]} --cleanup   (removes what dead runs of the network lab left)")
    stale = leftovers().stale()
    if not stale:
        print("no leftovers of dead network-lab runs")
        return
    print(f"removing {stale.describe()}")
    remove(stale)


if __name__ == "__main__":
    main()
