"""A gRPC proxy in front of etcd that loses answers: the fault lab's way to
make a write commit in etcd while its caller never hears so.

It forwards every etcd method as raw bytes (unary calls and the Watch and
LeaseKeepAlive streams alike, metadata and deadline included). On command it
drops the answers of the next N calls of a method (only those whose first
request holds a given byte string, when one is named): such a call goes
through to etcd, the proxy waits for etcd's whole answer, then fails the call
with UNAVAILABLE, as a connection cut after the commit would. The byte string
keeps a whole cluster's other writes (bookie leases, load weights) from
taking the drops meant for one call.

Run as its own process (`python -m tests.faults.etcd_proxy --upstream
127.0.0.1:2379 --port P --control-port C`); the control port takes one line
per command: `drop <method suffix> <count> [<hex of bytes the request must
hold>]` and `stats` (a JSON line of calls and dropped answers per method).
EtcdAnswerProxy starts and stops that process by PID from a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from quire_client.cluster import free_port

TXN = "/etcdserverpb.KV/Txn"
_RESERVED_METADATA = ("grpc-", ":")
_HOP_METADATA = {"user-agent", "content-type", "te", "host"}


@dataclass
class Drops:
    left: int  # answers still to drop
    marker: bytes  # only of calls whose first request holds these bytes (b"": any call)


class AnswerDropper(grpc.GenericRpcHandler):
    def __init__(self, upstream: str) -> None:
        self.channel = grpc.aio.insecure_channel(upstream)
        self.drops: dict[str, Drops] = {}  # by method suffix
        self.calls: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()

    def _pending(self, method: str) -> Drops | None:
        return next((d for suffix, d in self.drops.items() if d.left > 0 and method.endswith(suffix)), None)

    async def _take_drop(self, method: str, requests: AsyncIterator[bytes]) -> tuple[bool, AsyncIterator[bytes]]:
        """Whether this call's answer is to be dropped, and its requests to forward.
        A drop that names bytes reads the first request to look for them, then
        forwards it ahead of the rest."""
        drops = self._pending(method)
        if drops is None:
            return False, requests
        if not drops.marker:
            drops.left -= 1
            return True, requests
        first = await anext(requests, None)
        if first is None:
            return False, requests
        drops = self._pending(method)  # another call may have taken the last drop meanwhile
        drop = drops is not None and drops.marker in first
        if drop and drops is not None:
            drops.left -= 1
        return drop, _requests_after(first, requests)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        upstream = self.channel.stream_stream(method)  # raw bytes both ways

        async def forward(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            self.calls[method] += 1
            drop, requests = await self._take_drop(method, requests)
            metadata = [
                (key, value)
                for key, value in context.invocation_metadata() or ()
                if not key.startswith(_RESERVED_METADATA) and key not in _HOP_METADATA
            ]
            remaining = context.time_remaining()
            call = upstream(requests, metadata=metadata, timeout=remaining)
            try:
                if drop:
                    async for _ in call:  # etcd's whole answer, then it is lost
                        pass
                    self.dropped[method] += 1
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "the fault proxy dropped etcd's answer")
                async for response in call:
                    yield response
            except grpc.aio.AioRpcError as exc:
                await context.abort(exc.code(), exc.details() or "")

        return grpc.stream_stream_rpc_method_handler(forward)


async def _requests_after(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for request in rest:
        yield request


async def _control(dropper: AnswerDropper, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while line := await reader.readline():
            words = line.decode().split()
            reply: dict[str, object]
            if len(words) in (3, 4) and words[0] == "drop":
                marker = bytes.fromhex(words[3]) if len(words) == 4 else b""
                dropper.drops[words[1]] = Drops(int(words[2]), marker)
                reply = {"ok": True}
            elif words == ["stats"]:
                pending = {suffix: drops.left for suffix, drops in dropper.drops.items()}
                reply = {"calls": dict(dropper.calls), "dropped": dict(dropper.dropped), "pending": pending}
            else:
                reply = {"ok": False, "error": f"unknown command {line.decode().strip()!r}"}
            writer.write((json.dumps(reply) + "\n").encode())
            await writer.drain()
    finally:
        writer.close()


async def serve(upstream: str, port: int, control_port: int) -> None:
    dropper = AnswerDropper(upstream)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((dropper,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    control = await asyncio.start_server(
        lambda r, w: _control(dropper, r, w), "127.0.0.1", control_port, reuse_address=True
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    control.close()
    await server.stop(None)
    await dropper.channel.close()


class EtcdAnswerProxy:
    """The proxy as a separate process, started and stopped by PID."""

    def __init__(self, upstream: str, log_path: Path) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.control_port = free_port()
        self.log_path = log_path
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> EtcdAnswerProxy:
        command = [sys.executable, "-m", "tests.faults.etcd_proxy", "--upstream", self.upstream]
        command += ["--port", str(self.port), "--control-port", str(self.control_port)]
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"the etcd proxy exited with status {self.popen.returncode}; see {self.log_path}")
            try:
                self.command("stats")
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the etcd proxy did not start within {timeout:.0f}s; see {self.log_path}")

    def command(self, line: str) -> dict[str, object]:
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=10) as connection:
            connection.sendall(line.encode() + b"\n")
            reply = connection.makefile("rb").readline()
        return dict(json.loads(reply))

    def drop_answers(self, count: int, method: str = TXN, holding: bytes = b"") -> None:
        """Lose etcd's answers to the next `count` calls of `method` (of those
        whose request holds the bytes `holding`, when given)."""
        marker = f" {holding.hex()}" if holding else ""
        assert self.command(f"drop {method} {count}{marker}")["ok"]

    def dropped(self, method: str = TXN) -> int:
        counts = self.command("stats")["dropped"]
        assert isinstance(counts, dict)
        return int(counts.get(method, 0))

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)

    def __enter__(self) -> EtcdAnswerProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upstream", required=True, help="etcd's host:port")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control-port", type=int, required=True)
    arguments = parser.parse_args()
    asyncio.run(serve(arguments.upstream, arguments.port, arguments.control_port))


if __name__ == "__main__":
    main()
