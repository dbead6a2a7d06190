"""The floor of a read the gateway's entry cache cannot serve: single-entry
`ReadEntries` calls through Quire's gateway, against a lean read proxy in front
of the same bookie, in the same minutes.

    python scripts/floor_reads.py [--entries 6000] [--readers 1,16] [--rounds 1]

A local cluster (3 bookies, E3W3A2) with the gateway's entry cache off, so that
every read is answered by a bookie; one ledger of `--entries` 1 KiB entries.
Each reader asks for its share of them one `ReadEntries` call per entry (first =
last), each awaited, as `quire bench`'s read phase does. Then the same readers
read the same entries through the proxy: a grpc.aio server on uvloop, gRPC
core's EventEngine off (as Quire's services run), whose `ReadEntries` makes one
unary `ReadEntries` call to the ledger's first bookie and answers with the
entry's payload.

Not in the proxy, and so what Quire pays above it: the gateway's interceptors
(error mapping, the caller's checks before the message is read, call limits),
ledger metadata and its LAC rules, the reader's replica choice and speculative
reads, the digest check, deadlines, the read histogram and span.

Printed per phase: reads/s, p50 and p99, and the serving process's CPU per read
(/proc), the gateway's or the proxy's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quire_common.grpc_runtime  # noqa: F401  (gRPC core's I/O as the services have it, before grpc loads)

# isort: split
import grpc
import uvloop

from quire_api.ids import ledger_id_from_proto
from quire_client.bench_closed import process_cpu_seconds
from quire_client.client import QuireClient
from quire_client.cluster import LocalCluster, Ports
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc

ENTRY_BYTES = 1024
MESSAGE_BYTES = 64 * 1024 * 1024


class ReadProxy(ledger_pb2_grpc.LedgerServiceServicer):
    """ReadEntries of one entry, answered by one unary call to one bookie."""

    def __init__(self, bookie: str) -> None:
        channel = grpc.aio.insecure_channel(bookie, options=[("grpc.max_receive_message_length", MESSAGE_BYTES)])
        self.bookie = bookie_pb2_grpc.BookieServiceStub(channel)

    async def ReadEntries(self, request, context):  # type: ignore[no-untyped-def]
        entry_id = request.first_entry_id
        answer = await self.bookie.ReadEntries(
            bookie_pb2.ReadEntriesRequest(ledger_id=request.ledger_id, entry_ids=[entry_id]), timeout=10
        )
        payload = answer.entries[0].data[-ENTRY_BYTES:]  # the packed entry ends with its payload
        yield ledger_pb2.ReadEntriesResponse(entries=[ledger_pb2.Entry(entry_id=entry_id, payload=payload)])


async def serve_proxy(bookie: str, port_file: str) -> None:
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", MESSAGE_BYTES)])
    ledger_pb2_grpc.add_LedgerServiceServicer_to_server(ReadProxy(bookie), server)
    await listen(server, port_file)


async def listen(server: grpc.aio.Server, port_file: str) -> None:
    """Serve on a free port, written to `port_file` once the server has started."""
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    with open(port_file, "w") as out:  # noqa: ASYNC230  (once, before anything is served)
        out.write(str(port))
    await server.wait_for_termination()


async def read_all(target: str, ledger: common_pb2.LedgerId, entries: int, readers: int) -> tuple[float, list[float]]:
    """Every entry read once, `readers` at a time; reads/s and each read's latency (s)."""
    latencies: list[float] = []
    async with grpc.aio.insecure_channel(target) as channel:
        stub = ledger_pb2_grpc.LedgerServiceStub(channel)

        async def reader(first: int) -> None:
            for entry_id in range(first, entries, readers):
                began = time.perf_counter()
                request = ledger_pb2.ReadEntriesRequest(
                    ledger_id=ledger, first_entry_id=entry_id, last_entry_id=entry_id
                )
                got = [entry async for response in stub.ReadEntries(request) for entry in response.entries]
                if len(got) != 1 or len(got[0].payload) != ENTRY_BYTES:
                    raise RuntimeError(f"entry {entry_id} read back wrong")
                latencies.append(time.perf_counter() - began)

        started = time.perf_counter()
        await asyncio.gather(*(reader(first) for first in range(readers)))
        return entries / (time.perf_counter() - started), latencies


def p50_p99(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]


def started(script: str, args: list[str], port_file: str) -> tuple[subprocess.Popen[bytes], str]:
    """`script` run with `args` and `port_file`, once it has written the port it serves on
    there; its process and its address."""
    process = subprocess.Popen([sys.executable, script, *args, port_file])
    while not os.path.exists(port_file) or not Path(port_file).read_text():
        if process.poll() is not None:
            raise RuntimeError(f"{args[0]} exited with status {process.returncode}")
        time.sleep(0.1)
    return process, f"127.0.0.1:{Path(port_file).read_text()}"


def measure(name: str, target: str, pid: int, ledger: common_pb2.LedgerId, entries: int, readers: int) -> None:
    before = process_cpu_seconds(pid) or 0.0
    rate, latencies = uvloop.run(read_all(target, ledger, entries, readers))
    cpu = (process_cpu_seconds(pid) or 0.0) - before
    p50, p99 = p50_p99(latencies)
    print(
        f"{name:<8} readers={readers:<3} {rate:8,.0f} reads/s  p50 {1000 * p50:6.2f} p99 {1000 * p99:6.2f} ms  "
        f"CPU {1e6 * cpu / entries:6,.0f} us per read",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=6000)
    parser.add_argument("--readers", default="1,16", help="readers in flight, comma-separated")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--serve-proxy", nargs=2, metavar=("BOOKIE", "PORT_FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_proxy:
        uvloop.run(serve_proxy(*args.serve_proxy))
        return
    readers = [int(n) for n in args.readers.split(",")]
    with tempfile.TemporaryDirectory() as data_dir:
        cluster = LocalCluster(
            Path(data_dir), Ports.free(bookies=3), extra_env={"QUIRE_GATEWAY_ENTRY_CACHE_BYTES": "0"}
        )
        cluster.start()
        proxy: subprocess.Popen[bytes] | None = None
        try:
            with QuireClient(cluster.gateway_target) as client:
                metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2)
                client.append_all(ledger_id_from_proto(metadata.ledger_id), [os.urandom(ENTRY_BYTES)] * args.entries)
            port_file = os.path.join(data_dir, "proxy-port")
            bookie = metadata.ensembles[0].bookie_ids[0]  # a host:port id in the local cluster
            proxy, proxy_target = started(__file__, ["--serve-proxy", bookie], port_file)
            gateway_pid = cluster.pid("gateway")
            assert gateway_pid is not None
            for _ in range(args.rounds):
                for count in readers:
                    measure("gateway", cluster.gateway_target, gateway_pid, metadata.ledger_id, args.entries, count)
                    measure("proxy", proxy_target, proxy.pid, metadata.ledger_id, args.entries, count)
        finally:
            if proxy is not None:
                proxy.kill()
                proxy.wait()
            cluster.stop()


if __name__ == "__main__":
    main()
