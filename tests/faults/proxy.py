"""A small asyncio TCP proxy for byte-level network faults.

It listens on a port and forwards to one upstream; its knobs can be changed
while it runs: `delay_seconds` ± `jitter_seconds` per chunk, `drop` (the
probability a connection's chunks are held back, then the connection is
reset), `reset_all()` (RST every connection), and `flip_bytes` (flip one bit
in each forwarded chunk toward the upstream, or the client). Runs its own
event loop in a thread so synchronous tests can drive it.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
from dataclasses import dataclass, field


@dataclass
class ProxyFaults:
    delay_seconds: float = 0.0
    jitter_seconds: float = 0.0
    drop: float = 0.0  # probability that a chunk is dropped (the connection is then reset)
    flip_to_upstream: bool = False
    flip_to_client: bool = False
    seed: int = 0
    rng: random.Random = field(default_factory=random.Random)


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int, listen_port: int = 0, seed: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.faults = ProxyFaults(seed=seed, rng=random.Random(seed))
        self.listen_port = listen_port
        self.chunks = 0
        self.dropped = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)

    def start(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)
        self.listen_port = self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(
            self._pump(reader, up_writer, to_upstream=True),
            self._pump(up_reader, writer, to_upstream=False),
            return_exceptions=True,
        )
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, to_upstream: bool) -> None:
        faults = self.faults
        while True:
            data = await reader.read(65536)
            if not data:
                writer.close()
                return
            self.chunks += 1
            if faults.delay_seconds or faults.jitter_seconds:
                jitter = faults.rng.uniform(-faults.jitter_seconds, faults.jitter_seconds)
                await asyncio.sleep(max(0.0, faults.delay_seconds + jitter))
            if faults.drop and faults.rng.random() < faults.drop:
                self.dropped += 1
                _reset(writer)
                return
            if (faults.flip_to_upstream and to_upstream) or (faults.flip_to_client and not to_upstream):
                flipped = bytearray(data)
                position = faults.rng.randrange(len(flipped))
                flipped[position] ^= 1 << faults.rng.randrange(8)
                data = bytes(flipped)
            writer.write(data)
            await writer.drain()

    def reset_all(self) -> None:
        """RST every open connection."""

        def reset() -> None:
            for writer in list(self._writers):
                _reset(writer)

        self._loop.call_soon_threadsafe(reset)

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with SO_LINGER 0: the peer sees a connection reset."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.close()
