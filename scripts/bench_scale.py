"""How a cluster's standing cost grows with the ledgers it holds.

For each count N: a fresh local cluster (etcd, registry, placement, three
bookies, one gateway, default settings; `--scrub-pass-interval` shortens the
scrub's period so that its cost shows within the window) is
filled with N closed ledgers of one 1 KiB entry each through the gateway
(create, add, close; `--writers` at a time), then left idle with no client
for `--idle-seconds`. Printed per N: ledgers filled per second, each
process's CPU (% of one core) and RSS while idle, etcd's database size per
ledger, the scrub's copies checked per CPU-second of the gateway and bookies
together and each one's CPU per copy, with its pass time (from the
auditor's published figures); then (`--operations`) creates/s (x1 and x16),
the time to list every ledger, one-entry adds/s by 16 writers spread over
1,000 open ledgers against 16, deletes/s, and the bookies' bytes on disk
before and after deleting half the filled ledgers, each with every
process's CPU per operation.

A copy is one replica of one entry asked about; a copy also sampled (read
back and digest-checked on its bookie) still counts once. The idle window's
CPU includes what an empty cluster spends idle too (leases, health checks,
the audit); `--baseline-seconds` measures that first, on the empty cluster,
and reports the scrub's figures net of it as well.

Numbers are printed (and written as JSON with --json), never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from quire_api.ids import LedgerId
from quire_client import QuireAdmin, QuireClient
from quire_client.bench_closed import process_cpu_seconds
from quire_client.cluster import LocalCluster, Ports

PAYLOAD = b"\0" * 1024
OPERATIONS = ("creates", "list", "adds", "deletes")
T = TypeVar("T")
_DONE = object()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def at_once(items: list[T], writers: int, act: Callable[[T], object]) -> float:
    """Run `act` on every item, `writers` threads at a time; returns items/s."""
    left = iter(items)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                item = next(left, _DONE)
            if item is _DONE:
                return
            try:
                act(cast(T, item))
            except BaseException as exc:  # reported once the threads are done
                errors.append(exc)
                return

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return len(items) / (time.monotonic() - started) if items else 0.0


def new_ledger(client: QuireClient) -> LedgerId:
    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def fill(client: QuireClient, ledgers: int, writers: int) -> tuple[list[LedgerId], float]:
    """N closed one-entry ledgers, `writers` at a time; returns them and ledgers/s."""
    made: list[LedgerId] = []

    def one(_: int) -> None:
        ledger = new_ledger(client)
        client.add_entry(ledger, PAYLOAD)
        client.close_ledger(ledger)
        made.append(ledger)

    return made, at_once(list(range(ledgers)), writers, one)


def adds_across(client: QuireClient, ledgers: list[LedgerId], writers: int, seconds: float) -> int:
    """One-entry adds by `writers` threads for `seconds`, each add to the next
    of `ledgers` in turn; returns how many were acknowledged."""
    until = time.monotonic() + seconds
    done = [0] * writers

    def writer(index: int) -> None:
        turn = index
        while time.monotonic() < until:
            client.add_entry(ledgers[turn % len(ledgers)], PAYLOAD)
            turn += writers
            done[index] += 1

    at_once(list(range(writers)), writers, writer)
    return sum(done)


def bookie_bytes(data_dir: Path) -> int:
    """What the three bookies' directories hold on disk (every file: RocksDB's tables, WAL and logs)."""
    total = 0
    for name in ("bookie-1", "bookie-2", "bookie-3"):
        for path in (data_dir / name).rglob("*"):
            try:
                total += path.stat().st_size if path.is_file() else 0
            except FileNotFoundError:  # removed by a compaction while listed
                continue
    return total


def bytes_while_reclaiming(data_dir: Path, seconds: float) -> dict[str, int]:
    """The bookies' bytes on disk 1 s after the deletes and then every 15 s up to `seconds`:
    a compaction writes its output before it removes the files it replaces."""
    figures: dict[str, int] = {}
    started = time.monotonic()
    for at in [1.0, *range(15, int(seconds) + 1, 15)]:
        time.sleep(max(0.0, at - (time.monotonic() - started)))
        figures[f"{at:.0f}s"] = bookie_bytes(data_dir)
    return figures


class Phases:
    """Times phases of operations and what each server process spent on them."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.figures: dict[str, Any] = {}

    def run(self, name: str, count: int, act: Callable[[], object]) -> None:
        """Record `name`_per_second (count / wall time) and `name`_cpu_us: each
        process's CPU per operation, in µs."""
        before = {n: process_cpu_seconds(pid) or 0.0 for n, pid in self.pids.items()}
        started = time.monotonic()
        done = act()
        elapsed = time.monotonic() - started
        count = done if isinstance(done, int) else count
        after = {n: process_cpu_seconds(pid) or 0.0 for n, pid in self.pids.items()}
        self.figures[f"{name}_per_second"] = round(count / elapsed, 1)
        self.figures[f"{name}_cpu_us"] = {n: round(1e6 * (after[n] - before[n]) / max(count, 1)) for n in self.pids}


