"""Quire's per-entry features put on the write path's floor one at a time, to
measure what each costs in the lean design and whether their sum is the gap
between the prototype and Quire.

    python scripts/floor_features.py [--writers 16] [--seconds 8] [--rounds 1] [--levels 0,1,2,3,4,5,6]
        [--threads] [--quire-bookies]

The prototype is scripts/floor_unary.py's, streamed (four processes, each a
grpc.aio server on uvloop with gRPC core's EventEngine off; one long-lived
stream per bookie with one message unanswered; one writer thread per bookie
writing everything queued in one synced RocksDB WriteBatch; an entry
acknowledged once two of three bookies stored it). Each level keeps the ones
before it and adds one of Quire's features, made of Quire's own code where a
piece of it stands alone:

0. the prototype: raw bytes on both hops, a running count as each bookie's answer;
1. checksums: the gateway packs each entry in Quire's format (header and
   CRC32C, `quire_common.entry.pack_entry`), each bookie checks the header's
   ids and the digest (`header_ids_and_digest`) before storing it;
2. Quire's messages: AppendEntriesRequest and AppendEntriesResponse on the
   client's hop; AddStreamRequests joined from adds encoded once
   (`quire_gateway`'s `AddRequest`) to the bookies, decoded on the writer
   thread, each answered with the ids of the adds stored, matched by id in the
   gateway; the gateway gives entry ids and a bookie stores Quire's keys;
3. a write handle's tracking: per entry a pending record with the set of
   bookies that stored it, the LAC moved over every entry in a row that has its
   quorum, the confirmed entries put in an `EntryCache`;
4. a bookie's ledger states: each add checked against its ledger's
   `LedgerState` (master key, fence) and the state moved by its entry, and a
   group commit's three histogram samples (Quire's deferred histograms, an
   OpenTelemetry SDK with a Prometheus reader behind them);
5. Quire's server wrappers on the gateway's stream (error mapping with its
   per-call record, the authentication guard with its idle bound, the check of
   undecodable messages), its handler an async generator;
6. Quire's AppendEntries session: the stream served as Quire's servicer
   serves it, by a `WriteSession` (its requests read by a task of their own,
   answered from a queue of futures) over the prototype's ledgers;
7. Quire's write handles and bookie streams: the session over a `WriteHandle`
   per ledger (with the entry cache and explicit LACs, their writes to the
   bookies left out) and one `BookieAddStream` per bookie, as Quire's gateway
   builds them; what is left between this level and Quire's gateway is the
   rest of that gateway (its servicer, router, metadata and process).

Not in levels 0 to 6: deadlines, byte bounds, explicit LACs and what an
ensemble change needs kept per add (all in level 7's handles and streams).
Not in any level, and so still between the last level and Quire: spans,
ownership and relaying, ledger metadata, bookie answers with refusals, the
bookie's WAL synced outside RocksDB, and the rest of each service.

With --quire-bookies the gateway writes to a local Quire cluster's bookies
(levels 2 and up: Quire's AddStream), which sets Quire's bookie against the
prototype's with the same features (docs/decisions.md, "Quire's features on
the prototype, one at a time").

Each measurement starts fresh processes, prints entries/s, p50 and p99 and
each process's CPU per entry (/proc, the client's own included; with
--threads, the gateway's and the first bookie's by thread), and then looks
for every acknowledged entry in the prototype's three RocksDBs (two must
hold it; Quire's bookies are left to Quire's own tests).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hmac
import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

# In every process here, before grpc is imported: gRPC core's EventEngine off, as Quire's services run.
os.environ.setdefault(
    "GRPC_EXPERIMENTS",
    "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints,-event_engine_callback_cq",
)

import grpc
import rocksdict
import uvloop
from floor_unary import (  # this folder's prototype
    Append,
    BookieLink,
    Replicated,
    closed_loop,
    prototype_arguments,
    serve,
    stop_processes,
    verify_copies,
)

from quire_api.ids import LedgerId
from quire_bookie.journal import NO_STATE, apply_add, with_master_key
from quire_bookie.storage import LedgerState
from quire_client.cluster import LocalCluster, Ports, free_port
from quire_common.entry import Digester, DigestType, header_ids_and_digest, pack_entry
from quire_common.thread_names import name_grpc_poller, name_native_thread
from quire_gateway.read.entry_cache import EntryCache
from quire_gateway.write.bookie_streams import _ADD_STREAM_METHOD as QUIRE_ADD_STREAM
from quire_gateway.write.bookie_streams import _STORED_IDS, AddRequest, add_fields
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2

SERVICE = "quire.gateway.floor.Features"  # under /quire.gateway., where Quire's wrappers apply
LEVELS = ("prototype", "checksums", "messages", "tracking", "ledger states", "wrappers", "session", "handles")
RAW = struct.Struct(">QQI")  # a raw entry: ledger, entry id, length, then the bytes
KEY = struct.Struct(">QQ")
COUNT = struct.Struct(">Q")
ACK_QUORUM = 2
PAYLOAD = os.urandom(1024)
MASTER_KEY = b"k" * 20
DIGESTER = Digester(DigestType.CRC32C)


def _stored_key(level: int, ledger: int, entry: int) -> bytes:
    return LedgerId(0, ledger).key + entry.to_bytes(8, "big") if level >= 2 else KEY.pack(ledger, entry)


def _holds_payload(level: int, value: bytes) -> bool:
    """A stored value is the payload itself (level 0) or a packed entry ending in it."""
    return value == PAYLOAD if level == 0 else value.endswith(PAYLOAD)


def _quire_wrappers(server: grpc.aio.Server) -> None:
    """Quire's server wrappers on every handler added to `server` from now on,
    with no credentials asked (the guard's idle bound still holds)."""
    from quire_common.auth import AuthSettings
    from quire_common.call_limits import RequestIdle
    from quire_common.handler_cache import wrap_generic_handlers
    from quire_common.server import ErrorMappingInterceptor
    from quire_gateway.authn import GatewayAuthInterceptor

    no_credentials = AuthSettings(enabled=False, verifier=None, cert_roles={})
    wrappers = [ErrorMappingInterceptor(), GatewayAuthInterceptor(no_credentials, False, idle=RequestIdle(60, 60))]
    wrap_generic_handlers(server, wrappers)


# -- bookie ---------------------------------------------------------------------------


class _Answers:
    """One stream's answers waiting to be sent, and who waits to send them."""

    def __init__(self) -> None:
        self.ready: list[bytes] = []
        self.stored = 0  # levels 0-1: the running count of entries stored
        self.wake: asyncio.Future[None] | None = None


class _BookieWriter:
    """Checks, stores and answers what one bookie's streams queued, on one thread."""

    def __init__(self, level: int, db: rocksdict.Rdict, loop: asyncio.AbstractEventLoop) -> None:
        self.level = level
        self.db = db
        self.loop = loop
        # (its stream, a message, time.perf_counter() when it arrived)
        self.inbox: queue.SimpleQueue[tuple[_Answers, bytes, float]] = queue.SimpleQueue()
        self.synced = rocksdict.WriteOptions()
        self.synced.sync = True
        self.states: dict[LedgerId, LedgerState] = {}
        self.ledger_ids: dict[tuple[int, int], LedgerId] = {}
        self.entries = 0  # in the group commit being staged
        self.histograms: list[Any] = []
        if level >= 4:
            self.histograms = _commit_histograms()

    def run(self) -> None:
        inbox = self.inbox
        while True:
            batch = [inbox.get()]
            while not inbox.empty():
                batch.append(inbox.get_nowait())
            writes = rocksdict.WriteBatch(raw_mode=True)
            self.entries = 0
            answers = [(stream, self._stage(message, writes)) for stream, message, _ in batch]
            started = time.perf_counter()
            self.db.write(writes, self.synced)
            if self.histograms:
                longest_wait, sync, entries = self.histograms
                written = time.perf_counter()
                longest_wait.record(written - min(arrived for _, _, arrived in batch))
                sync.record(written - started)
                entries.record(self.entries)
            self.loop.call_soon_threadsafe(_deliver, answers)

    def _stage(self, message: bytes, writes: rocksdict.WriteBatch) -> bytes | int:
        """Put the message's entries in `writes`; its answer (levels 2+) or its entry count."""
        if self.level < 2:
            return self._stage_raw(message, writes)
        request = bookie_pb2.AddStreamRequest.FromString(message)
        stored: list[int] = []
        for add in request.adds:
            named = add.ledger_id
            ledger_id = self.ledger_ids.get((named.scope_id, named.ledger_id))
            if ledger_id is None:
                ledger_id = self.ledger_ids[named.scope_id, named.ledger_id] = LedgerId(named.scope_id, named.ledger_id)
            entry = add.entries[0]
            entry_id, data = entry.entry_id, entry.data
            scope, ledger, header_entry, lac, digest_matches = header_ids_and_digest(data)
            expected = (ledger_id.scope_id, ledger_id.ledger_id, entry_id)
            if (scope, ledger, header_entry) != expected or not digest_matches:
                raise RuntimeError(f"entry {entry_id} of {ledger_id} failed its checks")
            if self.level >= 4:
                self._apply(ledger_id, add.master_key, entry_id, lac)
            writes.put(ledger_id.key + entry_id.to_bytes(8, "big"), data)
            stored.append(add.add_id)
        self.entries += len(stored)
        return bookie_pb2.AddStreamResponse(stored_add_ids=stored).SerializeToString()

    def _stage_raw(self, message: bytes, writes: rocksdict.WriteBatch) -> int:
        offset, entries = 0, 0
        while offset < len(message):
            ledger, entry, length = RAW.unpack_from(message, offset)
            offset += RAW.size
            data = message[offset : offset + length]
            offset += length
            if self.level >= 1:
                _, header_ledger, header_entry, _, digest_matches = header_ids_and_digest(data)
                if (header_ledger, header_entry) != (ledger, entry) or not digest_matches:
                    raise RuntimeError(f"entry {entry} of {ledger} failed its checks")
            writes.put(KEY.pack(ledger, entry), data)
            entries += 1
        return entries

    def _apply(self, ledger_id: LedgerId, master_key: bytes, entry_id: int, lac: int) -> None:
        """A bookie's state rules for one add, as its writer's fast path runs them."""
        before = self.states.get(ledger_id) or NO_STATE
        if before.master_key and not before.fenced and hmac.compare_digest(before.master_key, master_key):
            self.states[ledger_id] = before.with_entry(entry_id, lac)
        else:  # a ledger's first add here: the journal's own rules (a refusal raises)
            state = with_master_key(ledger_id, before, master_key)
            self.states[ledger_id] = apply_add(ledger_id, [(entry_id, lac, b"")], False, state)


def _commit_histograms() -> list[Any]:
    """A group commit's three samples, as a bookie records them: deferred
    histograms of an OpenTelemetry SDK with a Prometheus reader."""
    from opentelemetry import metrics
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider

    from quire_common.deferred_histogram import deferred_histogram
    from quire_common.telemetry import duration_histogram, meter

    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
    floor_meter = meter("floor.bookie")
    return [
        duration_histogram(floor_meter, "floor.bookie.add.duration", "oldest add's wait"),
        duration_histogram(floor_meter, "floor.bookie.sync.duration", "synced write"),
        deferred_histogram(floor_meter, "floor.bookie.group_commit.entries", "{entry}", "entries per commit"),
    ]


def _deliver(answers: list[tuple[_Answers, bytes | int]]) -> None:
    for stream, answer in answers:
        if isinstance(answer, int):
            stream.stored += answer
            stream.ready.append(COUNT.pack(stream.stored))
        else:
            stream.ready.append(answer)
        if stream.wake is not None and not stream.wake.done():
            stream.wake.set_result(None)
        stream.wake = None


def _bookie(level: int, port: int, data: Path) -> None:
    db = rocksdict.Rdict(str(data), rocksdict.Options(raw_mode=True))
    loop = uvloop.new_event_loop()
    writer = _BookieWriter(level, db, loop)
    writer_thread = threading.Thread(target=writer.run, name="writer", daemon=True)
    writer_thread.start()
    # Named as Quire's bookie names its threads, so that --threads compares them thread by thread.
    name_native_thread(writer_thread, "bookie-writer")

    async def answer(stream: _Answers, context: grpc.aio.ServicerContext) -> None:
        while True:
            if not stream.ready:
                stream.wake = loop.create_future()
                await stream.wake
            ready, stream.ready = stream.ready, []
            for message in ready:
                await context.write(message)

    async def add(requests: object, context: grpc.aio.ServicerContext) -> None:
        name_grpc_poller()  # it starts with the server
        stream = _Answers()
        answering = loop.create_task(answer(stream, context))
        try:
            while (message := await context.read()) is not grpc.aio.EOF:
                writer.inbox.put((stream, message, time.perf_counter()))
        finally:
            answering.cancel()

    try:
        loop.run_until_complete(serve(port, {"Add": grpc.stream_stream_rpc_method_handler(add)}, SERVICE))
    finally:
        db.close()


# -- gateway --------------------------------------------------------------------------


class _Pending:
    """Level 3: an entry as a write handle tracks it, with the bookies that stored it."""

    __slots__ = ("acks", "done", "length", "payload")

    def __init__(self, payload: bytes, length: int, done: asyncio.Future[int]) -> None:
        self.payload = payload
        self.length = length
        self.acks: set[int] = set()
        self.done = done


class _Ledger:
    """One writer's ledger in the gateway: its ids, length and LAC, and (level 3) its pending entries."""

    def __init__(self, ledger: int, cache: EntryCache | None) -> None:
        self.ledger_id = LedgerId(0, ledger)
        self.fields = add_fields(self.ledger_id, MASTER_KEY)
        self.next_entry_id = 0
        self.length = 0
        self.lac = -1
        self.pending: dict[int, _Pending] = {}
        self.cache = cache

    @property
    def last_add_confirmed(self) -> int:
        return self.lac

    def stored(self, entry_id: int, bookie: int) -> None:
        pending = self.pending.get(entry_id)
        if pending is None:
            return
        pending.acks.add(bookie)
        if len(pending.acks) == ACK_QUORUM:
            self.advance()

    def advance(self) -> None:
        """Move the LAC over every entry in a row that has its quorum."""
        lac, unconfirmed = self.lac, self.pending
        confirmed: list[tuple[int, bytes, int]] = []
        pending = unconfirmed.get(lac + 1)
        while pending is not None and len(pending.acks) >= ACK_QUORUM:
            lac += 1
            del unconfirmed[lac]
            confirmed.append((lac, pending.payload, pending.length))
            pending.done.set_result(lac)
            pending = unconfirmed.get(lac + 1)
        self.lac = lac
        if confirmed and self.cache is not None:
            self.cache.put_run(self.ledger_id, 0, confirmed)


class _AddStreamLink(BookieLink):
    """Levels 2+: a link carrying Quire's AddStream messages, each add answered by its id."""

    def __init__(self, index: int, target: str, yields: int, method: str) -> None:
        super().__init__(target, yields, method)
        self._index = index
        self._by_id: dict[int, Any] = {}  # add id -> what its answer settles

    def _message(self, taken: list[tuple[Any, Any]]) -> bytes:
        pieces = []
        for request, settles in taken:
            self._by_id[request.add_id] = settles
            pieces += request.wire
        pieces.append(_STORED_IDS)
        return b"".join(pieces)

    def _answered_by(self, answer: bytes) -> list[Any]:
        by_id = self._by_id
        return [by_id.pop(add_id) for add_id in bookie_pb2.AddStreamResponse.FromString(answer).stored_add_ids]

    def _settle(self, settles: Any) -> None:
        if isinstance(settles, Replicated):
            super()._settle(settles)
        else:  # level 3+: (ledger, entry id)
            settles[0].stored(settles[1], self._index)


class _Gateway:
    def __init__(self, level: int, bookies: list[str], yields: int, method: str) -> None:
        self.level = level
        self.links: list[BookieLink] = [
            _AddStreamLink(i, target, yields, method) if level >= 2 else BookieLink(target, yields, method)
            for i, target in enumerate(bookies)
        ]
        self.bookie_targets = bookies
        self.method = method
        self.ledgers: dict[int, _Ledger] = {}
        self.cache = EntryCache(64 << 20) if level >= 3 else None
        self.loop = asyncio.get_running_loop()

    def ledger(self, ledger: int) -> _Ledger:
        found = self.ledgers.get(ledger)
        if found is None:
            found = self.ledgers[ledger] = _Ledger(ledger, self.cache)
        return found

    def append_raw(self, request: bytes) -> asyncio.Future[None]:
        """Levels 0-1: the client's raw entry, as the prototype takes it."""
        ledger, entry_id, _ = RAW.unpack_from(request)
        entry = Replicated(self.loop.create_future())
        if self.level >= 1:
            state = self.ledger(ledger)
            state.length += len(PAYLOAD)
            packed = pack_entry(state.ledger_id, entry_id, entry_id - 1, state.length, request[RAW.size :], DIGESTER)
            request = RAW.pack(ledger, entry_id, len(packed)) + packed
        for link in self.links:
            link.queue(request, entry)
        return entry.done

    def append(self, request: ledger_pb2.AppendEntriesRequest) -> tuple[int, asyncio.Future[Any]]:
        """Levels 2+: one payload of an AppendEntriesRequest; its id, and its quorum to await."""
        return self.append_payload(self.ledger(request.ledger_id.ledger_id), request.payloads[0])

    def append_payload(self, ledger: _Ledger, payload: bytes) -> tuple[int, asyncio.Future[Any]]:
        entry_id = ledger.next_entry_id
        ledger.next_entry_id += 1
        ledger.length += len(payload)
        packed = pack_entry(ledger.ledger_id, entry_id, ledger.lac, ledger.length, payload, DIGESTER)
        done: asyncio.Future[Any] = self.loop.create_future()
        settles: Any
        if self.level >= 3:
            ledger.pending[entry_id] = _Pending(payload, ledger.length, done)
            settles = (ledger, entry_id)
        else:
            settles = Replicated(done)
        add = AddRequest(ledger.ledger_id, MASTER_KEY, [(entry_id, packed)], fields=ledger.fields)
        for link in self.links:
            link.queue(add, settles)
        return entry_id, done

    def answer(self, request: ledger_pb2.AppendEntriesRequest, entry_id: int) -> ledger_pb2.AppendEntriesResponse:
        lac = self.ledgers[request.ledger_id.ledger_id].lac if self.level >= 3 else entry_id
        return ledger_pb2.AppendEntriesResponse(first_entry_id=entry_id, last_entry_id=entry_id, last_add_confirmed=lac)

    def _session_handler(self) -> Callable[..., AsyncIterator[Any]]:
        """Level 6: the stream served as Quire's servicer serves AppendEntries, by a WriteSession."""
        from quire_api.ids import ledger_id_from_proto
        from quire_gateway.client_streams import chained, first_and_rest
        from quire_gateway.write.session import WriteSession

        ledgers: Any = _QuireHandles(self.bookie_targets, self.method) if self.level >= 7 else _Ledgers(self)

        async def append_session(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            first, rest = await first_and_rest(requests)
            if first is None:
                return
            session = WriteSession(ledgers, ledger_id_from_proto(first.ledger_id), chained(first, rest), False)  # type: ignore[arg-type]
            async for ack in session.acknowledgements():
                yield ledger_pb2.AppendEntriesResponse(
                    first_entry_id=ack.first_entry_id,
                    last_entry_id=ack.last_entry_id,
                    last_add_confirmed=ack.last_add_confirmed,
                )

        return append_session

    def handler(self) -> grpc.RpcMethodHandler:
        if self.level < 2:

            async def append_raw(requests: object, context: grpc.aio.ServicerContext) -> None:
                while (request := await context.read()) is not grpc.aio.EOF:
                    await self.append_raw(request)
                    await context.write(request[: KEY.size])

            return grpc.stream_stream_rpc_method_handler(append_raw)
        serializers = (ledger_pb2.AppendEntriesRequest.FromString, ledger_pb2.AppendEntriesResponse.SerializeToString)
        if self.level < 5:

            async def append(requests: object, context: grpc.aio.ServicerContext) -> None:
                while (request := await context.read()) is not grpc.aio.EOF:
                    entry_id, stored = self.append(request)
                    await stored
                    await context.write(self.answer(request, entry_id))

            return grpc.stream_stream_rpc_method_handler(append, *serializers)

        if self.level >= 6:
            return grpc.stream_stream_rpc_method_handler(self._session_handler(), *serializers)

        async def append_streamed(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            async for request in requests:
                entry_id, stored = self.append(request)
                await stored
                yield self.answer(request, entry_id)

        return grpc.stream_stream_rpc_method_handler(append_streamed, *serializers)


class _Ledgers:
    """Level 6: what Quire's WriteSession asks of the gateway's LedgerOperations,
    served by the prototype's ledgers."""

    def __init__(self, gateway: _Gateway) -> None:
        self._gateway = gateway
        self.handles: dict[LedgerId, _Ledger] = {}

    def owner_here(self, ledger_id: LedgerId) -> None:
        return None

    def append_now(
        self, ledger_id: LedgerId, payloads: list[bytes], expected_entry_id: int | None
    ) -> list[asyncio.Future[Any]]:
        ledger = self.handles.get(ledger_id)
        if ledger is None:
            ledger = self.handles[ledger_id] = self._gateway.ledger(ledger_id.ledger_id)
        return [self._gateway.append_payload(ledger, payload)[1] for payload in payloads]


class _QuireHandles:
    """Level 7: what Quire's WriteSession asks of the gateway's LedgerOperations,
    served by Quire's own WriteHandles, one per ledger, made at its first write,
    over one BookieAddStream per bookie (as scripts/bench_append.py builds them,
    here on the bookies' channels)."""

    def __init__(self, targets: list[str], method: str) -> None:
        from quire_gateway.cluster_calls import ClusterCalls
        from quire_gateway.write.bookie_streams import BookieAddStream
        from quire_gateway.write.explicit_lac import ExplicitLacs

        self._bookie_ids = [f"bookie-{i}" for i in range(len(targets))]

        def opener(target: str) -> Callable[[], Awaitable[Any]]:
            async def open_call() -> Any:
                channel = grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
                return channel.stream_stream(
                    method, request_serializer=None, response_deserializer=bookie_pb2.AddStreamResponse.FromString
                )

            return open_call

        self._streams = {
            bookie_id: BookieAddStream(bookie_id, opener(target), lambda: None)
            for bookie_id, target in zip(self._bookie_ids, targets, strict=True)
        }

        self.add_request = ClusterCalls.add_request
        self._cache = EntryCache(64 << 20)
        self._lacs = ExplicitLacs(0.5, lac_written_at_once)  # the policy's per-entry work, its writes left out
        self.handles: dict[LedgerId, Any] = {}

    def add_sender(self, bookie_id: str) -> Any:
        return self._streams[bookie_id].send

    def owner_here(self, ledger_id: LedgerId) -> None:
        return None

    def append_now(
        self, ledger_id: LedgerId, payloads: list[bytes], expected_entry_id: int | None
    ) -> list[asyncio.Future[Any]] | None:
        from quire_gateway.write.handle import WriteHandle, WriteSettings

        handle = self.handles.get(ledger_id)
        if handle is None:
            metadata = common_pb2.LedgerMetadata(
                ledger_id=common_pb2.LedgerId(scope_id=ledger_id.scope_id, ledger_id=ledger_id.ledger_id),
                ensemble_size=3,
                write_quorum_size=3,
                ack_quorum_size=ACK_QUORUM,
                state=common_pb2.LEDGER_STATE_OPEN,
                last_entry_id=-1,
                digest_type=common_pb2.DIGEST_TYPE_CRC32C,
                password=MASTER_KEY,
                ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=self._bookie_ids)],
            )
            handle = self.handles[ledger_id] = WriteHandle(
                self,  # type: ignore[arg-type]
                None,  # type: ignore[arg-type]  # no ensemble change here: never asked
                ledger_id,
                metadata,
                1,
                WriteSettings(),
                entry_cache=self._cache,
                explicit_lacs=self._lacs,
            )
        return handle.submit_now(payloads, expected_entry_id)

    async def append(
        self, ledger_id: LedgerId, payloads: list[bytes], expected_entry_id: int | None
    ) -> list[asyncio.Future[Any]]:
        return await self.handles[ledger_id].submit(payloads, expected_entry_id)


def lac_written_at_once(bookie_id: str, ledger_id: LedgerId, master_key: bytes, lac: int) -> asyncio.Future[int]:
    """An explicit LAC write that a bookie answered at once (level 7 sends none)."""
    written: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    written.set_result(lac)
    return written


def ledgers_on_calls(calls: list[Any], yields: int = 20) -> _Ledgers:
    """Level 6's ledgers, what Quire's WriteSession asks of the gateway, each
    bookie link writing on one of `calls` instead of a channel (scripts/bench_append.py
    --path session)."""
    gateway = _Gateway(6, [f"stand-in-{i}" for i in range(len(calls))], yields, QUIRE_ADD_STREAM)
    for link, call in zip(gateway.links, calls, strict=True):
        link.start(call)
    return _Ledgers(gateway)


def gateway_on_calls(
    calls: list[Any], yields: int = 20
) -> Callable[[ledger_pb2.AppendEntriesRequest], Awaitable[ledger_pb2.AppendEntriesResponse]]:
    """Levels 3 to 5's gateway (they differ only in the bookies and the server's wrappers),
    each bookie link writing on one of `calls` instead of a channel: the write path alone, in
    one process (scripts/bench_append.py --path prototype). Returns the stream handler's step
    for one request: its answer, once the entry has its quorum."""
    gateway = _Gateway(5, [f"stand-in-{i}" for i in range(len(calls))], yields, QUIRE_ADD_STREAM)
    for link, call in zip(gateway.links, calls, strict=True):
        link.start(call)

    async def append(request: ledger_pb2.AppendEntriesRequest) -> ledger_pb2.AppendEntriesResponse:
        entry_id, stored = gateway.append(request)
        await stored
        return gateway.answer(request, entry_id)

    return append


def _gateway(level: int, port: int, bookies: list[str], yields: int, method: str) -> None:
    async def run() -> None:
        gateway = _Gateway(level, bookies, yields, method)
        for link in gateway.links if level < 7 else ():  # level 7's own streams open at its first add
            link.start()
        await serve(port, {"Append": gateway.handler()}, SERVICE, _quire_wrappers if level >= 5 else None)

    uvloop.run(run())


# -- client and runner ----------------------------------------------------------------


def _append_call(level: int) -> Callable[[grpc.aio.Channel, int], Append]:
    """A writer's append of one entry on its stream, raw or as Quire's messages."""

    def make_append(channel: grpc.aio.Channel, ledger: int) -> Append:
        if level < 2:
            call = channel.stream_stream(f"/{SERVICE}/Append")()

            async def append_raw(entry: int) -> None:
                await call.write(RAW.pack(ledger, entry, len(PAYLOAD)) + PAYLOAD)
                if await call.read() != KEY.pack(ledger, entry):
                    raise RuntimeError(f"entry {ledger}/{entry} was not acknowledged")

            return append_raw
        call = channel.stream_stream(
            f"/{SERVICE}/Append",
            request_serializer=ledger_pb2.AppendEntriesRequest.SerializeToString,
            response_deserializer=ledger_pb2.AppendEntriesResponse.FromString,
        )()
        request = ledger_pb2.AppendEntriesRequest(ledger_id=common_pb2.LedgerId(ledger_id=ledger), payloads=[PAYLOAD])

        async def append(entry: int) -> None:
            await call.write(request)
            answer = await call.read()
            if answer is grpc.aio.EOF or answer.last_entry_id != entry:
                raise RuntimeError(f"entry {ledger}/{entry} answered {answer}")

        return append

    return make_append


def _prototype_bookies(level: int, data: Path, processes: dict[str, subprocess.Popen[bytes]]) -> list[str]:
    """Start the prototype's three bookies; their targets."""
    ports = [free_port() for _ in range(3)]
    for i, port in enumerate(ports):
        role = ["--role", "bookie", "--port", str(port), "--data", str(data / f"bookie-{i}")]
        processes[f"bookie-{i + 1}"] = subprocess.Popen([sys.executable, __file__, "--level", str(level), *role])
    time.sleep(2)
    return [f"127.0.0.1:{port}" for port in ports]


def _measure(level: int, args: argparse.Namespace) -> None:
    """One measurement on fresh processes: the prototype's bookies, or with
    --quire-bookies a local Quire cluster's (its own gateway left idle)."""
    data = Path(tempfile.mkdtemp(prefix="floor-features-"))
    processes: dict[str, subprocess.Popen[bytes]] = {}
    cluster: LocalCluster | None = None
    pids: dict[str, int] = {}
    try:
        if args.quire_bookies:
            ports = Ports.free(3)
            cluster = LocalCluster(data / "quire", ports)
            cluster.start(120)
            targets = [f"127.0.0.1:{port}" for port in ports.bookies]
            pids = {name: pid for name in ("bookie-1", "bookie-2", "bookie-3") if (pid := cluster.pid(name))}
            method = QUIRE_ADD_STREAM
        else:
            targets = _prototype_bookies(level, data, processes)
            method = f"/{SERVICE}/Add"
        gateway_port = free_port()
        role = ["--role", "gateway", "--port", str(gateway_port), "--bookies", ",".join(targets)]
        role += ["--yields", str(args.yields), "--bookie-method", method]
        processes["gateway"] = subprocess.Popen([sys.executable, __file__, "--level", str(level), *role])
        time.sleep(2)
        pids.update({name: process.pid for name, process in processes.items()})
        target = f"127.0.0.1:{gateway_port}"
        split = ("gateway", "bookie-1") if args.threads else ()
        phase = uvloop.run(closed_loop(target, args.writers, args.seconds, pids, _append_call(level), split))
        name = LEVELS[level] + (", Quire's bookies" if cluster else "")
        print(f"level {level} ({name}): {phase.summary()}", flush=True)
        if split:
            print(phase.by_thread(), flush=True)
    finally:
        stop_processes(processes)
        if cluster is not None:
            cluster.stop()
    try:
        if cluster is None:
            directories = [data / f"bookie-{i}" for i in range(3)]
            stored_key, holds = functools.partial(_stored_key, level), functools.partial(_holds_payload, level)
            print(f"        {verify_copies(directories, phase.acked, stored_key, holds)}", flush=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = prototype_arguments(__doc__.split("\n\n")[0], "times each level is measured, alternating")
    parser.add_argument("--levels", default="0,1,2,3,4,5,6,7", help="levels to measure, comma-separated (0-7)")
    parser.add_argument(
        "--quire-bookies",
        action="store_true",
        help="Quire's own bookies (a local cluster's) behind the prototype's gateway",
    )
    parser.add_argument("--threads", action="store_true", help="also each thread's CPU per entry, gateway and bookie-1")
    parser.add_argument("--level", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--bookie-method", default=f"/{SERVICE}/Add", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bookie":
        _bookie(args.level, args.port, args.data)
        return
    if args.role == "gateway":
        _gateway(args.level, args.port, args.bookies.split(","), args.yields, args.bookie_method)
        return
    try:
        levels = [int(level) for level in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels: {args.levels!r} is not a list of numbers")
    if not set(levels) <= set(range(len(LEVELS))):
        parser.error(f"--levels: {args.levels!r}; levels are 0 to {len(LEVELS) - 1}")
    if args.quire_bookies and min(levels) < 2:
        parser.error("--quire-bookies: Quire's bookies speak Quire's messages, levels 2 and up")
    for _ in range(args.rounds):
        for level in levels:
            _measure(level, args)


if __name__ == "__main__":
    main()
