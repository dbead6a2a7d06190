"""The bookie hop of a single-entry read in a lean prototype: one unary call
per read against one long-lived stream per bookie, in the same minutes.

    python scripts/floor_bookie_reads.py [--entries 6000] [--readers 16] [--rounds 2]

Three processes, each a grpc.aio server or client on uvloop with gRPC core's
EventEngine off (as Quire's services run):

- a lean bookie: `--entries` 1 KiB entries in a RocksDB of its own (rocksdict);
  `Get` answers one key per unary call, `GetStream` the keys of each message
  on a bidirectional stream with one message, each key and answer tagged with
  an 8-byte id; every read is a RocksDB get on the event loop (the entries are
  in the memtable);
- a lean gateway serving LedgerService.ReadEntries of one entry, which asks
  the bookie with `Get`, or over its one `GetStream`: the keys queued while a
  message is written go together in the next, a future per request, answers
  matched by id (the shape of Quire's AddStream);
- the closed-loop readers, in this process: `--readers` at a time, each
  read awaited.

Printed per measurement: reads/s, p50 and p99, and the gateway's and the
bookie's CPU per read (/proc). Raw bytes on the bookie hop; protobuf on the
client's, as Quire has it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import tempfile

import quire_common.grpc_runtime  # noqa: F401  (gRPC core's I/O as the services have it, before grpc loads)

# isort: split
import grpc
import rocksdict
import uvloop
from floor_reads import listen, p50_p99, read_all, started  # this folder's script: the same readers and server start

from quire_client.bench_closed import process_cpu_seconds
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc

ENTRY_BYTES = 1024
TAG = struct.Struct(">Q")  # a stream request's id, echoed before its answer
KEY = struct.Struct(">Q")  # an entry's key in the lean bookie: its id
SIZE = struct.Struct(">I")  # a streamed answer's length, before it
GET = "/floor.Bookie/Get"
GET_STREAM = "/floor.Bookie/GetStream"


def _raw(data: bytes) -> bytes:
    return data


def serve_bookie(data_dir: str, entries: int, port_file: str) -> None:
    db = rocksdict.Rdict(data_dir, rocksdict.Options(raw_mode=True))
    for entry_id in range(entries):
        db[KEY.pack(entry_id)] = os.urandom(ENTRY_BYTES)

    def value(key: bytes) -> bytes:
        stored = db[key]
        if stored is None:
            raise KeyError(key)
        return bytes(stored)

    async def get(key: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return value(key)

    async def get_stream(requests, context):  # type: ignore[no-untyped-def]
        async for message in requests:  # tagged keys; answered with tagged, sized values
            answer = []
            for offset in range(0, len(message), TAG.size + KEY.size):
                found = value(message[offset + TAG.size : offset + TAG.size + KEY.size])
                answer += [message[offset : offset + TAG.size], SIZE.pack(len(found)), found]
            yield b"".join(answer)

    handlers = {
        "Get": grpc.unary_unary_rpc_method_handler(get, _raw, _raw),
        "GetStream": grpc.stream_stream_rpc_method_handler(get_stream, _raw, _raw),
    }

    async def main() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.Bookie", handlers),))
        await listen(server, port_file)

    uvloop.run(main())


class StreamedGets:
    """One GetStream to the bookie. `get` queues a tagged key and awaits its
    answer; one sender writes everything queued as one message, the next only
    once it is written (a stream takes one write at a time), and one receiver
    matches the answers by tag."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._call = channel.stream_stream(GET_STREAM, _raw, _raw)()
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._queued: list[bytes] = []
        self._wake: asyncio.Future[None] | None = None
        self._next_id = 0
        self._tasks = [asyncio.ensure_future(self._send()), asyncio.ensure_future(self._take_answers())]

    async def get(self, key: bytes) -> bytes:
        self._next_id += 1
        answer = self._waiting[self._next_id] = asyncio.get_running_loop().create_future()
        self._queued.append(TAG.pack(self._next_id) + key)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        return await answer

    async def _send(self) -> None:
        while True:
            if not self._queued:
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
            message, self._queued = b"".join(self._queued), []
            await self._call.write(message)

    async def _take_answers(self) -> None:
        while True:
            message = await self._call.read()
            offset = 0
            while offset < len(message):
                (request_id,) = TAG.unpack_from(message, offset)
                (size,) = SIZE.unpack_from(message, offset + TAG.size)
                start = offset + TAG.size + SIZE.size
                self._waiting.pop(request_id).set_result(message[start : start + size])
                offset = start + size


