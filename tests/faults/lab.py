"""The fault lab: a local cluster (every service its own process) plus the
tools to hurt it — signals via LocalCluster (kill/pause/resume/terminate/
restart), tmpfs mounts with `size=` for a full disk, remount read-only,
trigger files for the bookie's storage-fault wrapper, and strace attached to
a running service.

Everything started or mounted here is stopped or unmounted in `finally`.
Mounts live under MOUNT_PREFIX; the suite refuses to start while any exist.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from quire_client.cluster import LocalCluster, Ports, process_names
from tests.faults.netns import NetLab, net_lab

MOUNT_PREFIX = "/tmp/quire-faults-mnt-"
CLEANUP_COMMAND = f"grep -o '{MOUNT_PREFIX}[^ ]*' /proc/mounts | xargs -r -n1 umount -l"

# Fast failure detection so each scenario stays within its time budget.
FAST_SETTINGS = {
    "QUIRE_BOOKIE_TTL_SECONDS": "3",
    "QUIRE_GATEWAY_BOOKIE_RETRY_SECONDS": "0.5",
    "QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS": "2",
    "QUIRE_GATEWAY_RECOVERY_TIMEOUT_SECONDS": "20",
    "QUIRE_GATEWAY_RECOVERY_BOOKIE_TIMEOUT_SECONDS": "1",
    "QUIRE_BOOKIE_DISK_CHECK_INTERVAL_SECONDS": "0.2",
    # The scrub would repair what other rows damage on purpose before they
    # look; the rows about it turn it on.
    "QUIRE_AUDITOR_SCRUB_ENTRIES_PER_SECOND": "0",
}


# For rows about what the bookies hold (corrupt or unreadable copies, replicas
# after an ensemble change): every read must reach the bookies, not the
# gateway's cache of entries it wrote itself.
READS_REACH_BOOKIES = {"QUIRE_GATEWAY_ENTRY_CACHE_BYTES": "0"}


def leftover_mounts() -> list[str]:
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(MOUNT_PREFIX)]


@contextmanager
def fault_cluster(
    data_dir: Path,
    *,
    bookies: int = 3,
    env: dict[str, str] | None = None,
    bookie_env: dict[str, dict[str, str]] | None = None,
    etcd_args: Sequence[str] = (),
    hosts: dict[str, str] | None = None,
    command_prefix: dict[str, list[str]] | None = None,
    gateways: int = 1,
    etcd_members: int = 1,
    balancer: bool = False,
) -> Iterator[LocalCluster]:
    """A started LocalCluster with fast failure detection; stopped whatever happens.
    `hosts` and `command_prefix` place processes in the network lab (netns.py)."""
    cluster = LocalCluster(
        data_dir,
        Ports.free(bookies=bookies),
        extra_env={**FAST_SETTINGS, **(env or {})},
        bookie_env=bookie_env or {},
        etcd_args=etcd_args,
        hosts=hosts,
        command_prefix=command_prefix,
        gateways=gateways,
        etcd_members=etcd_members,
        balancer=balancer,
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def lab_cluster(
    data_dir: Path,
    *,
    bookies: int = 3,
    gateways: int = 1,
    etcd_members: int = 1,
    env: dict[str, str] | None = None,
    bookie_env: dict[str, dict[str, str]] | None = None,
) -> Iterator[tuple[NetLab, LocalCluster]]:
    """A fault_cluster with every process (each etcd member, the registry,
    placement, each bookie, each gateway) in its own namespace of a network
    lab; the test and its clients are the lab's "clients"."""
    members = process_names(bookies=bookies, gateways=gateways, etcd_members=etcd_members)
    with (
        net_lab(members) as net,
        fault_cluster(
            data_dir,
            bookies=bookies,
            gateways=gateways,
            etcd_members=etcd_members,
            hosts=net.hosts(),
            command_prefix=net.command_prefix(),
            env=env,
            bookie_env=bookie_env,
        ) as cluster,
    ):
        yield net, cluster


@contextmanager
def tmpfs(name: str, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. "64m") mounted under MOUNT_PREFIX; unmounted in finally."""
    path = Path(f"{MOUNT_PREFIX}{name}-{os.getpid()}")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
        path.rmdir()


def remount(path: Path, mode: str) -> None:
    """`mode` is "ro" or "rw"."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


def fill(path: Path, leave_bytes: int) -> Path:
    """Write a filler file until the filesystem has about `leave_bytes` free."""
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize
    filler = path / "filler"
    with filler.open("wb") as out:
        remaining = max(0, free - leave_bytes)
        chunk = b"\0" * (1 << 20)
        while remaining > 0:
            out.write(chunk[: min(len(chunk), remaining)])
            remaining -= len(chunk)
    return filler


@contextmanager
def strace(pid: int, output: Path, syscalls: str = "fsync,fdatasync,sync_file_range,write,sendmsg") -> Iterator[Path]:
    """strace attached to every thread of `pid` (and threads it starts) while
    the block runs: timestamps, fd paths and socket endpoints (-yy), buffers in
    hex (-xx) and whole (-s). Detached in finally; the process runs on."""
    messages = output.with_suffix(".stderr")
    with messages.open("wb") as errors:
        tracer = subprocess.Popen(
            ["strace", "-f", "-tt", "-yy", "-xx", "-s", str(16 << 20), "-e", f"trace={syscalls}", "-o", str(output),
             "-p", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while "attached" not in messages.read_text(errors="replace"):  # "Process N attached with T threads"
            assert tracer.poll() is None, f"strace exited: {messages.read_text(errors='replace')}"
            assert time.monotonic() < deadline, "strace did not attach within 30s"
            time.sleep(0.05)
        yield output
    finally:
        tracer.send_signal(signal.SIGINT)  # detach
        try:
            tracer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            tracer.kill()
            tracer.wait(timeout=10)
