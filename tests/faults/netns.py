"""The network-namespace lab: each bookie in its own Linux network namespace,
joined to the root namespace by a veth pair, so routes and qdiscs can cut or
slow one bookie's links.

Addresses (one /24 per run out of 198.18.0.0/16, in the RFC 2544 benchmark
range 198.18.0.0/15; the third octet is the run's *slot*):

    198.18.S.1    gateway      on `lo` of the root namespace (label lo:qf<pid>)
    198.18.S.2    registry     on `lo`
    198.18.S.3    placement    on `lo`
    198.18.S.1k   bookie-k     in namespace quire-faults-<pid>-b<k>, on veth qf<pid>b<k>n

etcd stays on 127.0.0.1 (only the registry talks to it). The root side of
each veth (qf<pid>b<k>) has no address: a /32 route sends the bookie's address
into it with source 198.18.S.1, so everything the root namespace sends to a
bookie (the gateway's adds and reads, placement's disk polls, the test's own
health probes) comes from the gateway's address. In the namespace one route,
198.18.S.0/24 on the veth, reaches every root-namespace service.

Faults (each removed by `heal`, and everything removed in `finally`):
- `block_receiver(bookie, host)`: a blackhole route in the bookie's namespace
  toward `host` — packets from `host` arrive, the bookie's answers vanish
  (a silent drop seen from `host`).
- `block_sender(bookie)`: the root namespace's route to the bookie turns into a
  blackhole — senders in the root namespace fail at once.
- `shape(bookie, ...)`: a `tc tbf` qdisc on the root side of the bookie's veth
  (traffic toward the bookie).

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

NAMESPACE_PREFIX = "quire-faults-"
LINK_PREFIX = "qf"
LAB_NETWORK = ipaddress.ip_network("198.18.0.0/15")
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLEANUP_COMMAND = f"cd {_REPO} && {sys.executable} -m tests.faults.netns --cleanup"
SERVICE_OCTETS = {"gateway": 1, "registry": 2, "placement": 3}


def ip(*args: str, check: bool = True) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def tc(*args: str, check: bool = True) -> None:
    result = subprocess.run(["tc", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {result.stderr.strip()}")


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


@dataclass(frozen=True)
class Leftovers:
    """What runs of the lab left in the kernel, by the pid that made it."""

    namespaces: dict[str, int] = field(default_factory=dict)  # name -> pid
    addresses: dict[str, int] = field(default_factory=dict)  # address on lo -> pid
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
        match = re.fullmatch(rf"{NAMESPACE_PREFIX}(\d+)-b\d+", name)
        if match:
            namespaces[name] = int(match.group(1))
    addresses = {}
    for line in ip("-o", "-4", "addr", "show", "dev", "lo").splitlines():
        match = re.search(rf"inet ([\d.]+)/32 .*lo:{LINK_PREFIX}(\d+)", line)
        if match:
            addresses[match.group(1)] = int(match.group(2))
    blackholes = [
        line.split()[1]
        for line in ip("-4", "route", "show", "type", "blackhole", "root", str(LAB_NETWORK)).splitlines()
        if line.strip()
    ]
    return Leftovers(namespaces, addresses, blackholes)


def remove(found: Leftovers) -> None:
    for route in found.blackholes:
        ip("route", "del", "blackhole", route, check=False)
    for address in found.addresses:
        ip("addr", "del", f"{address}/32", "dev", "lo", check=False)
    for namespace in found.namespaces:
        ip("netns", "delete", namespace, check=False)  # its veth pair goes with it


def _free_slot(pid: int) -> int:
    taken = {int(a.split(".")[2]) for a in leftovers().addresses}
    for offset in range(254):
        slot = (pid + offset) % 254 + 1
        if slot not in taken:
            return slot
    raise RuntimeError("no free /24 for the network lab in 198.18.0.0/16")


class NetLab:
    """Namespaces, veths and addresses for `bookies` bookies; see the module doc."""

    def __init__(self, bookies: int) -> None:
        self.pid = os.getpid()
        self.bookies = bookies
        self.slot = _free_slot(self.pid)
        self._receiver_blocks: set[tuple[str, str]] = set()
        self._sender_blocks: set[str] = set()
        self._shaped: set[str] = set()

    # -- names and addresses ------------------------------------------------------

    def bookie_names(self) -> list[str]:
        return [f"bookie-{k + 1}" for k in range(self.bookies)]

    def host(self, name: str) -> str:
        """The address of a service ("gateway", "registry", "placement") or a bookie ("bookie-2")."""
        if name.startswith("bookie-"):
            return f"198.18.{self.slot}.{10 + int(name.split('-')[1])}"
        return f"198.18.{self.slot}.{SERVICE_OCTETS[name]}"

    def namespace(self, bookie: str) -> str:
        return f"{NAMESPACE_PREFIX}{self.pid}-b{bookie.split('-')[1]}"

    def veth(self, bookie: str) -> str:
        """The root-namespace end of the bookie's veth pair (its peer ends in "n")."""
        return f"{LINK_PREFIX}{self.pid}b{bookie.split('-')[1]}"

    def hosts(self) -> dict[str, str]:
        """For LocalCluster(hosts=...)."""
        return {name: self.host(name) for name in [*SERVICE_OCTETS, *self.bookie_names()]}

    def command_prefix(self) -> dict[str, list[str]]:
        """For LocalCluster(command_prefix=...): each bookie runs in its namespace."""
        return {name: ["ip", "netns", "exec", self.namespace(name)] for name in self.bookie_names()}

    # -- set-up and tear-down -----------------------------------------------------

    def create(self) -> None:
        for service in SERVICE_OCTETS:
            ip("addr", "add", f"{self.host(service)}/32", "dev", "lo", "label", f"lo:{LINK_PREFIX}{self.pid}")
        for bookie in self.bookie_names():
            namespace, veth, peer = self.namespace(bookie), self.veth(bookie), f"{self.veth(bookie)}n"
            ip("netns", "add", namespace)
            ip("link", "add", veth, "type", "veth", "peer", "name", peer, "netns", namespace)
            ip("link", "set", veth, "up")
            ip("-n", namespace, "link", "set", "lo", "up")
            ip("-n", namespace, "link", "set", peer, "up")
            ip("-n", namespace, "addr", "add", f"{self.host(bookie)}/32", "dev", peer)
            ip("-n", namespace, "route", "add", f"198.18.{self.slot}.0/24", "dev", peer)
            self._route_to(bookie)

    def _route_to(self, bookie: str) -> None:
        ip("route", "replace", f"{self.host(bookie)}/32", "dev", self.veth(bookie), "src", self.host("gateway"))

    def destroy(self) -> None:
        self.heal()
        remove(leftovers().of(self.pid))

    # -- faults -------------------------------------------------------------------

    def block_receiver(self, bookie: str, host: str) -> None:
        """Receiver-side blackhole: in the bookie's namespace, a blackhole route toward `host`."""
        ip("-n", self.namespace(bookie), "route", "add", "blackhole", f"{host}/32")
        self._receiver_blocks.add((bookie, host))

    def block_sender(self, bookie: str) -> None:
        """Sender-side blackhole: the root namespace's route to the bookie becomes a blackhole."""
        ip("route", "replace", "blackhole", f"{self.host(bookie)}/32")
        self._sender_blocks.add(bookie)

    def shape(self, bookie: str, rate: str = "1mbit", burst: str = "32kbit", latency: str = "400ms") -> None:
        """`tc tbf` on the root end of the bookie's veth: traffic toward the bookie."""
        tc("qdisc", "add", "dev", self.veth(bookie), "root", "tbf", "rate", rate, "burst", burst, "latency", latency)
        self._shaped.add(bookie)

    def heal(self) -> int:
        """Remove every route and qdisc fault; returns how many were removed."""
        removed = 0
        for bookie, host in list(self._receiver_blocks):
            ip("-n", self.namespace(bookie), "route", "del", "blackhole", f"{host}/32", check=False)
            self._receiver_blocks.discard((bookie, host))
            removed += 1
        for bookie in list(self._sender_blocks):
            self._route_to(bookie)
            self._sender_blocks.discard(bookie)
            removed += 1
        for bookie in list(self._shaped):
            tc("qdisc", "del", "dev", self.veth(bookie), "root", check=False)
            self._shaped.discard(bookie)
            removed += 1
        return removed


@contextmanager
def net_lab(bookies: int) -> Iterator[NetLab]:
    """A NetLab, created now and removed (faults, namespaces, veths, addresses) in finally."""
    lab = NetLab(bookies)
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
