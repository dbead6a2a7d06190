"""The floor of a unary read of a cached entry: the peer benchmark's null
unary server, given Quire's guarantees one at a time, and the gateway's
`ReadEntry`, in the same minutes, to measure how much of the null server's
reads per second the design itself keeps.

    python scripts/floor_read_unary.py [--readers 16] [--seconds 8] [--rounds 2] [--levels 0,1,2,3,4]

Each level keeps the ones before it (a fresh server process for each
measurement; the readers in this process on one channel, each read awaited,
reading `--entries` 1 KiB entries in turn):

0. the null server of the peer benchmark (bench-peers' `ref-grpc-null-unary`):
   grpc.aio on asyncio's own event loop with gRPC core's default I/O (its
   EventEngine threads), raw bytes, an entry returned by its index;
1. Quire's runtime: uvloop, and gRPC core's EventEngine client, listener and
   endpoints off, so that one poller thread does the I/O
   (`quire_common.grpc_runtime`: it makes writes faster, docs/decisions.md);
2. Quire's messages: `ReadEntryRequest` and `ReadEntryResponse` (the ledger's
   id, the entry id; the Entry with its payload and length, encoded by the
   gateway's own `read_entry_response`), the entry looked up by ledger and id;
3. Quire's server wrappers, as the gateway has them: the error mapping with
   its per-call duration sample (an OpenTelemetry SDK with a Prometheus reader
   behind it), and the guard, which serves the call as a stream of one so that
   its caller is checked before its message is read, under the idle bound for
   that message (no credentials asked: as in the benchmark's plaintext cluster);
4. Quire: a local cluster's gateway, `ReadEntry` of a ledger's entries written
   just before, every one in its entry cache.

Not in level 3, and so what the gateway pays above it: the ledger's metadata
and its LAC rules, the entry cache, and the rest of the process.

Printed per measurement: reads/s, p50 and p99, the server's CPU per read
(/proc) and, per round, each level's reads/s against level 0's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from quire_api.ids import ledger_id_from_proto
from quire_client.bench_closed import process_cpu_seconds
from quire_client.client import QuireClient
from quire_client.cluster import LocalCluster, Ports
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc

LEVELS = ("null server", "Quire's runtime", "Quire's messages", "Quire's wrappers", "Quire")
NULL_SERVICE = "floor.Reads"
ENTRY_BYTES = 1024
MESSAGE_BYTES = 64 * 1024 * 1024
OPTIONS = [("grpc.max_send_message_length", MESSAGE_BYTES), ("grpc.max_receive_message_length", MESSAGE_BYTES)]
INDEX = struct.Struct(">Q")
# gRPC core's I/O as Quire's services set it, for levels 1 and up. Spelled out rather than imported
# from quire_common.grpc_runtime: importing that module sets it in this process too, whose readers
# keep gRPC's default I/O as the peer benchmark's do.
LEGACY_IO = (
    "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints,-event_engine_callback_cq"
)

Read = Callable[[int], Awaitable[None]]  # one reader's read of entry n, awaited; raises on a wrong answer


# -- the servers of levels 0 to 3, each in a process of its own -----------------------


def _payload(entry: int) -> bytes:
    """Entry n's payload: the same in the servers and the reader that checks it."""
    return entry.to_bytes(8, "big") * (ENTRY_BYTES // 8)


def _null_methods(entries: int) -> dict[str, grpc.RpcMethodHandler]:
    store = [_payload(n) for n in range(entries)]

    async def read(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return store[INDEX.unpack(request)[0]]

    return {"Read": grpc.unary_unary_rpc_method_handler(read)}


def _read_entry_methods(entries: int) -> dict[str, grpc.RpcMethodHandler]:
    """ReadEntry of ledger 0/1's entries, answered as the gateway answers one:
    its ReadEntryResponse encoded by the gateway's own `read_entry_response`."""
    from quire_gateway.read.replicas import ReadEntry
    from quire_gateway.read.replies import read_entry_response

    store = {(0, 1, n): _payload(n) for n in range(entries)}

    async def read_entry(request: ledger_pb2.ReadEntryRequest, context: grpc.aio.ServicerContext) -> bytes:
        named, entry_id = request.ledger_id, request.entry_id
        payload = store[(named.scope_id, named.ledger_id, entry_id)]
        return read_entry_response(ReadEntry(entry_id, payload, (entry_id + 1) * ENTRY_BYTES))

    return {"ReadEntry": grpc.unary_unary_rpc_method_handler(read_entry, ledger_pb2.ReadEntryRequest.FromString)}


def _quire_wrappers(server: grpc.aio.Server) -> None:
    """The gateway's wrappers on every handler added to `server` from now on."""
    from opentelemetry import metrics
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider

    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))

    from quire_common.auth import AuthSettings
    from quire_common.call_limits import RequestIdle
    from quire_common.handler_cache import wrap_generic_handlers
    from quire_common.server import ErrorMappingInterceptor
    from quire_gateway.authn import GatewayAuthInterceptor

    no_credentials = AuthSettings(enabled=False, verifier=None, cert_roles={})
    guard = GatewayAuthInterceptor(no_credentials, False, idle=RequestIdle(first_message_seconds=30))
    wrap_generic_handlers(server, [ErrorMappingInterceptor(), guard])


