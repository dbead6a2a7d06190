"""The floor of Quire's create path: a lean prototype of the same design, to
measure what this machine allows before calling a creates target out of reach.

    python scripts/floor_creates.py [--writers 16] [--seconds 8]

Four processes as Quire has them, each a grpc.aio server on uvloop, raw bytes on
every hop (protobuf against raw framing made no difference in the write path's
prototype): a gateway serving one unary `Create` per ledger, which gathers the
creates in flight into one placement call and one registry call at a time (the
shape of quire_gateway/call_batches.py); placement, which picks 3 of 4 bookie ids
per ask; the registry, which writes a batch's ledgers in one etcd transaction
(etcd3aio, ids from a counter); and a real etcd. A closed-loop client keeps
`--writers` creates in flight, each awaited. Printed: creates/s and each
process's CPU per create (/proc), the client's own included.

Not in it, and so what Quire pays above it: interceptors (error mapping,
versions, authentication, call limits), metrics, the owner's lease, request ids
and their retry safety, passwords, the metadata watch that keeps gateways'
caches current, and the write handle a create opens.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import uvloop

from quire_client.bench_closed import process_cpu_seconds
from quire_client.cluster import free_port

BOOKIES = [f"127.0.0.1:{3000 + i}" for i in range(4)]
MAX_BATCH = 64  # as CREATES_PER_BATCH bounds Quire's batches
SERVICE = "floor.Creates"


def pack(items: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(item)) + item for item in items)


def unpack(data: bytes) -> list[bytes]:
    items, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from(">I", data, offset)
        items.append(data[offset + 4 : offset + 4 + length])
        offset += 4 + length
    return items


class Gatherer:
    """One batch in flight; what arrives meanwhile leaves together in the next."""

    def __init__(self, send: Callable[[list[bytes]], Awaitable[list[bytes]]]) -> None:
        self._send = send
        self._waiting: list[tuple[bytes, asyncio.Future[bytes]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def submit(self, item: bytes) -> bytes:
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._sender is None:
            self._sender = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
                for (_, future), outcome in zip(batch, await self._send([item for item, _ in batch]), strict=True):
                    future.set_result(outcome)
        finally:
            self._sender = None


async def serve(port: int, handlers: dict[str, Callable[[bytes, object], Awaitable[bytes]]]) -> None:
    server = grpc.aio.server()
    methods = {name: grpc.unary_unary_rpc_method_handler(handler) for name, handler in handlers.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def method(port: int, name: str) -> grpc.aio.UnaryUnaryMultiCallable:
    return grpc.aio.insecure_channel(f"127.0.0.1:{port}").unary_unary(f"/{SERVICE}/{name}")


async def gateway(ports: dict[str, int]) -> None:
    choose, create_batch = method(ports["placement"], "Choose"), method(ports["registry"], "CreateBatch")

    async def choose_all(asks: list[bytes]) -> list[bytes]:
        return unpack(await choose(pack(asks), timeout=5))

    async def create_all(records: list[bytes]) -> list[bytes]:
        return unpack(await create_batch(pack(records), timeout=5))

    ensembles, creates = Gatherer(choose_all), Gatherer(create_all)

    async def create(request: bytes, context: object) -> bytes:
        ensemble = await ensembles.submit(request)
        return await creates.submit(b"|".join([ensemble, request, struct.pack(">d", time.time())]))

    await serve(ports["gateway"], {"Create": create})


async def placement(ports: dict[str, int]) -> None:
    async def choose(request: bytes, context: object) -> bytes:
        return pack([",".join(random.sample(BOOKIES, 3)).encode() for _ in unpack(request)])

    await serve(ports["placement"], {"Choose": choose})


async def registry(ports: dict[str, int]) -> None:
    import etcd3aio

    client = etcd3aio.Etcd3Client([f"127.0.0.1:{ports['etcd']}"])
    await client.connect()
    kv = client.kv
    assert kv is not None
    last_id = 0

    async def create_batch(request: bytes, context: object) -> bytes:
        nonlocal last_id
        records, keys, puts = unpack(request), [], []
        for record in records:
            last_id += 1
            keys.append(b"/floor/ledgers/" + struct.pack(">QQ", 1, last_id))
            puts.append(kv.txn_op_put(keys[-1], record))
        await kv.txn([], puts, [], timeout=5)
        return pack([key + record for key, record in zip(keys, records, strict=True)])

    await serve(ports["registry"], {"CreateBatch": create_batch})


def cpu_seconds(pid: int) -> float:
    seconds = process_cpu_seconds(pid)
    assert seconds is not None, f"process {pid} is gone"
    return seconds


async def drive(ports: dict[str, int], pids: dict[str, int], writers: int, seconds: float) -> str:
    create = method(ports["gateway"], "Create")
    done, stop = 0, False

    async def writer() -> None:
        nonlocal done
        while not stop:
            await create(b"3,3,2|", timeout=5)
            done += 1

    tasks = [asyncio.create_task(writer()) for _ in range(writers)]
    await asyncio.sleep(2)  # warm up
    pids = {**pids, "client": os.getpid()}
    before, count, started = {n: cpu_seconds(p) for n, p in pids.items()}, done, time.perf_counter()
    await asyncio.sleep(seconds)
    after, count, elapsed = {n: cpu_seconds(p) for n, p in pids.items()}, done - count, time.perf_counter() - started
    stop = True
    await asyncio.gather(*tasks)
    per_create = ", ".join(f"{name} {(after[name] - before[name]) / count * 1e6:.0f}" for name in pids)
    return f"creates x{writers}: {count / elapsed:.0f}/s; CPU us per create: {per_create}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--role", choices=["gateway", "placement", "registry"], help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        ports = dict(zip(["etcd", "gateway", "placement", "registry"], map(int, args.ports.split(",")), strict=True))
        uvloop.run({"gateway": gateway, "placement": placement, "registry": registry}[args.role](ports))
        return
    etcd_port, peer_port, *service_ports = [free_port() for _ in range(5)]
    ports = {"etcd": etcd_port, **dict(zip(["gateway", "placement", "registry"], service_ports, strict=True))}
    port_list = ",".join(str(ports[n]) for n in ("etcd", "gateway", "placement", "registry"))
    data = Path(tempfile.mkdtemp(prefix="floor-creates-"))
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        processes["etcd"] = subprocess.Popen(
            [shutil.which("etcd") or "/usr/bin/etcd", "--data-dir", str(data / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-cluster", f"default=http://127.0.0.1:{peer_port}", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(2)
        for role in ("placement", "registry", "gateway"):
            processes[role] = subprocess.Popen([sys.executable, __file__, "--role", role, "--ports", port_list])
        time.sleep(3)
        pids = {name: process.pid for name, process in processes.items()}
        print(uvloop.run(drive(ports, pids, args.writers, args.seconds)))
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(timeout=10)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
