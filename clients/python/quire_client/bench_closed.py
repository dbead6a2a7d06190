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
with the write path's floor, and how each process's share splits over its
threads: the event loop (`main`), gRPC's poller, a bookie's writer thread,
RocksDB's flush and compaction threads, by the names the services give them
(quire_common.thread_names). Every run also reports this process's own CPU
per write (the client's), and with the servers' the cores they kept busy
together: on a machine that runs them all, a closed loop keeps about the
same cores busy whatever serves it, so writes/s follow the CPU of one write,
the client's included (docs/decisions.md, "Writes per second on two cores").
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc

from quire_client.smoke import percentile
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc

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
    # The same by thread of each process: its name there, the event loop's thread as "main".
    server_cpu_us_per_write_by_thread: dict[str, dict[str, float]] = field(default_factory=dict)
    # This process's own CPU per write over the write phase (the client's, every thread of it).
    client_cpu_us_per_write: float = 0.0

    @property
    def cores_busy(self) -> float | None:
        """The cores the servers and this client kept busy together over the write
        phase; None when the servers' CPU was not counted (a cluster elsewhere)."""
        if not self.server_cpu_us_per_write:
            return None
        cpu_per_write = sum(self.server_cpu_us_per_write.values()) + self.client_cpu_us_per_write
        return cpu_per_write * self.writes_per_s / 1e6


def _stat_cpu_seconds(path: str) -> tuple[str, float] | None:
    """A /proc stat file's command name and user + system CPU time; None
    when it cannot be read (gone, or not Linux)."""
    try:
        with open(path, "rb") as stat:
            text = stat.read()
        name, fields = text[text.index(b"(") + 1 : text.rindex(b")")], text[text.rindex(b")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, ValueError, IndexError):
        return None
    return name.decode(errors="replace"), ticks / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and all its threads (Linux /proc);
    None when it cannot be read (gone, or not Linux)."""
    found = _stat_cpu_seconds(f"/proc/{pid}/stat")
    return found[1] if found is not None else None


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """User + system CPU time of a process's threads, added up by thread name
    (the main thread as "main"); empty when the process cannot be read."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    by_name: dict[str, float] = {}
    for thread in threads:
        found = _stat_cpu_seconds(f"/proc/{pid}/task/{thread}/stat")
        if found is not None:  # None: the thread ended meanwhile
            name = "main" if thread == str(pid) else found[0]
            by_name[name] = by_name.get(name, 0.0) + found[1]
    return by_name


def _cpu_now(server_pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu for name, pid in server_pids.items() if (cpu := process_cpu_seconds(pid)) is not None}


def _per_write(before: dict[str, float], after: dict[str, float], writes: int) -> dict[str, float]:
    """Microseconds per write of what was counted in both `before` and `after`."""
    return {name: round(1e6 * (after[name] - before[name]) / writes, 1) for name in before if name in after and writes}


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
        ledgers = [await _create_ledger(stub, quorum) for _ in range(writers)]
        cpu_before = _cpu_now(server_pids)
        threads_before = {name: thread_cpu_seconds(pid) for name, pid in server_pids.items()}
        client_before = time.process_time()
        writes = await _together([_write_loop(stub, rpc, ledger, payload) for ledger in ledgers], seconds)
        client_seconds = time.process_time() - client_before
        cpu_after = _cpu_now(server_pids)
        threads_after = {name: thread_cpu_seconds(pid) for name, pid in server_pids.items()}
        written = zip(ledgers, writes.ids, strict=True)
        reads = await _together([_read_loop(stub, ledger, ids, entry_bytes) for ledger, ids in written], seconds)
        for ledger in ledgers:
            await stub.DeleteLedger(ledger_pb2.DeleteLedgerRequest(ledger_id=ledger))
    count = len(writes.latencies_ms)
    return ClosedLoopResult(
        quorum=f"E{quorum[0]}W{quorum[1]}A{quorum[2]}",
        rpc=rpc,
        writers=writers,
        entry_bytes=entry_bytes,
        seconds=round(writes.seconds, 3),
        writes=count,
        writes_per_s=count / writes.seconds,
        mb_per_s=count * entry_bytes / writes.seconds / 1e6,
        write_p50_ms=percentile(writes.latencies_ms, 0.50),
        write_p99_ms=percentile(writes.latencies_ms, 0.99),
        reads=len(reads.latencies_ms),
        reads_per_s=len(reads.latencies_ms) / reads.seconds if reads.seconds else 0.0,
        read_p50_ms=percentile(reads.latencies_ms, 0.50),
        read_p99_ms=percentile(reads.latencies_ms, 0.99),
        server_cpu_us_per_write=_per_write(cpu_before, cpu_after, count),
        server_cpu_us_per_write_by_thread={
            name: _per_write(threads_before[name], threads_after[name], count)
            for name in server_pids
            if threads_before[name] and threads_after[name] and count
        },
        client_cpu_us_per_write=round(1e6 * client_seconds / count, 1) if count else 0.0,
    )


async def _create_ledger(stub: ledger_pb2_grpc.LedgerServiceStub, quorum: tuple[int, int, int]) -> common_pb2.LedgerId:
    created = await stub.CreateLedger(
        ledger_pb2.CreateLedgerRequest(ensemble_size=quorum[0], write_quorum_size=quorum[1], ack_quorum_size=quorum[2])
    )
    return created.metadata.ledger_id


@dataclass
class _Phase:
    """One phase of the run, all loops together."""

    seconds: float
    latencies_ms: list[float]  # every request's, of every loop
    ids: list[list[int]]  # per loop, the entry ids its requests wrote or read


# One loop of a phase: given its deadline (time.perf_counter()), appends each
# request's latency and entry id to the lists it is given, until then.
Loop = Callable[[float, list[float], list[int]], Awaitable[None]]


async def _together(loops: list[Loop], seconds: float) -> _Phase:
    """The loops run together, each until `seconds` from the phase's start."""
    latencies_ms: list[float] = []
    ids: list[list[int]] = [[] for _ in loops]
    started = time.perf_counter()
    await asyncio.gather(*(loop(started + seconds, latencies_ms, ids[i]) for i, loop in enumerate(loops)))
    return _Phase(time.perf_counter() - started, latencies_ms, ids)


def _write_loop(stub: ledger_pb2_grpc.LedgerServiceStub, rpc: str, ledger: common_pb2.LedgerId, payload: bytes) -> Loop:
    """One writer: one entry per request, each awaited, over AddEntry
    ("unary") or an AppendEntries stream ("stream")."""

    async def unary(until: float, latencies_ms: list[float], written: list[int]) -> None:
        while time.perf_counter() < until:
            started = time.perf_counter()
            added = await stub.AddEntry(ledger_pb2.AddEntryRequest(ledger_id=ledger, payload=payload))
            latencies_ms.append(1000 * (time.perf_counter() - started))
            written.append(added.entry_id)

    async def stream(until: float, latencies_ms: list[float], written: list[int]) -> None:
        call = stub.AppendEntries()
        try:
            while time.perf_counter() < until:
                started = time.perf_counter()
                await call.write(ledger_pb2.AppendEntriesRequest(ledger_id=ledger, payloads=[payload]))
                ack = await call.read()
                if ack is grpc.aio.EOF:
                    raise RuntimeError(f"ledger {ledger}: the write session ended early")
                latencies_ms.append(1000 * (time.perf_counter() - started))
                written.append(ack.last_entry_id)
            await call.done_writing()
        finally:
            call.cancel()

    return unary if rpc == "unary" else stream


def _read_loop(
    stub: ledger_pb2_grpc.LedgerServiceStub, ledger: common_pb2.LedgerId, entry_ids: list[int], entry_bytes: int
) -> Loop:
    """One reader: the entries its writer wrote, one ReadEntries per entry, in order."""

    async def run(until: float, latencies_ms: list[float], read: list[int]) -> None:
        for entry_id in entry_ids:
            if time.perf_counter() >= until:
                break
            began = time.perf_counter()
            request = ledger_pb2.ReadEntriesRequest(ledger_id=ledger, first_entry_id=entry_id, last_entry_id=entry_id)
            got = [entry async for response in stub.ReadEntries(request) for entry in response.entries]
            if len(got) != 1 or len(got[0].payload) != entry_bytes:
                raise RuntimeError(f"ledger {ledger} entry {entry_id}: read back wrong")
            latencies_ms.append(1000 * (time.perf_counter() - began))
            read.append(entry_id)

    return run


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
        print(
            f"    server CPU per write: {total:,.0f} us ({by_process}); "
            f"client {result.client_cpu_us_per_write:,.0f} us; {result.cores_busy or 0:.2f} cores busy",
            flush=True,
        )
    else:
        print(f"    client CPU per write: {result.client_cpu_us_per_write:,.0f} us", flush=True)
    for process, threads in result.server_cpu_us_per_write_by_thread.items():
        busiest = sorted(((us, thread) for thread, us in threads.items() if us >= 1), reverse=True)
        if busiest:
            print(f"      {process}: " + ", ".join(f"{thread} {us:,.0f}" for us, thread in busiest), flush=True)