async def _serve(level: int, entries: int, port_file: str) -> None:
    server = grpc.aio.server(options=OPTIONS)
    if level >= 3:
        _quire_wrappers(server)
    if level >= 2:
        service, methods = (
            ledger_pb2.DESCRIPTOR.services_by_name["LedgerService"].full_name,
            _read_entry_methods(entries),
        )
    else:
        service, methods = NULL_SERVICE, _null_methods(entries)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    _announce(port_file, port)
    await server.wait_for_termination()


def _announce(port_file: str, port: int) -> None:
    """Tell the runner where the server listens (a small file written once, before any read)."""
    Path(port_file).write_text(str(port))


def _server_role(level: int, entries: int, port_file: str) -> None:
    if level == 0:
        asyncio.run(_serve(level, entries, port_file))
        return
    import uvloop

    uvloop.run(_serve(level, entries, port_file))


def _start_server(level: int, entries: int, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = data / f"level-{level}.port"
    port_file.unlink(missing_ok=True)
    env = {name: value for name, value in os.environ.items() if name != "GRPC_EXPERIMENTS"}
    if level >= 1:
        env["GRPC_EXPERIMENTS"] = LEGACY_IO
    process = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-level",
            str(level),
            "--entries",
            str(entries),
            "--port-file",
            str(port_file),
        ],
        env=env,
    )
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"the level {level} server did not start")
        time.sleep(0.05)
    return process, f"127.0.0.1:{port_file.read_text()}"


# -- the readers ------------------------------------------------------------------------


def _reader(level: int, channel: grpc.aio.Channel, ledger: common_pb2.LedgerId) -> Read:
    if level < 2:
        read_raw = channel.unary_unary(f"/{NULL_SERVICE}/Read")

        async def read(entry: int) -> None:
            if await read_raw(INDEX.pack(entry), timeout=10) != _payload(entry):
                raise RuntimeError(f"entry {entry}: a wrong answer")

        return read
    stub = ledger_pb2_grpc.LedgerServiceStub(channel)

    async def read_entry(entry: int) -> None:
        answer = await stub.ReadEntry(ledger_pb2.ReadEntryRequest(ledger_id=ledger, entry_id=entry), timeout=10)
        if answer.entry.entry_id != entry or answer.entry.payload != _payload(entry):
            raise RuntimeError(f"entry {entry}: a wrong answer")

    return read_entry


async def _read_loop(
    level: int, target: str, ledger: common_pb2.LedgerId, entries: int, readers: int, seconds: float, pid: int
) -> tuple[float, list[float], float]:
    """Reads/s, sorted latencies and the server's CPU seconds over `seconds`, after 2 s of warm-up."""
    channel = grpc.aio.insecure_channel(target, options=OPTIONS)
    read = _reader(level, channel, ledger)
    latencies: list[float] = []
    measuring = stop = False

    async def reader(first: int) -> None:
        entry = first
        while not stop:
            started = time.perf_counter()
            await read(entry)
            if measuring:
                latencies.append(time.perf_counter() - started)
            entry = (entry + readers) % entries

    tasks = [asyncio.create_task(reader(n)) for n in range(readers)]
    await asyncio.sleep(2)
    cpu_before = process_cpu_seconds(pid) or 0.0
    measuring, started = True, time.perf_counter()
    await asyncio.sleep(seconds)
    measuring, elapsed = False, time.perf_counter() - started
    cpu = (process_cpu_seconds(pid) or 0.0) - cpu_before
    stop = True
    await asyncio.gather(*tasks)
    await channel.close()
    return len(latencies) / elapsed, sorted(latencies), cpu


