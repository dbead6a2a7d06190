"""The floor of a unary add: Quire's write path as a lean prototype, driven one
entry per unary call and one entry per stream message in the same minutes, to
measure what ratio between the two the design itself allows.

    python scripts/floor_unary.py [--writers 16] [--seconds 8] [--rounds 2] [--rpc stream,unary]

Four processes as Quire has them, each a grpc.aio server on uvloop with gRPC
core's EventEngine client and listener off (as Quire's services run), raw bytes
on every hop:

- three bookies, each taking one long-lived stream from the gateway: the event
  loop only receives a message and queues it; one writer thread puts everything
  queued into one RocksDB WriteBatch, writes it synced, and hands the count back;
  the stream answers each group commit with one message, the running count of
  entries it has stored;
- a gateway serving `Add` (one unary call per entry) and `Append` (a bidi stream,
  one entry per message, one answer per entry). Each entry goes to all three
  bookies; a bookie's stream has at most one message unanswered, and the entries
  queued meanwhile leave together after `--yields` turns of the event loop (20, as
  Quire's sender waits); an entry is acknowledged once two bookies stored it.

A closed-loop client in this process keeps `--writers` entries in flight, each
awaited, one ledger and one channel per writer. Each measurement starts fresh
processes, and afterwards every acknowledged entry is looked for in the three
RocksDBs (at least two must hold it). Printed per measurement: entries/s, p50 and
p99, entries per bookie message, and each process's CPU per entry (/proc), the
client's own included.

Not in it, and so what Quire pays above it: interceptors (error mapping,
authentication, call limits), the metrics and the per-call histogram sample,
entry checksums and headers, ledger metadata and its LAC rules, fencing, ownership,
the entry cache, deadlines, ensemble changes and the bookies' add checks.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# In every process here, before grpc is imported: gRPC core's EventEngine off, the setting
# quire_common/grpc_runtime.py gives Quire's services (spelled out: that module must load first).
os.environ.setdefault(
    "GRPC_EXPERIMENTS",
    "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints,-event_engine_callback_cq",
)

import grpc
import rocksdict
import uvloop

from quire_client.bench_closed import process_cpu_seconds, thread_cpu_seconds
from quire_client.cluster import free_port

SERVICE = "floor.Unary"
# One entry on the wire: ledger, entry id, payload length, then the payload.
HEADER = struct.Struct(">QQI")
KEY = struct.Struct(">QQ")
COUNT = struct.Struct(">Q")
ACK_QUORUM = 2
PAYLOAD = os.urandom(1024)


async def serve(
    port: int,
    methods: dict[str, grpc.RpcMethodHandler],
    service: str = SERVICE,
    prepare: Callable[[grpc.aio.Server], None] | None = None,
) -> None:
    """Serve `methods` of `service` on 127.0.0.1:`port` until SIGTERM;
    `prepare` gets the server before any handler is added."""
    server = grpc.aio.server()
    if prepare is not None:
        prepare(server)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, methods),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(0.5)


# -- bookie ---------------------------------------------------------------------------


class _StoredCount:
    """What one stream's answers report: entries stored so far, and who waits to send it."""

    def __init__(self) -> None:
        self.stored = 0
        self.wake: asyncio.Future[None] | None = None


def _bookie(port: int, data: Path) -> None:
    db = rocksdict.Rdict(str(data), rocksdict.Options(raw_mode=True))
    synced = rocksdict.WriteOptions()
    synced.sync = True
    inbox: queue.SimpleQueue[tuple[_StoredCount, bytes]] = queue.SimpleQueue()
    loop = uvloop.new_event_loop()

    def stored(counts: list[tuple[_StoredCount, int]]) -> None:
        for count, entries in counts:
            count.stored += entries
            if count.wake is not None and not count.wake.done():
                count.wake.set_result(None)
            count.wake = None

    def write_batches() -> None:
        while True:
            batch = [inbox.get()]
            while not inbox.empty():
                batch.append(inbox.get_nowait())
            writes = rocksdict.WriteBatch(raw_mode=True)
            counts = []
            for count, message in batch:
                offset, entries = 0, 0
                while offset < len(message):
                    ledger, entry, length = HEADER.unpack_from(message, offset)
                    offset += HEADER.size
                    writes.put(KEY.pack(ledger, entry), message[offset : offset + length])
                    offset += length
                    entries += 1
                counts.append((count, entries))
            db.write(writes, synced)
            loop.call_soon_threadsafe(stored, counts)

    threading.Thread(target=write_batches, name="writer", daemon=True).start()

    async def answer(count: _StoredCount, context: grpc.aio.ServicerContext) -> None:
        answered = 0
        while True:
            if count.stored == answered:
                count.wake = loop.create_future()
                await count.wake
            answered = count.stored
            await context.write(COUNT.pack(answered))

    async def add(requests: object, context: grpc.aio.ServicerContext) -> None:
        count = _StoredCount()
        answering = loop.create_task(answer(count, context))
        try:
            while (message := await context.read()) is not grpc.aio.EOF:
                inbox.put((count, message))
        finally:
            answering.cancel()

    try:
        loop.run_until_complete(serve(port, {"Add": grpc.stream_stream_rpc_method_handler(add)}))
    finally:
        db.close()


