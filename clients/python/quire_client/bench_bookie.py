"""`quire bench bookie` (and `make bench-bookie`): durable adds through one
bookie's gRPC API against the raw rocksdict limit on the same machine.

One standalone bookie process (QUIRE_BOOKIE_STANDALONE=true: no etcd or
registry needed) in a throwaway directory. For each entry size and writer
count, every writer adds one entry per AddEntries call to its own ledger
and waits for the acknowledgement (a synced write) before the next. The raw
limit is the same entries written straight to rocksdict in this process as
synced WriteBatches of one entry per writer each: what a perfect group
commit at that concurrency could reach. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client.cluster import StandaloneBookie
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc

KEY = master_key(b"bench")


@dataclass(frozen=True)
class Result:
    size: int
    writers: int
    entries: int
    seconds: float
    batch: int  # entries per AddEntries message (per writer per synced batch for raw)

    @property
    def adds_per_second(self) -> float:
        return self.entries / self.seconds

    @property
    def mib_per_second(self) -> float:
        return self.entries * self.size / self.seconds / 2**20


def packed_entries(ledger: LedgerId, count: int, size: int) -> list[bytes]:
    digester = Digester(DigestType.CRC32C)
    payload = os.urandom(size)
    return [pack_entry(ledger, entry_id, entry_id - 1, 0, payload, digester) for entry_id in range(count)]


def add_requests(ledger: LedgerId, per_writer: int, size: int, batch: int) -> list[bookie_pb2.AddEntriesRequest]:
    entries = [
        bookie_pb2.PackedEntry(entry_id=entry_id, data=data)
        for entry_id, data in enumerate(packed_entries(ledger, per_writer, size))
    ]
    return [
        bookie_pb2.AddEntriesRequest(
            ledger_id=ledger_id_to_proto(ledger), master_key=KEY, entries=entries[start : start + batch]
        )
        for start in range(0, per_writer, batch)
    ]


async def bench_grpc(target: str, ledger_base: int, size: int, writers: int, per_writer: int, batch: int) -> Result:
    ledgers = [LedgerId(ledger_base, n + 1) for n in range(writers)]
    # Requests are built before the clock starts: the client shares the CPU with the bookie.
    requests = [add_requests(ledger, per_writer, size, batch) for ledger in ledgers]
    async with grpc.aio.insecure_channel(
        target, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    ) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        await stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest(), timeout=30)  # connected

        async def writer(mine: list[bookie_pb2.AddEntriesRequest]) -> None:
            for request in mine:
                await stub.AddEntries(request, timeout=60)

        started = time.perf_counter()
        await asyncio.gather(*(writer(mine) for mine in requests))
        seconds = time.perf_counter() - started
    return Result(size, writers, writers * per_writer, seconds, batch)


def bench_raw(path: Path, size: int, writers: int, per_writer: int, batch: int) -> Result:
    """Synced WriteBatches of one message's entries from every writer
    (writers x batch entries), straight to rocksdict."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(path), options=options)
    sync = WriteOptions()
    sync.sync = True
    ledgers = [LedgerId(1, n + 1) for n in range(writers)]
    entries = [packed_entries(ledger, per_writer, size) for ledger in ledgers]
    started = time.perf_counter()
    for start in range(0, per_writer, batch):
        write = WriteBatch(raw_mode=True)
        for ledger, mine in zip(ledgers, entries, strict=True):
            for entry_id in range(start, min(start + batch, per_writer)):
                write.put(ledger.key + entry_id.to_bytes(8, "big"), mine[entry_id])
        db.write(write, sync)
    seconds = time.perf_counter() - started
    db.close()
    del db
    return Result(size, writers, writers * per_writer, seconds, batch)


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="quire-bench-bookie-") as scratch, contextlib.ExitStack() as stack:
        scratch_dir = Path(scratch)
        if args.target:
            target = args.target  # a bookie started elsewhere, e.g. under a profiler
        else:
            env = {
                "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS": str(args.max_delay_ms / 1000),
                "QUIRE_BOOKIE_HTTP_PORT": "0",
            }
            bookie = stack.enter_context(StandaloneBookie(scratch_dir / "bookie", env=env))
            target = bookie.target
            print(f"bookie pid {bookie.popen.pid if bookie.popen else '?'} at {target}", flush=True)
        rows = [_run_case(args, target, scratch_dir, case) for case in _cases(args)]
    _print_table(rows)


@dataclass(frozen=True)
class _Case:
    number: int  # from 1: each case writes its own ledger scope and scratch directory
    size: int
    writers: int
    batch: int


def _cases(args: argparse.Namespace) -> list[_Case]:
    """Every entry size, by writer count, by entries per message the arguments name, in that order."""
    sizes = [int(s) for s in args.sizes.split(",")]
    writer_counts = [int(w) for w in args.writers.split(",")]
    batches = [int(b) for b in args.batch.split(",")]
    combinations = itertools.product(sizes, writer_counts, batches)
    return [_Case(number, *combination) for number, combination in enumerate(combinations, start=1)]


def _run_case(args: argparse.Namespace, target: str, scratch_dir: Path, case: _Case) -> tuple[Result, Result]:
    """One case through the bookie and raw against RocksDB: (served, raw), printed."""
    size, writers, batch = case.size, case.writers, case.batch
    scale = 1 if size <= 4096 else 8  # fewer large entries: same order of bytes per case
    # Batched cases run faster, so they get more entries.
    total = max(args.entries * (4 if batch > 1 else 1) // scale, 64)
    per_writer = max(total // writers, batch)
    raw = bench_raw(scratch_dir / f"raw-{case.number}", size, writers, per_writer, batch)
    served = asyncio.run(bench_grpc(target, args.ledger_scope + case.number, size, writers, per_writer, batch))
    print(
        f"  {size:>6} B x {writers:>2} writers x {batch:>3}/msg: bookie "
        f"{served.adds_per_second:>9,.0f} adds/s {served.mib_per_second:>7.1f} MiB/s | raw "
        f"{raw.adds_per_second:>9,.0f} adds/s {raw.mib_per_second:>7.1f} MiB/s | "
        f"{served.adds_per_second / raw.adds_per_second:6.1%}",
        flush=True,
    )
    return served, raw


def _print_table(rows: list[tuple[Result, Result]]) -> None:
    print()
    print(
        "| entry | writers | entries/message | bookie adds/s | bookie MiB/s "
        "| raw synced batches adds/s | raw MiB/s | bookie/raw |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for served, raw in rows:
        print(
            f"| {served.size} B | {served.writers} | {served.batch} | {served.adds_per_second:,.0f} "
            f"| {served.mib_per_second:.1f} | {raw.adds_per_second:,.0f} | {raw.mib_per_second:.1f} "
            f"| {served.adds_per_second / raw.adds_per_second:.0%} |"
        )