def _measure(
    level: int, args: argparse.Namespace, data: Path, cluster: LocalCluster | None, ledger: common_pb2.LedgerId
) -> float:
    process = None
    if cluster is not None:
        pid, target = cluster.pid("gateway"), cluster.gateway_target
        assert pid is not None
    else:
        process, target = _start_server(level, args.entries, data)
        pid = process.pid
    try:
        rate, latencies, cpu = asyncio.run(
            _read_loop(level, target, ledger, args.entries, args.readers, args.seconds, pid)
        )
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=10)
    count = len(latencies)
    print(
        f"level {level} ({LEVELS[level]}): {rate:,.0f} reads/s, p50 {latencies[count // 2] * 1e3:.2f} "
        f"p99 {latencies[int(count * 0.99)] * 1e3:.2f} ms; server CPU {cpu / count * 1e6:.0f} us per read",
        flush=True,
    )
    return rate


def _rounds(
    args: argparse.Namespace,
    levels: list[int],
    data: Path,
    cluster: LocalCluster | None,
    quire_ledger: common_pb2.LedgerId,
) -> None:
    """Every level in turn, `--rounds` times; each round's reads/s against level 0's, then their medians."""
    ledger = common_pb2.LedgerId(scope_id=0, ledger_id=1)
    ratios: dict[int, list[float]] = {level: [] for level in levels if level}
    for _ in range(args.rounds):
        rates = {}
        for level in levels:
            rates[level] = _measure(
                level, args, data, cluster if level == 4 else None, quire_ledger if level == 4 else ledger
            )
        if 0 in rates:
            for level in ratios:
                ratios[level].append(rates[level] / rates[0])
            print(
                "    against level 0: "
                + ", ".join(f"level {level} {rate / rates[0]:.2f}x" for level, rate in rates.items() if level),
                flush=True,
            )
    if 0 in levels and args.rounds > 1:
        print(
            "medians against level 0: "
            + ", ".join(f"level {level} {statistics.median(found):.2f}x" for level, found in ratios.items())
        )


def _run(args: argparse.Namespace, levels: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="floor-read-unary-") as data_dir:
        data = Path(data_dir)
        if 4 not in levels:
            _rounds(args, levels, data, None, common_pb2.LedgerId())
            return
        cluster = LocalCluster(data / "quire", Ports.free(bookies=3))
        cluster.start()
        try:
            with QuireClient(cluster.gateway_target) as client:
                metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2)
                client.append_all(ledger_id_from_proto(metadata.ledger_id), (_payload(n) for n in range(args.entries)))
            # The ledger's explicit LAC makes every entry readable within a second; the rest
            # lets the bookies' flushes after the writes end before any server is measured.
            time.sleep(5)
            _rounds(args, levels, data, cluster, metadata.ledger_id)
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--entries", type=int, default=4000, help="1 KiB entries read in turn")
    parser.add_argument("--rounds", type=int, default=1, help="times each level is measured, alternating")
    parser.add_argument("--levels", default="0,1,2,3,4", help="levels to measure, comma-separated (0-4)")
    parser.add_argument("--serve-level", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_level is not None:
        _server_role(args.serve_level, args.entries, args.port_file)
        return
    try:
        levels = [int(level) for level in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels: {args.levels!r}; give levels 0 to 4, comma-separated")
    if not levels or not set(levels) <= set(range(len(LEVELS))):
        parser.error(f"--levels: {args.levels!r}; give levels 0 to 4, comma-separated")
    if args.readers < 1 or args.seconds <= 0 or args.entries < args.readers:
        parser.error("--readers and --seconds must be positive, and --entries at least --readers")
    _run(args, levels)


if __name__ == "__main__":
    main()
