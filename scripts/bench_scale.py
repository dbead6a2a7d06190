"""How a cluster's standing cost grows with the ledgers it holds.

For each count N: a fresh local cluster (etcd, registry, placement, three
bookies, one gateway, default settings; `--scrub-pass-interval` shortens the
scrub's period so that its cost shows within the window) is
filled with N closed ledgers of one 1 KiB entry each through the gateway
(create, add, close; `--writers` at a time), then left idle with no client
for `--idle-seconds`. Printed per N: creates/s while filling, each process's
CPU (% of one core) and RSS while idle, etcd's database size per ledger, and
the scrub's copies checked per CPU-second of the gateway and bookies together
with its pass time (from the auditor's published figures).

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
from pathlib import Path
from typing import Any

from quire_api.ids import LedgerId
from quire_client import QuireClient
from quire_client.bench_closed import process_cpu_seconds
from quire_client.cluster import LocalCluster, Ports

PAYLOAD = b"\0" * 1024


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fill(client: QuireClient, ledgers: int, writers: int) -> float:
    """N closed one-entry ledgers, `writers` at a time; returns creates/s."""
    left = iter(range(ledgers))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer() -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            try:
                metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
                name = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
                client.add_entry(name, PAYLOAD)
                client.close_ledger(name)
            except BaseException as exc:  # reported once the threads are done
                errors.append(exc)
                return

    started = time.monotonic()
    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return ledgers / (time.monotonic() - started)


def scrub_figures(client: QuireClient) -> dict[str, float]:
    leader = client.auditor()
    return {key: float(value) for key, value in leader.properties.items() if key.startswith("scrub_")}


def etcd_db_bytes(data_dir: Path) -> int:
    return sum(path.stat().st_size for path in data_dir.rglob("db") if path.parent.name == "snap")


def measure(ledgers: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="quire-scale-") as data_dir:
        scrub_env = {}
        if args.scrub_pass_interval:
            scrub_env["QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS"] = str(args.scrub_pass_interval)
        cluster = LocalCluster(Path(data_dir), Ports.free(bookies=3), extra_env=scrub_env)
        cluster.start()
        try:
            pids = {name: pid for name in cluster.processes if (pid := cluster.pid(name)) is not None}
            empty_rss = {name: round(rss_mib(pid), 1) for name, pid in pids.items()}
            with QuireClient(cluster.gateway_target, registry=cluster.registry_target) as client:
                creates_per_second = fill(client, ledgers, args.writers) if ledgers else 0.0
                time.sleep(args.settle_seconds)
                before_cpu = {name: process_cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
                before_scrub = scrub_figures(client)
                started = time.monotonic()
                time.sleep(args.idle_seconds)
                elapsed = time.monotonic() - started
                after_cpu = {name: process_cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
                after_scrub = scrub_figures(client)
            cpu_percent = {name: round(100 * (after_cpu[name] - before_cpu[name]) / elapsed, 2) for name in pids}
            checked = sum(
                after_scrub.get(key, 0.0) - before_scrub.get(key, 0.0)
                for key in ("scrub_entries_checked", "scrub_entries_sampled")
            )
            scrub_cpu = sum(after_cpu[n] - before_cpu[n] for n in pids if n == "gateway" or n.startswith("bookie"))
            db_bytes = etcd_db_bytes(Path(data_dir))
            return {
                "ledgers": ledgers,
                "creates_per_second": round(creates_per_second, 1),
                "idle_seconds": round(elapsed, 1),
                "idle_cpu_percent_of_one_core": cpu_percent,
                "idle_cpu_percent_all": round(sum(cpu_percent.values()), 2),
                "rss_mib_empty": empty_rss,
                "rss_mib_idle": {name: round(rss_mib(pid), 1) for name, pid in pids.items()},
                "etcd_db_bytes": db_bytes,
                "etcd_db_bytes_per_ledger": round(db_bytes / ledgers, 1) if ledgers else None,
                "scrub_copies_checked_in_window": int(checked),
                "scrub_copies_per_cpu_second": round(checked / scrub_cpu) if scrub_cpu else None,
                "scrub_passes_in_window": int(after_scrub.get("scrub_passes", 0) - before_scrub.get("scrub_passes", 0)),
                "scrub_last_pass_seconds": after_scrub.get("scrub_last_pass_seconds"),
            }
        finally:
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", default="0,2000,10000", help="ledger counts, comma-separated")
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--settle-seconds", type=float, default=5.0, help="after filling, before measuring")
    parser.add_argument(
        "--scrub-pass-interval",
        type=float,
        default=None,
        help="QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS (default: the cluster's); short periods show the scrub's cost",
    )
    parser.add_argument("--json", dest="json_file", default=None)
    args = parser.parse_args(argv)
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