def operations(
    client: QuireClient, pids: dict[str, int], filled: list[LedgerId], data_dir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Creates, ListLedgers, adds across many open ledgers, deletes and the space they give back."""
    phases = Phases(pids)
    created: list[LedgerId] = []
    chosen = args.operations

    def create(_: int) -> None:
        created.append(new_ledger(client))

    if "creates" in chosen or "adds" in chosen:  # the adds go to the ledgers created here
        phases.run("creates_x1", 200, lambda: at_once(list(range(200)), 1, create))
        phases.run("creates_x16", 2000, lambda: at_once(list(range(2000)), 16, create))
    if "list" in chosen:
        started = time.monotonic()
        phases.figures["ledgers_listed"] = sum(1 for _ in client.list_ledgers(page_size=1000))
        phases.figures["list_all_ledgers_seconds"] = round(time.monotonic() - started, 2)
    if "adds" in chosen:
        open_ledgers = created[:1000]
        for spread in (16, 1000):
            spread_over = open_ledgers[:spread]
            phases.run(f"adds_{spread}_ledgers", 0, partial(adds_across, client, spread_over, 16, args.adds_seconds))
    if "deletes" not in chosen:
        return phases.figures
    phases.run("deletes_x16", len(created), lambda: at_once(created, 16, client.delete_ledger))
    if filled:
        before = bookie_bytes(data_dir)
        half = filled[: len(filled) // 2]
        phases.run("deletes_x16_one_entry", len(half), lambda: at_once(half, 16, client.delete_ledger))
        phases.figures["bookie_bytes_before_deleting_half"] = before
        phases.figures["bookie_bytes_after_deleting_half"] = bytes_while_reclaiming(data_dir, args.reclaim_seconds)
    return phases.figures


def scrub_figures(admin: QuireAdmin) -> dict[str, float]:
    leader = admin.auditor()
    return {key: float(value) for key, value in leader.properties.items() if key.startswith("scrub_")}


def idle_cpu_per_second(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Each process's CPU seconds per second over `seconds` of idling ({} for 0)."""
    if seconds <= 0:
        return {}
    before = {name: process_cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    return {name: ((process_cpu_seconds(pid) or 0.0) - before[name]) / elapsed for name, pid in pids.items()}


def etcd_db_bytes(data_dir: Path) -> int:
    return sum(path.stat().st_size for path in data_dir.rglob("db") if path.parent.name == "snap")


def measure(ledgers: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="quire-scale-") as data_dir:
        scrub_env = dict(setting.split("=", 1) for setting in args.settings)
        if args.scrub_pass_interval:
            scrub_env["QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS"] = str(args.scrub_pass_interval)
        cluster = LocalCluster(Path(data_dir), Ports.free(bookies=3), extra_env=scrub_env)
        cluster.start()
        try:
            pids = {name: pid for name in cluster.processes if (pid := cluster.pid(name)) is not None}
            empty_rss = {name: round(rss_mib(pid), 1) for name, pid in pids.items()}
            empty_cpu_per_second = idle_cpu_per_second(pids, args.baseline_seconds)
            with QuireClient(cluster.gateway_target) as client, QuireAdmin(cluster.gateway_target) as admin:
                filled, creates_per_second = fill(client, ledgers, args.writers)
                time.sleep(args.settle_seconds)
                before_cpu = {name: process_cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
                before_scrub = scrub_figures(admin)
                started = time.monotonic()
                time.sleep(args.idle_seconds)
                elapsed = time.monotonic() - started
                after_cpu = {name: process_cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
                after_scrub = scrub_figures(admin)
                rss_idle = {name: round(rss_mib(pid), 1) for name, pid in pids.items()}
                db_bytes = etcd_db_bytes(Path(data_dir))
                figures = operations(client, pids, filled, Path(data_dir), args)
            cpu_percent = {name: round(100 * (after_cpu[name] - before_cpu[name]) / elapsed, 2) for name in pids}
            checked = after_scrub.get("scrub_entries_checked", 0.0) - before_scrub.get("scrub_entries_checked", 0.0)
            sampled = after_scrub.get("scrub_entries_sampled", 0.0) - before_scrub.get("scrub_entries_sampled", 0.0)
            scrubbing = [n for n in pids if n == "gateway" or n.startswith("bookie")]
            scrub_cpu = sum(after_cpu[n] - before_cpu[n] for n in scrubbing)
            # Net of what the same processes spent idle while the cluster was empty (--baseline-seconds).
            net_cpu = {n: after_cpu[n] - before_cpu[n] - empty_cpu_per_second.get(n, 0.0) * elapsed for n in scrubbing}
            net = {}
            if empty_cpu_per_second and checked:
                net = {
                    "idle_cpu_percent_empty": {n: round(100 * rate, 2) for n, rate in empty_cpu_per_second.items()},
                    "scrub_copies_per_cpu_second_net": round(checked / sum(net_cpu.values())),
                    "scrub_cpu_us_per_copy_net": {n: round(1e6 * net_cpu[n] / checked, 1) for n in scrubbing},
                }
            return {
                "ledgers": ledgers,
                "filled_per_second": round(creates_per_second, 1),
                "idle_seconds": round(elapsed, 1),
                "idle_cpu_percent_of_one_core": cpu_percent,
                "idle_cpu_percent_all": round(sum(cpu_percent.values()), 2),
                "rss_mib_empty": empty_rss,
                "rss_mib_idle": rss_idle,
                "etcd_db_bytes": db_bytes,
                "etcd_db_bytes_per_ledger": round(db_bytes / ledgers, 1) if ledgers else None,
                "scrub_copies_checked_in_window": int(checked),
                "scrub_copies_sampled_in_window": int(sampled),
                "scrub_copies_per_cpu_second": round(checked / scrub_cpu) if scrub_cpu else None,
                # All of the window's CPU, idle work included, over the copies checked in it.
                "scrub_cpu_us_per_copy": {
                    n: round(1e6 * (after_cpu[n] - before_cpu[n]) / checked, 1) if checked else None for n in scrubbing
                },
                **net,
                "scrub_passes_in_window": int(after_scrub.get("scrub_passes", 0) - before_scrub.get("scrub_passes", 0)),
                "scrub_last_pass_seconds": after_scrub.get("scrub_last_pass_seconds"),
                **figures,
            }
        finally:
            cluster.stop()


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", default="0,2000,10000", help="ledger counts, comma-separated")
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--adds-seconds", type=float, default=5.0, help="each run of adds across open ledgers")
    parser.add_argument("--settle-seconds", type=float, default=5.0, help="after filling, before measuring")
    parser.add_argument(
        "--reclaim-seconds",
        type=float,
        default=60.0,
        help="after deleting half the filled ledgers, how long to follow the bookies' bytes on disk",
    )
    parser.add_argument(
        "--baseline-seconds",
        type=float,
        default=0.0,
        help="first measure the empty cluster idling this long, and report the scrub's CPU net of it",
    )
    parser.add_argument(
        "--scrub-pass-interval",
        type=float,
        default=None,
        help="QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS (default: the cluster's); short periods show the scrub's cost",
    )
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="NAME=VALUE", help="a setting for every service"
    )
    parser.add_argument(
        "--operations",
        default=",".join(OPERATIONS),
        help=f"what to measure after the idle window, comma-separated from {', '.join(OPERATIONS)}; 'none' for none",
    )
    parser.add_argument("--json", dest="json_file", default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    if bad := [setting for setting in args.settings if "=" not in setting]:
        print(f"--set: {bad[0]!r} is not NAME=VALUE", file=sys.stderr)
        return 2
    chosen = {part.strip() for part in args.operations.split(",") if part.strip()} - {"none"}
    if unknown := sorted(chosen - set(OPERATIONS)):
        print(f"--operations: {unknown[0]!r} is not one of {', '.join(OPERATIONS)} or none", file=sys.stderr)
        return 2
    args.operations = chosen
    try:
        counts = [int(part) for part in args.ledgers.split(",") if part.strip()]
    except ValueError:
        print(f"--ledgers: {args.ledgers!r} is not a comma-separated list of counts", file=sys.stderr)
        return 2
    results = []
    for count in counts:
        result = measure(count, args)
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.json_file:
        Path(args.json_file).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_file).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