# -- gateway --------------------------------------------------------------------------


class Replicated:
    """An entry on its way to its quorum: the copies stored so far."""

    __slots__ = ("copies", "done")

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.copies = 0
        self.done = done


class BookieLink:
    """One stream to one bookie: at most one message unanswered; what is queued
    meanwhile leaves together once the answer comes and the loop turned `yields`
    times. Each bookie answer is the running count of entries it stored; a
    subclass may frame messages and read answers its own way (`_message`,
    `_answered_by`) and settle what an answer covers (`_settle`)."""

    def __init__(self, target: str, yields: int, method: str = f"/{SERVICE}/Add") -> None:
        self._target = target
        self._yields = yields
        self._method = method
        self._queued: list[tuple[Any, Any]] = []  # (what is sent, what its answer settles)
        self._unanswered: collections.deque[Any] = collections.deque()
        self._wake: asyncio.Future[None] | None = None
        self._answered = 0
        self._in_flight = 0  # entries of the message sent and not answered yet
        self.messages = 0
        self.entries = 0

    def start(self, call: Any = None) -> None:
        """Open the stream, or write on `call` (a stand-in bookie's, in one process)."""
        if call is None:
            channel = grpc.aio.insecure_channel(self._target, options=[("grpc.use_local_subchannel_pool", 1)])
            call = channel.stream_stream(self._method)()
        self._call = call
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._send()), loop.create_task(self._receive())]

    def queue(self, wire: Any, settles: Any) -> None:
        self._queued.append((wire, settles))
        self._wake_sender()

    def _wake_sender(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        self._wake = None

    async def _send(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queued or self._in_flight:
                self._wake = loop.create_future()
                await self._wake
                continue
            for _ in range(self._yields):
                await asyncio.sleep(0)
            taken, self._queued = self._queued, []
            self._in_flight = len(taken)
            self.messages += 1
            self.entries += len(taken)
            await self._call.write(self._message(taken))

    def _message(self, taken: list[tuple[Any, Any]]) -> bytes:
        self._unanswered.extend(settles for _, settles in taken)
        return b"".join(wire for wire, _ in taken)

    def _answered_by(self, answer: bytes) -> list[Any]:
        (stored,) = COUNT.unpack(answer)
        settled = [self._unanswered.popleft() for _ in range(stored - self._answered)]
        self._answered = stored
        return settled

    def _settle(self, entry: Any) -> None:
        entry.copies += 1
        if entry.copies == ACK_QUORUM:
            entry.done.set_result(None)

    async def _receive(self) -> None:
        while (answer := await self._call.read()) is not grpc.aio.EOF:
            for settles in self._answered_by(answer):
                self._settle(settles)
            self._in_flight = 0
            self._wake_sender()


def _gateway(port: int, bookies: list[str], yields: int) -> None:
    loop = uvloop.new_event_loop()
    links = [BookieLink(target, yields) for target in bookies]

    def replicate(request: bytes) -> asyncio.Future[None]:
        entry = Replicated(loop.create_future())
        for link in links:
            link.queue(request, entry)
        return entry.done

    async def add(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await replicate(request)
        return request[: KEY.size]

    async def append(requests: object, context: grpc.aio.ServicerContext) -> None:
        while (request := await context.read()) is not grpc.aio.EOF:
            await replicate(request)
            await context.write(request[: KEY.size])

    async def stats(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return struct.pack(">QQ", sum(link.messages for link in links), sum(link.entries for link in links))

    async def run() -> None:
        for link in links:
            link.start()
        await serve(
            port,
            {
                "AddUnary": grpc.unary_unary_rpc_method_handler(add),
                "Append": grpc.stream_stream_rpc_method_handler(append),
                "Stats": grpc.unary_unary_rpc_method_handler(stats),
            },
        )

    loop.run_until_complete(run())


# -- client and runner ----------------------------------------------------------------


def _wire(ledger: int, entry: int) -> bytes:
    return HEADER.pack(ledger, entry, len(PAYLOAD)) + PAYLOAD


Append = Callable[[int], Awaitable[None]]  # a writer's append of entry n, awaited; raises on a wrong answer


@dataclass
class Phase:
    """A closed loop's measured seconds: what each writer had acknowledged at
    the end, the sorted latencies, and each process's CPU seconds (by thread
    for the processes asked); `sampled` is what `sample` gave at its start and end."""

    acked: dict[int, int]
    latencies: list[float]
    elapsed: float
    cpu: dict[str, float]
    threads: dict[str, dict[str, float]]
    sampled: tuple[Any, Any]

    def summary(self) -> str:
        count = len(self.latencies)
        per_process = ", ".join(f"{name} {cpu / count * 1e6:.0f}" for name, cpu in self.cpu.items())
        server = sum(cpu for name, cpu in self.cpu.items() if name != "client") / count * 1e6
        return (
            f"{count / self.elapsed:,.0f} entries/s, p50 {self.latencies[count // 2] * 1e3:.2f} "
            f"p99 {self.latencies[int(count * 0.99)] * 1e3:.2f} ms; "
            f"server CPU {server:.0f} us per entry ({per_process})"
        )

    def by_thread(self) -> str:
        count = len(self.latencies)
        lines = []
        for name, spent in self.threads.items():
            busy = sorted(((cpu, thread) for thread, cpu in spent.items() if cpu), reverse=True)
            lines.append(f"        {name} by thread: " + ", ".join(f"{t} {cpu / count * 1e6:.0f}" for cpu, t in busy))
        return "\n".join(lines)


async def closed_loop(
    target: str,
    writers: int,
    seconds: float,
    pids: dict[str, int],
    make_append: Callable[[grpc.aio.Channel, int], Append],
    split: tuple[str, ...] = (),
    sample: Callable[[grpc.aio.Channel], Awaitable[Any]] | None = None,
) -> Phase:
    """`writers` writers, ledgers 1 to `writers`, each on a channel of its
    own appending entries 0, 1, ... one at a time: two seconds of warm-up,
    then `seconds` measured, with the CPU of `pids` and this process."""
    acked = dict.fromkeys(range(1, writers + 1), 0)
    latencies: list[float] = []
    measuring, stop = False, False
    channels = [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in acked]

    async def writer(ledger: int, channel: grpc.aio.Channel) -> None:
        append = make_append(channel, ledger)
        entry = 0
        while not stop:
            started = time.perf_counter()
            await append(entry)
            if measuring:
                latencies.append(time.perf_counter() - started)
            entry += 1
            acked[ledger] = entry

    tasks = [asyncio.create_task(writer(ledger, channel)) for ledger, channel in zip(acked, channels, strict=True)]
    await asyncio.sleep(2)  # warm up
    pids = {**pids, "client": os.getpid()}
    before = {name: process_cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
    threads_before = {name: thread_cpu_seconds(pids[name]) for name in split}
    sampled_before = await sample(channels[0]) if sample else None
    measuring, started = True, time.perf_counter()
    await asyncio.sleep(seconds)
    measuring, elapsed = False, time.perf_counter() - started
    cpu = {name: (process_cpu_seconds(pid) or 0.0) - before[name] for name, pid in pids.items()}
    threads = {
        name: {t: spent - threads_before[name].get(t, 0.0) for t, spent in thread_cpu_seconds(pids[name]).items()}
        for name in split
    }
    sampled_after = await sample(channels[0]) if sample else None
    stop = True
    await asyncio.gather(*tasks)
    for channel in channels:
        await channel.close()
    return Phase(acked, sorted(latencies), elapsed, cpu, threads, (sampled_before, sampled_after))


def verify_copies(
    directories: list[Path],
    acked: dict[int, int],
    stored_key: Callable[[int, int], bytes],
    holds: Callable[[bytes], bool],
) -> str:
    """Every acknowledged entry in at least ACK_QUORUM of the bookies' RocksDBs
    (under `stored_key(ledger, entry)`, with a value that `holds` the payload)."""
    copies: collections.Counter[tuple[int, int]] = collections.Counter()
    for directory in directories:
        db = rocksdict.Rdict(str(directory), rocksdict.Options(raw_mode=True))
        try:
            for ledger, entries in acked.items():
                for entry in range(entries):
                    value = db.get(stored_key(ledger, entry))
                    if value is not None and holds(value):
                        copies[(ledger, entry)] += 1
        finally:
            db.close()
    total = sum(acked.values())
    thin = sum(1 for ledger, entries in acked.items() for e in range(entries) if copies[(ledger, e)] < ACK_QUORUM)
    if thin:
        raise SystemExit(f"{thin} of {total} acknowledged entries are on fewer than {ACK_QUORUM} bookies")
    return f"{total} acknowledged entries, each on at least {ACK_QUORUM} bookies"


def stop_processes(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    for process in processes.values():
        process.terminate()
    for process in processes.values():
        process.wait(timeout=10)


def _append_call(rpc: str) -> Callable[[grpc.aio.Channel, int], Append]:
    """A writer's append: one unary call per entry, or one message on its stream."""

    def make_append(channel: grpc.aio.Channel, ledger: int) -> Append:
        add = channel.unary_unary(f"/{SERVICE}/AddUnary")
        call = channel.stream_stream(f"/{SERVICE}/Append")() if rpc == "stream" else None

        async def append(entry: int) -> None:
            if call is None:
                answer = await add(_wire(ledger, entry), timeout=10)
            else:
                await call.write(_wire(ledger, entry))
                answer = await call.read()
            if answer != KEY.pack(ledger, entry):
                raise RuntimeError(f"entry {ledger}/{entry} answered {answer!r}")

        return append

    return make_append


async def _bookie_messages(channel: grpc.aio.Channel) -> tuple[int, int]:
    """The gateway's bookie messages and the entries they carried, so far."""
    messages, entries = struct.unpack(">QQ", await channel.unary_unary(f"/{SERVICE}/Stats")(b""))
    return messages, entries


def _measure(rpc: str, args: argparse.Namespace) -> None:
    data = Path(tempfile.mkdtemp(prefix="floor-unary-"))
    bookie_ports = [free_port() for _ in range(3)]
    gateway_port = free_port()
    directories = [data / f"bookie-{i}" for i in range(3)]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for i, (port, directory) in enumerate(zip(bookie_ports, directories, strict=True)):
            processes[f"bookie-{i + 1}"] = subprocess.Popen(
                [sys.executable, __file__, "--role", "bookie", "--port", str(port), "--data", str(directory)]
            )
        time.sleep(2)
        bookies = ",".join(f"127.0.0.1:{port}" for port in bookie_ports)
        role = ["--role", "gateway", "--port", str(gateway_port), "--bookies", bookies, "--yields", str(args.yields)]
        processes["gateway"] = subprocess.Popen([sys.executable, __file__, *role])
        time.sleep(2)
        pids = {name: process.pid for name, process in processes.items()}
        target = f"127.0.0.1:{gateway_port}"
        phase = uvloop.run(
            closed_loop(target, args.writers, args.seconds, pids, _append_call(rpc), sample=_bookie_messages)
        )
        (messages_before, entries_before), (messages_after, entries_after) = phase.sampled
        per_message = (entries_after - entries_before) / max(1, messages_after - messages_before)
        print(f"{rpc:6} x{args.writers}: {phase.summary()}; {per_message:.1f} entries per bookie message", flush=True)
    finally:
        stop_processes(processes)
    try:
        verified = verify_copies(directories, phase.acked, KEY.pack, lambda value: value == PAYLOAD)
        print(f"        {verified}", flush=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def prototype_arguments(description: str, rounds_help: str) -> argparse.ArgumentParser:
    """The options of a prototype's run, and those its runner gives the
    processes it starts (hidden): a bookie's or the gateway's role."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=1, help=rounds_help)
    parser.add_argument("--yields", type=int, default=20, help="event loop turns before a bookie message leaves")
    parser.add_argument("--role", choices=["bookie", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bookies", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    parser = prototype_arguments(__doc__.split("\n\n")[0], "times each --rpc is measured, alternating")
    parser.add_argument("--rpc", default="stream,unary", help="stream, unary or both, comma-separated")
    args = parser.parse_args()
    if args.role == "bookie":
        _bookie(args.port, args.data)
        return
    if args.role == "gateway":
        _gateway(args.port, args.bookies.split(","), args.yields)
        return
    rpcs = args.rpc.split(",")
    if not set(rpcs) <= {"stream", "unary"}:
        parser.error(f"--rpc: {args.rpc!r}; use stream, unary or both")
    for _ in range(args.rounds):
        for rpc in rpcs:
            _measure(rpc, args)


if __name__ == "__main__":
    main()
