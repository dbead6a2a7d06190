"""`quire bench`: write through the gateway, read everything back, and print
(and optionally write as JSON) entries/s, MB/s and add latency percentiles.

The default matrix: E=3 W=3 A=2 and E=3 W=2 A=2, 1 and 16 concurrent writers
(each its own ledger and AppendEntries stream), 1 KiB and 64 KiB entries,
durable acks (an entry is acknowledged once A bookies have fsync'd it). Then
one single-writer run at a moderate, paced rate, one entry per message, for
latency. Then the workload clients that do not batch run: one entry per
request, each awaited, for the same writers and sizes, over AppendEntries and
over AddEntry, each followed by single-entry reads by id
(quire_client.bench_closed). Against a running cluster, or a throwaway local
one (`--local`).
`quire bench bookie` measures one bookie alone (quire_client.bench_bookie).
Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client.bench_closed import print_closed_loop, run_closed_loop
from quire_client.client import QuireClient
from quire_client.cluster import LocalCluster, Ports
from quire_client.smoke import percentile
from quire_proto.gateway.v1 import ledger_pb2


@dataclass
class RunResult:
    quorum: str
    writers: int
    entry_bytes: int
    entries: int
    batch: int
    paced_entries_per_s: float
    entries_per_s: float
    mb_per_s: float
    add_p50_ms: float
    add_p99_ms: float
    add_p999_ms: float
    read_entries_per_s: float
    read_mb_per_s: float


def _write(
    client: QuireClient,
    ledger: LedgerId,
    count: int,
    payload: bytes,
    batch: int,
    window: int,
    rate_per_s: float,
    latencies: list[float],
) -> None:
    """Stream `count` entries; record each one's add latency (sent → acknowledged)."""
    sent_at = [0.0] * count
    room = threading.Semaphore(window)  # bounded in-flight entries per writer

    def requests() -> Iterator[ledger_pb2.AppendEntriesRequest]:
        yield ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(ledger))
        started = time.perf_counter()
        index = 0
        while index < count:
            size = min(batch, count - index)
            if rate_per_s:
                time.sleep(max(0.0, started + index / rate_per_s - time.perf_counter()))
            for _ in range(size):
                room.acquire()
            now = time.perf_counter()
            for entry in range(index, index + size):
                sent_at[entry] = now
            yield ledger_pb2.AppendEntriesRequest(payloads=[payload] * size)
            index += size

    mine: list[float] = []
    acked = -1
    for ack in client.ledgers.AppendEntries(requests(), timeout=3600):
        now = time.perf_counter()
        for entry in range(ack.first_entry_id, ack.last_entry_id + 1):
            mine.append(now - sent_at[entry])
            room.release()
        acked = ack.last_entry_id
    if acked != count - 1:
        raise RuntimeError(f"ledger {ledger}: {acked + 1} of {count} entries acknowledged")
    latencies.extend(mine)


def run_one(
    target: tuple[str, str],
    quorum: tuple[int, int, int],
    writers: int,
    entry_bytes: int,
    entries: int,
    batch: int,
    rate_per_s: float = 0.0,
) -> RunResult:
    payload = os.urandom(entry_bytes)
    per_writer = max(1, entries // writers)
    window = max(batch * 4, 64)  # in-flight entries per writer: enough to keep the pipeline busy, no more
    clients = [QuireClient(target[0]) for _ in range(writers)]  # (gateway, registry): the gateway is all it needs
    try:
        ledgers = []
        for client in clients:
            metadata = client.create_ledger(
                ensemble_size=quorum[0], write_quorum_size=quorum[1], ack_quorum_size=quorum[2]
            )
            ledgers.append(LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id))
        latencies: list[float] = []

        def writer(index: int) -> None:
            _write(clients[index], ledgers[index], per_writer, payload, batch, window, rate_per_s, latencies)

        write_seconds = _in_threads(writer, writers)
        started = time.perf_counter()
        read = sum(_read_back(client, ledger, entry_bytes) for client, ledger in zip(clients, ledgers, strict=True))
        read_seconds = time.perf_counter() - started
        if read != per_writer * writers:
            raise RuntimeError(f"read back {read} of {per_writer * writers} entries")
        for client, ledger in zip(clients, ledgers, strict=True):
            client.delete_ledger(ledger)
    finally:
        for client in clients:
            client.close()
    total = per_writer * writers
    ms = [1000 * s for s in latencies]
    return RunResult(
        quorum=f"E{quorum[0]}W{quorum[1]}A{quorum[2]}",
        writers=writers,
        entry_bytes=entry_bytes,
        entries=total,
        batch=batch,
        paced_entries_per_s=rate_per_s,
        entries_per_s=total / write_seconds,
        mb_per_s=total * entry_bytes / write_seconds / 1e6,
        add_p50_ms=percentile(ms, 0.50),
        add_p99_ms=percentile(ms, 0.99),
        add_p999_ms=percentile(ms, 0.999),
        read_entries_per_s=total / read_seconds,
        read_mb_per_s=total * entry_bytes / read_seconds / 1e6,
    )