class LeanGateway(ledger_pb2_grpc.LedgerServiceServicer):
    def __init__(self, bookie: str, hop: str) -> None:
        self._channel = grpc.aio.insecure_channel(bookie)
        self._hop = hop
        self._unary = self._channel.unary_unary(GET, _raw, _raw)
        self._stream: StreamedGets | None = None

    async def ReadEntries(self, request, context):  # type: ignore[no-untyped-def]
        entry_id = request.first_entry_id
        if self._hop == "unary":
            payload = await self._unary(KEY.pack(entry_id), timeout=10)
        else:
            self._stream = self._stream or StreamedGets(self._channel)
            payload = await self._stream.get(KEY.pack(entry_id))
        yield ledger_pb2.ReadEntriesResponse(entries=[ledger_pb2.Entry(entry_id=entry_id, payload=payload)])


def serve_gateway(bookie: str, hop: str, port_file: str) -> None:
    async def main() -> None:
        server = grpc.aio.server()
        ledger_pb2_grpc.add_LedgerServiceServicer_to_server(LeanGateway(bookie, hop), server)
        await listen(server, port_file)

    uvloop.run(main())


def measure(hop: str, bookie: subprocess.Popen[bytes], bookie_target: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        gateway, target = started(__file__, ["--serve-gateway", bookie_target, hop], os.path.join(scratch, "port"))
        try:
            anywhere = common_pb2.LedgerId()  # the lean gateway reads its one set of entries
            uvloop.run(read_all(target, anywhere, min(args.entries, 500), args.readers))  # warm-up
            before = {pid: process_cpu_seconds(pid) or 0.0 for pid in (gateway.pid, bookie.pid)}
            rate, latencies = uvloop.run(read_all(target, anywhere, args.entries, args.readers))
            used = {pid: (process_cpu_seconds(pid) or 0.0) - before[pid] for pid in before}
        finally:
            gateway.kill()
            gateway.wait()
    p50, p99 = p50_p99(latencies)
    print(
        f"bookie hop {hop:<6} readers={args.readers:<3} {rate:8,.0f} reads/s  p50 {1000 * p50:6.2f} "
        f"p99 {1000 * p99:6.2f} ms  CPU per read: gateway {1e6 * used[gateway.pid] / args.entries:5,.0f} us, "
        f"bookie {1e6 * used[bookie.pid] / args.entries:5,.0f} us",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=6000)
    parser.add_argument("--readers", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--serve-bookie", nargs=3, metavar=("DIR", "ENTRIES", "PORT_FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-gateway", nargs=3, metavar=("BOOKIE", "HOP", "PORT_FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bookie:
        data_dir, entries, port_file = args.serve_bookie
        serve_bookie(data_dir, int(entries), port_file)
        return
    if args.serve_gateway:
        serve_gateway(*args.serve_gateway)
        return
    with tempfile.TemporaryDirectory() as scratch:
        bookie, bookie_target = started(
            __file__, ["--serve-bookie", os.path.join(scratch, "db"), str(args.entries)], os.path.join(scratch, "port")
        )
        try:
            for _ in range(args.rounds):
                for hop in ("unary", "stream"):
                    measure(hop, bookie, bookie_target, args)
        finally:
            bookie.kill()
            bookie.wait()


if __name__ == "__main__":
    main()
