"""A gateway's write path in one process: what each appended entry costs it.

Writers append one entry per request (or `--batch` entries per message), each
awaited, through the parts a gateway runs for AppendEntries: a WriteSession
per writer, its ledger's WriteHandle (with the entry cache and explicit
LACs), and one BookieAddStream per bookie. In place of gRPC and the bookies, each stream's call is a stand-in
that decodes every message it is sent and answers it on the next turn of the
event loop, as a bookie that stored it at once would. Prints the entries per
second and the process's CPU per entry (the stand-in's share included, the
same in every run), so that two versions of the write path can be compared
without the noise of a cluster on a busy machine.

With `--path prototype` the same writers and stand-ins drive the features
prototype's gateway instead (scripts/floor_features.py, levels 3 to 5: checksums,
Quire's messages and a write handle's tracking, without Quire's deadlines,
bounds, retries, ensemble changes or pipelined sessions), so the two write
paths can be set side by side in the same minutes (docs/decisions.md, "The
gateway's write path against the prototype's, in one process"). With `--path
session` Quire's WriteSession drives the prototype's ledgers (its level 6),
which sets the session's share apart from the write handle's and the bookie
streams'.

CPU time here moves with the machine by a fifth or more between runs; the
instructions an entry costs do not. Counted by valgrind, as the difference
between two runs, per entry (docs/decisions.md, "The gateway's excess by
layer"):

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        .venv/bin/python scripts/bench_append.py --entries 5000 --writers 16   # and --entries 15000

    .venv/bin/python scripts/bench_append.py --entries 40000 --writers 16
    .venv/bin/python scripts/bench_append.py --entries 40000 --writers 16 --path prototype
    .venv/bin/python scripts/bench_append.py --entries 300000 --batch 100
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.service import event_loop_factory
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.read.entry_cache import EntryCache
from quire_gateway.write.bookie_streams import BookieAddStream
from quire_gateway.write.explicit_lac import ExplicitLacs
from quire_gateway.write.handle import WriteHandle, WriteSettings
from quire_gateway.write.session import WriteSession
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2

BOOKIES = ["bookie-1", "bookie-2", "bookie-3"]
WARMUP = 2000  # entries appended before the measurement


class AnsweringCall:
    """A bookie's AddStream call that stores nothing and answers every message
    on the loop's next turn with the ids of the adds it carried."""

    def __init__(self, serialized: bool = False) -> None:
        # Answers as Quire's channel gives them (decoded), or as bytes (the prototype's links).
        self._answers: asyncio.Queue[bookie_pb2.AddStreamResponse | bytes] = asyncio.Queue()
        self._serialized = serialized

    async def write(self, message: bytes) -> None:
        request = bookie_pb2.AddStreamRequest.FromString(message)
        answer = bookie_pb2.AddStreamResponse(stored_add_ids=[add.add_id for add in request.adds])
        ready = answer.SerializeToString() if self._serialized else answer
        asyncio.get_running_loop().call_soon(self._answers.put_nowait, ready)

    async def read(self) -> bookie_pb2.AddStreamResponse | bytes:
        return await self._answers.get()


class Bookies:
    """What a WriteHandle asks of ClusterCalls on its path: the add requests
    and each bookie's AddStream send."""

    add_request = staticmethod(ClusterCalls.add_request)

    def __init__(self) -> None:
        async def open_call() -> Callable[[], AnsweringCall]:
            return AnsweringCall

        self.streams = {bookie_id: BookieAddStream(bookie_id, open_call, lambda: None) for bookie_id in BOOKIES}

    def add_sender(self, bookie_id: str) -> Any:
        return self.streams[bookie_id].send