def _in_threads(work: Callable[[int], None], count: int) -> float:
    """`work(0)` .. `work(count - 1)`, each in a thread of its own, all at
    once; the seconds until the last ended. Raises the first failure."""
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if errors:
        raise errors[0]
    return seconds


def _read_back(client: QuireClient, ledger: LedgerId, entry_bytes: int) -> int:
    """Every entry of the ledger, read; how many (each checked for its size)."""
    read = 0
    for entry in client.read(ledger):
        if len(entry.payload) != entry_bytes:
            raise RuntimeError(f"ledger {ledger} entry {entry.entry_id}: wrong size")
        read += 1
    return read


def matrix(args: argparse.Namespace) -> Iterator[tuple[tuple[int, int, int], int, int, int, int, float]]:
    """(quorum, writers, entry bytes, entries, batch, pace) for each run."""
    quorums = _quorums(args)
    for quorum in quorums:
        for writers in args.writers:
            for size in args.sizes:
                entries = args.entries if size <= 4096 else max(writers, args.entries * 1024 // size * 4)
                batch = min(args.batch, max(1, 1024 * 1024 // size))  # at most ~1 MiB per message
                yield quorum, writers, size, entries, batch, 0.0
    for quorum in quorums:
        # Latency at moderate load: one writer, one entry per message, paced.
        yield quorum, 1, 1024, args.paced_entries, 1, args.paced_rate


def _print(result: RunResult) -> None:
    pace = f" paced {result.paced_entries_per_s:,.0f}/s" if result.paced_entries_per_s else ""
    print(
        f"{result.quorum} writers={result.writers:<2} size={result.entry_bytes:>6}B batch={result.batch:<3}{pace}: "
        f"{result.entries_per_s:>9,.0f} entries/s {result.mb_per_s:>7.1f} MB/s  "
        f"add p50 {result.add_p50_ms:6.2f} p99 {result.add_p99_ms:6.2f} p999 {result.add_p999_ms:6.2f} ms  "
        f"read {result.read_entries_per_s:>9,.0f} entries/s {result.read_mb_per_s:>7.1f} MB/s",
        flush=True,
    )


def _quorums(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    if args.quorum is None:
        return [(3, 3, 2), (3, 2, 2)]
    ensemble, write, ack = (int(x) for x in args.quorum.split(","))
    return [(ensemble, write, ack)]


def run_count(args: argparse.Namespace) -> int:
    """How many runs `main` makes (for a progress bar); ValueError on a bad --quorum."""
    batched = sum(1 for _ in matrix(args)) if args.batch > 0 else 0
    closed = len(_quorums(args)) * len(args.closed_rpc) * len(args.writers) * len(args.sizes)
    return batched + (closed if args.closed_seconds > 0 else 0)


def main(args: argparse.Namespace, on_run: Callable[[], None] = lambda: None) -> None:
    if args.local:
        with tempfile.TemporaryDirectory(prefix="quire-bench-") as data_dir:
            cluster = LocalCluster(Path(data_dir), Ports.free(bookies=3))
            cluster.start()
            try:
                pids = {name: pid for name in cluster.processes if (pid := cluster.pid(name)) is not None}
                _report(args, (cluster.gateway_target, cluster.registry_target), on_run, pids)
            finally:
                cluster.stop()
    else:
        _report(args, (args.gateway, args.registry), on_run)


def _report(
    args: argparse.Namespace,
    target: tuple[str, str],
    on_run: Callable[[], None],
    server_pids: dict[str, int] | None = None,
) -> None:
    """Every run the arguments ask for, printed as it ends (`on_run` after
    each), then written to `args.json` if given."""
    results = []
    if args.batch > 0:
        for quorum, writers, size, entries, batch, pace in matrix(args):
            result = run_one(target, quorum, writers, size, entries, batch, pace)
            _print(result)
            results.append(result)
            on_run()
    closed = []
    if args.closed_seconds > 0:
        for quorum, rpc, writers, size in itertools.product(_quorums(args), args.closed_rpc, args.writers, args.sizes):
            one = run_closed_loop(target[0], quorum, rpc, writers, size, args.closed_seconds, server_pids)
            print_closed_loop(one)
            closed.append(one)
            on_run()
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        document = {
            "batched": [asdict(r) for r in results],
            "one_entry_per_request": [
                {**asdict(r), "cores_busy": None if r.cores_busy is None else round(r.cores_busy, 3)} for r in closed
            ],
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}")
