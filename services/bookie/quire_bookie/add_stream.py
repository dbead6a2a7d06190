"""One writer's AddStream: adds of many ledgers arrive in messages, each is
checked and queued for group commit as soon as it arrives, and results go back
in batches as they complete. No grpc here: the servicer turns messages into
StreamedAdds and AddOutcomes into messages.

Why a stream: with one unary AddEntries call per entry, a writer that has one
entry in flight per ledger pays a whole RPC (a call object, metadata, an
interceptor chain, a task) per entry per bookie. On the stream, everything the
writer has pending for this bookie arrives in one message, every add in it is
queued before the next flush, and the acks of one flush leave in one message.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass

from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from quire_api.errors import QuireError
from quire_api.ids import LedgerId
from quire_bookie.bookie import Bookie
from quire_bookie.journal import AddGroup
from quire_common.telemetry import tracer, tracing_enabled

_tracer = tracer(__name__)
# One span per streamed add when tracing is on: what the telemetry stage reads
# a bookie's add load and latency from (as from AddEntries' server spans).
ADD_SPAN = "bookie.add"
_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(slots=True)
class StreamedAdd:
    add_id: int
    ledger_id: LedgerId
    master_key: bytes
    entries: list[tuple[int, bytes]]
    recovery: bool
    refused: QuireError | None = None  # found invalid while decoding: answered with this, not stored
    traceparent: str = ""  # the writer's span, when it traces


@dataclass(frozen=True, slots=True)
class AddOutcome:
    add_id: int
    error: QuireError | None = None  # None: every entry of the add is durable


class AddStreamSession:
    """Runs one AddStream. Adds are queued in arrival order (so one ledger's
    adds keep their order); an add refused by its checks or by the ledger's
    state fails alone. The adds of one message are answered together, once
    the last of them is settled (usually by one group commit), so a message
    costs one wakeup here, not one per add. When the bookie stops, the stream
    ends once the adds already queued are answered. When the committer's
    queue is full, the session stops taking messages until it has room, so a
    writer faster than the disk is held back by the stream's flow control
    rather than by memory here."""

    def __init__(self, bookie: Bookie) -> None:
        self.bookie = bookie
        self._completed: list[AddOutcome] = []
        self._wake = asyncio.Event()
        self._unanswered = 0  # messages queued and not yet answered
        self._requests_done = False
        self._request_error: BaseException | None = None
        self._traced = tracing_enabled()
        self._taker: asyncio.Task[None] | None = None

    @staticmethod
    def _trace(add: StreamedAdd) -> Span:
        parent = _PROPAGATOR.extract({"traceparent": add.traceparent}) if add.traceparent else None
        return _tracer.start_span(
            ADD_SPAN,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "quire.ledger": str(add.ledger_id),
                "quire.entries": len(add.entries),
                "quire.bytes": sum(len(data) for _, data in add.entries),
            },
        )

    def _answer(self, adds: list[StreamedAdd], spans: list[Span], group: AddGroup) -> None:
        """Every add of a message is settled: queue its answers."""
        for index, (add, error) in enumerate(zip(adds, group.errors, strict=True)):
            if error is not None and not isinstance(error, QuireError):
                error = QuireError(f"the add failed: {error!r}")
            self._completed.append(AddOutcome(add.add_id, error))
            if spans:
                if error is not None:
                    spans[index].set_status(Status(StatusCode.ERROR))
                spans[index].end()
        self._unanswered -= 1
        self._wake.set()

    async def _take(self, messages: AsyncIterator[list[StreamedAdd]]) -> None:
        try:
            async for adds in messages:
                spans = [self._trace(add) for add in adds] if self._traced else []
                group = AddGroup(len(adds), functools.partial(self._answer, adds, spans))
                valid = []
                for index, add in enumerate(adds):
                    if add.refused is not None:
                        group.settle(index, add.refused)
                    else:
                        valid.append((index, add.ledger_id, add.master_key, add.entries, add.recovery))
                # Checked one by one, queued together: one wait for queue space per message.
                await self.bookie.start_adds(valid, group)
                # Counted once queued (nothing settles it by a flush before this line runs): a
                # message cut off while waiting for queue space (the bookie stopping) is never
                # answered, and the writer's deadline covers it.
                self._unanswered += 1
        except BaseException as exc:  # the stream broke or a message was malformed: end it
            self._request_error = exc
        finally:
            self._requests_done = True
            self._wake.set()

    async def run(self, messages: AsyncIterator[list[StreamedAdd]]) -> AsyncIterator[list[AddOutcome]]:
        """Outcomes, batched as they complete, until the writer ends its side
        and every add it sent is answered."""
        taker = asyncio.create_task(self._take(messages))
        self._taker = taker
        self.bookie.add_shutdown_listener(self.stop)
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._completed:
                    completed, self._completed = self._completed, []
                    yield completed
                if self._requests_done and not self._unanswered and not self._completed:
                    if self._request_error is not None and not isinstance(self._request_error, asyncio.CancelledError):
                        raise self._request_error
                    return
        finally:
            self.bookie.remove_shutdown_listener(self.stop)
            taker.cancel()

    def stop(self) -> None:
        """The bookie is stopping: take no more adds, answer the ones queued,
        then end the stream (the writer sees it end and goes elsewhere) rather
        than hold the server's shutdown until its grace period runs out."""
        if self._taker is not None:
            self._taker.cancel()
