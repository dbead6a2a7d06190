"""One writer's AddStream: adds of many ledgers arrive in messages; each
message is queued whole for the bookie's writer thread, which decodes it,
checks every add, writes the accepted ones in its next group commit and
builds the message's answer; the event loop only receives, queues and sends.
No grpc here: the servicer gives the codec that turns messages into adds
(journal.DecodedAdd: a StreamedAdd, or a OneEntryAdd for a writer's usual
add) and outcomes into answers.

Why a stream: with one unary AddEntries call per entry, a writer that has one
entry in flight per ledger pays a whole RPC (a call object, metadata, an
interceptor chain, a task) per entry per bookie. On the stream, everything the
writer has pending for this bookie arrives in one message and its answer
leaves in one message. Why the writer thread does the per-add work: on the
event loop each add cost a few objects, a check and a settle between gRPC's
own wakeups; there the loop's share of a 1 KiB add was about 40 µs at ten
adds per message, handed whole to the writer thread it is about 17
(docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from quire_api.errors import QuireError
from quire_bookie.bookie import Bookie
from quire_bookie.journal import AddMessage, DecodedAdd, StreamedAdd, entries_of
from quire_common.telemetry import tracer, tracing_enabled

__all__ = ["ADD_SPAN", "AddStreamCall", "AddStreamCodec", "DecodedAdd", "StreamedAdd"]

_tracer = tracer(__name__)
# One span per streamed add when tracing is on: what the telemetry stage reads
# a bookie's add load and latency from (as from AddEntries' server spans).
ADD_SPAN = "bookie.add"
_PROPAGATOR = TraceContextTextMapPropagator()


Message = TypeVar("Message", contravariant=True)


class AddStreamCodec(Protocol[Message]):
    """The wire side of a stream (servicer.py): what its messages are, how
    adds come out of one and its answer is made. `decode` and `encode` run
    on the bookie's writer thread, `size` on the event loop."""

    def decode(self, message: Message) -> list[DecodedAdd]: ...

    def encode(self, message: Message, adds: list[DecodedAdd], errors: list[QuireError | None]) -> bytes: ...

    def size(self, message: Message) -> int: ...


class AddStreamCall:
    """Runs one AddStream. Messages are queued in arrival order (so one
    ledger's adds keep their order); an add refused by its checks or by the
    ledger's state fails alone, in its message's answer. When the bookie
    stops, the stream ends once the messages already queued are answered.
    When the writer's queue is full, the call stops taking messages until
    it has room, so a writer faster than the disk is held back by the
    stream's flow control rather than by memory here."""

    def __init__(self, bookie: Bookie, codec: AddStreamCodec[Any]) -> None:
        self.bookie = bookie
        self._codec = codec
        self._ready: list[bytes] = []  # answers to send, encoded, in order
        self._wake: asyncio.Future[None] | None = None
        self._unanswered = 0  # messages queued and not yet answered
        self._requests_done = False
        self._request_error: BaseException | None = None
        self._broken: BaseException | None = None
        self._traced = tracing_enabled()
        self._taker: asyncio.Task[None] | None = None

    # -- on the writer thread ----------------------------------------------------

    def decode(self, message: object) -> list[DecodedAdd]:
        return self._codec.decode(message)

    def answer(self, message: AddMessage, adds: list[DecodedAdd], errors: list[QuireError | None]) -> bytes:
        if self._traced:
            self._trace(message, adds, errors)
        return self._codec.encode(message.message, adds, errors)

    @staticmethod
    def _trace(message: AddMessage, adds: list[DecodedAdd], errors: list[QuireError | None]) -> None:
        """One span per add, from its message's arrival to its answer."""
        started_ns = time.time_ns() - int((time.perf_counter() - message.received_at) * 1e9)
        for add, error in zip(adds, errors, strict=True):
            traceparent = add.traceparent if isinstance(add, StreamedAdd) else ""
            entries = entries_of(add)
            parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
            span = _tracer.start_span(
                ADD_SPAN,
                context=parent,
                kind=SpanKind.SERVER,
                start_time=started_ns,
                attributes={
                    "quire.ledger": str(add[1]),
                    "quire.entries": len(entries),
                    "quire.bytes": sum(len(data) for _, data in entries),
                },
            )
            if error is not None:
                span.set_status(Status(StatusCode.ERROR))
            span.end()

    # -- on the event loop ---------------------------------------------------------

    def _wake_up(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            if not wake.done():
                wake.set_result(None)

    def deliver(self, answer: bytes) -> None:
        """A message is answered: queue its answer to send."""
        self._ready.append(answer)
        self._unanswered -= 1
        self._wake_up()

    def broken(self, error: BaseException) -> None:
        """A message could not be answered: end the stream with `error`."""
        self._broken = error
        self._unanswered -= 1
        self._wake_up()

    async def _take(self, messages: AsyncIterator[object]) -> None:
        size = self._codec.size
        try:
            async for message in messages:
                await self.bookie.queue_add_message(AddMessage(self, message, size(message), time.perf_counter()))
                # Counted once queued (its answer is delivered by a later loop callback): a
                # message cut off while waiting for queue space (the bookie stopping) is never
                # answered, and the writer's deadline covers it.
                self._unanswered += 1
        except BaseException as exc:  # the stream broke or a message was malformed: end it
            self._request_error = exc
        finally:
            self._requests_done = True
            self._wake_up()

    async def run(self, messages: AsyncIterator[object]) -> AsyncIterator[bytes]:
        """Answers, in order, until the writer ends its side and every
        message it sent is answered."""
        loop = asyncio.get_running_loop()
        taker = asyncio.create_task(self._take(messages))
        self._taker = taker
        self.bookie.add_shutdown_listener(self.stop)
        try:
            while True:
                if self._ready:
                    ready, self._ready = self._ready, []
                    for answer in ready:
                        yield answer
                    continue
                if self._broken is not None:
                    raise self._broken
                if self._requests_done and not self._unanswered:
                    if self._request_error is not None and not isinstance(self._request_error, asyncio.CancelledError):
                        raise self._request_error
                    return
                self._wake = loop.create_future()
                await self._wake
        finally:
            self.bookie.remove_shutdown_listener(self.stop)
            taker.cancel()

    def stop(self) -> None:
        """The bookie is stopping: take no more messages, answer the ones
        queued, then end the stream (the writer sees it end and goes
        elsewhere) rather than hold the server's shutdown until its grace
        period runs out."""
        if self._taker is not None:
            self._taker.cancel()
