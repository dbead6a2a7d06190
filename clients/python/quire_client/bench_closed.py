"""The workload every client runs: one entry per request, each awaited.

`quire bench` runs this beside its batched matrix. Each of N writers has its
own ledger and appends one entry per request, waiting for the durable ack
before the next (a closed loop): over an AppendEntries stream (one entry per
message) or with unary AddEntry calls. Then the same N loops read the entries
just written back, one ReadEntries(first = last = id) per request. Reported:
requests/s and each request's latency (p50, p99). This is what a service in
any language that writes one record at a time sees; the batched runs show
what batching buys on top.

Given the servers' PIDs (a local cluster, `quire bench --local`), each run also
reports the CPU every server process spent per write (user + system time from
/proc over the write phase), the figure to compare with other systems and
with the write path's floor.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

import grpc

from quire.common.v1 import common_pb2
from quire.gateway.v1 import ledger_pb2, ledger_pb2_grpc
from quire_client.smoke import percentile

_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


@dataclass
class ClosedLoopResult:
    quorum: str
    rpc: str  # "stream" (AppendEntries, one entry per message) or "unary" (AddEntry)
    writers: int
    entry_bytes: int
    seconds: float
    writes: int
    writes_per_s: float
    mb_per_s: float
    write_p50_ms: float
    write_p99_ms: float
    reads: int
    reads_per_s: float
    read_p50_ms: float
    read_p99_ms: float
    # Microseconds of CPU per write over the write phase, by server process (empty: PIDs unknown).
    server_cpu_us_per_write: dict[str, float] = field(default_factory=dict)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and all its threads (Linux /proc);
    None when it cannot be read (gone, or not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _cpu_now(server_pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu for name, pid in server_pids.items() if (cpu := process_cpu_seconds(pid)) is not None}


async def _closed_loop(
    gateway: str,
    quorum: tuple[int, int, int],
    rpc: str,
    writers: int,
    entry_bytes: int,
    seconds: float,
    server_pids: dict[str, int],
) -> ClosedLoopResult:
    payload = os.urandom(entry_bytes)
    async with grpc.aio.insecure_channel(gateway, options=_OPTIONS) as channel:
        stub = ledger_pb2_grpc.LedgerServiceStub(channel)
        ledgers: list[common_pb2.LedgerId] = []
        for _ in range(writers):
            created = await stub.CreateLedger(
                ledger_pb2.CreateLedgerRequest(
                    ensemble_size=quorum[0], write_quorum_size=quorum[1], ack_quorum_size=quorum[2]
                )
            )
            ledgers.append(created.metadata.ledger_id)
        written: list[list[int]] = [[] for _ in range(writers)]
        write_ms: list[float] = []

        async def writer(index: int, until: float) -> None:
            ledger = ledgers[index]
            if rpc == "unary":
                while time.perf_counter() < until:
                    started = time.perf_counter()
                    added = await stub.AddEntry(ledger_pb2.AddEntryRequest(ledger_id=ledger, payload=payload))
                    write_ms.append(1000 * (time.perf_counter() - started))
                    written[index].append(added.entry_id)
                return
            call = stub.AppendEntries()
            try:
                while time.perf_counter() < until:
                    started = time.perf_counter()
                    await call.write(ledger_pb2.AppendEntriesRequest(ledger_id=ledger, payloads=[payload]))
                    ack = await call.read()
                    if ack is grpc.aio.EOF:
                        raise RuntimeError(f"ledger {ledger}: the write session ended early")
                    write_ms.append(1000 * (time.perf_counter() - started))
                    written[index].append(ack.last_entry_id)
                await call.done_writing()
            finally:
                call.cancel()

        cpu_before = _cpu_now(server_pids)
        started = time.perf_counter()
        await asyncio.gather(*(writer(i, started + seconds) for i in range(writers)))
        write_seconds = time.perf_counter() - started
        cpu_after = _cpu_now(server_pids)

        read_ms: list[float] = []

        async def reader(index: int, until: float) -> int:
            count = 0
            for entry_id in written[index]:
                if time.perf_counter() >= until:
                    break
                began = time.perf_counter()
                request = ledger_pb2.ReadEntriesRequest(
                    ledger_id=ledgers[index], first_entry_id=entry_id, last_entry_id=entry_id
                )
                got = [entry async for response in stub.ReadEntries(request) for entry in response.entries]
                if len(got) != 1 or len(got[0].payload) != entry_bytes:
                    raise RuntimeError(f"ledger {ledgers[index]} entry {entry_id}: read back wrong")
                read_ms.append(1000 * (time.perf_counter() - began))
                count += 1
            return count

        started = time.perf_counter()
        reads = sum(await asyncio.gather(*(reader(i, started + seconds) for i in range(writers))))
        read_seconds = time.perf_counter() - started
        for ledger in ledgers:
            await stub.DeleteLedger(ledger_pb2.DeleteLedgerRequest(ledger_id=ledger))
    writes = len(write_ms)
    return ClosedLoopResult(
        quorum=f"E{quorum[0]}W{quorum[1]}A{quorum[2]}",
        rpc=rpc,
        writers=writers,
        entry_bytes=entry_bytes,
        seconds=round(write_seconds, 3),
        writes=writes,
        writes_per_s=writes / write_seconds,
        mb_per_s=writes * entry_bytes / write_seconds / 1e6,
        write_p50_ms=percentile(write_ms, 0.50),
        write_p99_ms=percentile(write_ms, 0.99),
        reads=reads,
        reads_per_s=reads / read_seconds if read_seconds else 0.0,
        read_p50_ms=percentile(read_ms, 0.50),
        read_p99_ms=percentile(read_ms, 0.99),
        server_cpu_us_per_write={
            name: round(1e6 * (cpu_after[name] - cpu_before[name]) / writes, 1)
            for name in cpu_before
            if name in cpu_after and writes
        },
    )


def run_closed_loop(
    gateway: str,
    quorum: tuple[int, int, int],
    rpc: str,
    writers: int,
    entry_bytes: int,
    seconds: float,
    server_pids: dict[str, int] | None = None,
) -> ClosedLoopResult:
    """One closed-loop run; with `server_pids` (name -> PID of each server
    process), also their CPU per write."""
    return asyncio.run(_closed_loop(gateway, quorum, rpc, writers, entry_bytes, seconds, server_pids or {}))


def print_closed_loop(result: ClosedLoopResult) -> None:
    print(
        f"{result.quorum} writers={result.writers:<2} size={result.entry_bytes:>6}B 1/request {result.rpc:<6}: "
        f"{result.writes_per_s:>9,.0f} writes/s {result.mb_per_s:>7.1f} MB/s  "
        f"write p50 {result.write_p50_ms:6.2f} p99 {result.write_p99_ms:6.2f} ms  "
        f"read {result.reads_per_s:>9,.0f} entries/s p50 {result.read_p50_ms:6.2f} p99 {result.read_p99_ms:6.2f} ms",
        flush=True,
    )
    if result.server_cpu_us_per_write:
        by_process = ", ".join(f"{name} {us:,.0f}" for name, us in result.server_cpu_us_per_write.items())
        total = sum(result.server_cpu_us_per_write.values())
        print(f"    server CPU per write: {total:,.0f} us ({by_process})", flush=True)