class Ledgers:
    """The part of LedgerOperations a WriteSession uses, over the handles here."""

    def __init__(self, handles: dict[LedgerId, WriteHandle]) -> None:
        self.handles = handles

    def append_now(self, ledger_id: LedgerId, payloads: list[bytes], expected: int | None = None) -> Any:
        handle = self.handles.get(ledger_id)
        return handle.submit_now(payloads, expected) if handle is not None and payloads else None

    async def append(self, ledger_id: LedgerId, payloads: list[bytes], expected: int | None = None) -> Any:
        return await self.handles[ledger_id].submit(payloads, expected)

    def owner_here(self, ledger_id: LedgerId) -> str:
        return "gateway"


def metadata_of(ledger_id: LedgerId) -> common_pb2.LedgerMetadata:
    return common_pb2.LedgerMetadata(
        ledger_id=common_pb2.LedgerId(scope_id=ledger_id.scope_id, ledger_id=ledger_id.ledger_id),
        ensemble_size=3,
        write_quorum_size=3,
        ack_quorum_size=2,
        state=common_pb2.LEDGER_STATE_OPEN,
        last_entry_id=-1,
        digest_type=common_pb2.DIGEST_TYPE_CRC32C,
        password=b"bench",
        ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=BOOKIES)],
    )


# Sends one AppendEntries message into the path under test and returns once all its entries
# are acknowledged.
AppendMessage = Callable[[ledger_pb2.AppendEntriesRequest], Awaitable[None]]
# A stream's server side: its requests in, its answers' last entry ids out (put on the queue).
ServeStream = Callable[
    [AsyncIterator[ledger_pb2.AppendEntriesRequest], "asyncio.Queue[int]"], Coroutine[Any, Any, None]
]


def stream_to(serve: ServeStream, tasks: list[asyncio.Task[None]]) -> AppendMessage:
    """A writer's stream: its requests are served by a task of their own, as gRPC
    serves a call, so that a request and its answer each cross from one task to
    another in either path."""
    inbox: asyncio.Queue[ledger_pb2.AppendEntriesRequest] = asyncio.Queue()
    answers: asyncio.Queue[int] = asyncio.Queue()

    async def requests() -> AsyncIterator[ledger_pb2.AppendEntriesRequest]:
        while True:
            yield await inbox.get()

    tasks.append(asyncio.create_task(serve(requests(), answers)))
    last_acknowledged = -1

    async def append(request: ledger_pb2.AppendEntriesRequest) -> None:
        nonlocal last_acknowledged
        inbox.put_nowait(request)
        sent_through = last_acknowledged + len(request.payloads)
        while last_acknowledged < sent_through:  # a message's entries may be acknowledged in parts
            last_acknowledged = await answers.get()

    return append


def quire_writers(writers: int, tasks: list[asyncio.Task[None]]) -> list[tuple[LedgerId, AppendMessage]]:
    """Quire's path: a WriteSession per writer over its ledger's WriteHandle (with
    the entry cache and explicit LACs) and one BookieAddStream per bookie."""
    from floor_features import lac_written_at_once  # this folder's prototype

    bookies = Bookies()
    cache = EntryCache(64 * 1024 * 1024)
    lacs = ExplicitLacs(0.5, lac_written_at_once)
    handles: dict[LedgerId, WriteHandle] = {}
    for n in range(writers):
        ledger_id = LedgerId(1, 1000 + n)
        handles[ledger_id] = WriteHandle(
            bookies,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]  # no ensemble change here: never asked
            ledger_id,
            metadata_of(ledger_id),
            1,
            WriteSettings(),
            entry_cache=cache,
            explicit_lacs=lacs,
        )
    return sessions_over(Ledgers(handles), list(handles), tasks)


def sessions_over(
    ledgers: Any, ledger_ids: list[LedgerId], tasks: list[asyncio.Task[None]]
) -> list[tuple[LedgerId, AppendMessage]]:
    """A writer's stream per ledger, each served by a WriteSession over `ledgers`."""

    def session_on(ledger_id: LedgerId) -> ServeStream:
        async def serve(requests: AsyncIterator[ledger_pb2.AppendEntriesRequest], answers: asyncio.Queue[int]) -> None:
            session = WriteSession(ledgers, ledger_id, requests, traced=False)
            async for acknowledgement in session.acknowledgements():
                answers.put_nowait(acknowledgement.last_entry_id)

        return serve

    return [(ledger_id, stream_to(session_on(ledger_id), tasks)) for ledger_id in ledger_ids]


