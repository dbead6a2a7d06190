"""`quire bench`: append and read throughput against a running cluster, or a
throwaway local one (`--local`); `quire bench bookie` measures one bookie
(quire_client.bench_bookie). Numbers are printed, never asserted."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from quire_client import bench_bookie
from quire_client.client import QuireClient
from quire_client.cluster import LocalCluster, Ports
from quire_common.ids import LedgerId


def run_benchmark(
    client: QuireClient, entries: int, size: int, batch: int, ensemble: tuple[int, int, int]
) -> dict[str, float]:
    payload = os.urandom(size)
    metadata = client.create_ledger(
        ensemble_size=ensemble[0], write_quorum_size=ensemble[1], ack_quorum_size=ensemble[2]
    )
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    started = time.perf_counter()
    last = client.append_all(ledger, (payload for _ in range(entries)), batch_size=batch)
    append_seconds = time.perf_counter() - started
    assert last == entries - 1, f"expected {entries} acknowledged entries, got {last + 1}"
    started = time.perf_counter()
    count = sum(1 for _ in client.read(ledger))
    read_seconds = time.perf_counter() - started
    assert count == entries
    started = time.perf_counter()
    single = min(entries, 500)
    for _ in range(single):
        client.add_entry(ledger, payload)
    add_seconds = time.perf_counter() - started
    client.delete_ledger(ledger)
    return {
        "append_entries_per_s": entries / append_seconds,
        "append_mib_per_s": entries * size / append_seconds / 2**20,
        "read_entries_per_s": entries / read_seconds,
        "read_mib_per_s": entries * size / read_seconds / 2**20,
        "unary_add_per_s": single / add_seconds,
        "unary_add_ms": 1000 * add_seconds / single,
    }


def main(args: argparse.Namespace) -> None:
    ensemble = (args.ensemble, args.write_quorum, args.ack_quorum)

    def report(client: QuireClient) -> None:
        results = run_benchmark(client, args.entries, args.size, args.batch, ensemble)
        print(f"entries={args.entries} size={args.size}B batch={args.batch} E/W/A={'/'.join(map(str, ensemble))}")
        for name, value in results.items():
            print(f"  {name:<22} {value:>12,.1f}")

    if args.local:
        with tempfile.TemporaryDirectory(prefix="quire-bench-") as data_dir:
            cluster = LocalCluster(Path(data_dir), Ports.free(bookies=max(3, args.ensemble)))
            cluster.start()
            try:
                with QuireClient(cluster.gateway_target, cluster.registry_target) as client:
                    report(client)
            finally:
                cluster.stop()
    else:
        with QuireClient(args.gateway, args.registry) as client:
            report(client)


def add_parser(areas: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    bench = areas.add_parser("bench", help="measure append and read throughput")
    bench.add_argument("--local", action="store_true", help="start a throwaway local cluster for the run")
    bench.add_argument("--entries", type=int, default=20_000)
    bench.add_argument("--size", type=int, default=1024, help="payload bytes per entry")
    bench.add_argument("--batch", type=int, default=100, help="entries per stream message")
    bench.add_argument("--ensemble", "-e", type=int, default=3)
    bench.add_argument("--write-quorum", "-w", type=int, default=2)
    bench.add_argument("--ack-quorum", "-a", type=int, default=2)
    bench.set_defaults(func=main)
    bench_bookie.add_parser(bench.add_subparsers(dest="target", metavar="{bookie}"))