def prototype_writers(writers: int, tasks: list[asyncio.Task[None]]) -> list[tuple[LedgerId, AppendMessage]]:
    """The features prototype's path, each writer's stream served as its handler
    serves it: each request appended and its answer awaited in turn."""
    from floor_features import gateway_on_calls  # this folder's prototype

    append_one = gateway_on_calls([AnsweringCall(serialized=True) for _ in BOOKIES])

    async def serve(requests: AsyncIterator[ledger_pb2.AppendEntriesRequest], answers: asyncio.Queue[int]) -> None:
        async for request in requests:
            answers.put_nowait((await append_one(request)).last_entry_id)

    return [(LedgerId(0, 1000 + n), stream_to(serve, tasks)) for n in range(writers)]


def session_writers(writers: int, tasks: list[asyncio.Task[None]]) -> list[tuple[LedgerId, AppendMessage]]:
    """Quire's WriteSession per writer over the features prototype's ledgers
    (its level 6): the session's share of Quire's path, set apart from the
    write handle's and the bookie streams'."""
    from floor_features import ledgers_on_calls  # this folder's prototype

    ledgers = ledgers_on_calls([AnsweringCall(serialized=True) for _ in BOOKIES])
    return sessions_over(ledgers, [LedgerId(0, 1000 + n) for n in range(writers)], tasks)


async def measure(entries: int, writers: int, size: int, batch: int, path: str) -> None:
    tasks: list[asyncio.Task[None]] = []  # the streams' server sides
    streams = {"prototype": prototype_writers, "session": session_writers}.get(path, quire_writers)(writers, tasks)
    payload = b"p" * size
    appended = 0
    started = [0.0, 0.0, 0]  # wall time, CPU time and entries appended once the warmup is done

    async def writer(ledger_id: LedgerId, append: AppendMessage) -> None:
        nonlocal appended
        request = ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(ledger_id), payloads=[payload] * batch)
        while appended < entries + WARMUP:
            await append(request)
            appended += batch
            if appended >= WARMUP and not started[0]:
                started[:] = [time.perf_counter(), time.process_time(), appended]

    await asyncio.gather(*(writer(ledger_id, append) for ledger_id, append in streams))
    for task in tasks:
        task.cancel()
    wall, cpu = time.perf_counter() - started[0], time.process_time() - started[1]
    measured = appended - started[2]
    print(
        f"{path}: {measured / wall:,.0f} entries/s of {size} B from {writers} writers; "
        f"{cpu / measured * 1e6:.1f} µs of CPU per entry (the stand-in bookies' share included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=40_000, help="entries measured (after 2,000 unmeasured)")
    parser.add_argument("--writers", type=int, default=16, help="writers, each on a ledger of its own")
    parser.add_argument("--size", type=int, default=1024, help="bytes per entry")
    parser.add_argument("--batch", type=int, default=1, help="entries per AppendEntries message")
    parser.add_argument(
        "--path",
        choices=("quire", "prototype", "session"),
        default="quire",
        help="Quire's write path, the prototype's, or Quire's session over the prototype's ledgers",
    )
    args = parser.parse_args()
    if args.entries < 1 or args.writers < 1 or args.batch < 1 or args.size < 0:
        parser.error("--entries, --writers and --batch must be at least 1, --size at least 0")
    if args.path == "prototype" and args.batch != 1:
        parser.error("--path prototype: the prototype's gateway takes one entry per message (--batch 1)")
    with asyncio.Runner(loop_factory=event_loop_factory("uvloop")) as runner:
        runner.run(measure(args.entries, args.writers, args.size, args.batch, args.path))


if __name__ == "__main__":
    main()
