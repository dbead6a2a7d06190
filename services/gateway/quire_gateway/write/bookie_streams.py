"""The gateway's add path to bookies: one long-lived AddStream per bookie,
shared by every ledger this gateway writes (bookie.proto, AddStream).

This is the one owner of the write path's batching and flow control per
bookie. `BookieAddStream.send` queues an add with a callback (a writer's
handle hands its entries over and counts the answers itself: no task or
future per add); `add` does the same and awaits the result (recovery and
repair). A sender task puts everything queued for the bookie, from every
ledger, into one message (up to a byte bound), keeping one message unanswered
while messages are small, so sixteen ledgers with one entry each in flight
cost one message, not sixteen calls; a receiver task settles the adds the
bookie answers, many per message.

Bounds: adds sent and not answered hold at most `max_unanswered_bytes` per
bookie; past it the sender waits and what is queued stays with the writers
(references to their packed entries, which their own in-flight bound caps),
so a slow or hung bookie slows its writers instead of growing this gateway's
memory; `add` also waits for room before queueing. Each add has a
deadline like a unary call's, from when it is sent: past it the add fails
UNAVAILABLE (the handle then retries or replaces the bookie), a late answer
is ignored, and the adds queued behind it fail with it (the bookie has
stopped answering). Waiting in the queue behind a busy but answering bookie
is back-pressure, not failure: a burst of large batches that takes the disk
longer than the deadline to drain is not mistaken for a dead bookie. A bookie
that stops reading (paused, or its host gone silent) fills the stream's
flow-control window, and a message's write then never ends: once every add of
the message being written is past its deadline, the stream counts as broken,
so that adds queued since (a writer's retries) cannot wait behind that write
for ever. A stream that breaks fails every add waiting on it UNAVAILABLE; the
next add opens a new one (on a fresh channel if the bookie registered again
meanwhile).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

import grpc
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from quire_api.errors import QuireError, Reason, Unavailable
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.channels import error_from_result, error_from_rpc
from quire_common.telemetry import tracing_enabled
from quire_common.wire import U64, varint
from quire_gateway import metrics
from quire_proto.bookie.v1 import bookie_pb2

log = logging.getLogger(__name__)

# Request messages sent and not fully answered, per bookie. While one is in
# flight, adds wait and leave together in the next message: under load that
# turns many small messages into a few large ones (each message costs both
# sides a round of wakeups), and an idle stream sends at once. Once a full
# message's worth (FULL_MESSAGE_BYTES) is waiting, further messages go out up
# to MAX_MESSAGES_IN_FLIGHT, so large entries and batches are pipelined rather
# than held back a round trip each.
MAX_MESSAGES_IN_FLIGHT = 4
FULL_MESSAGE_BYTES = 1024 * 1024
# Before a message leaves, the sender lets the event loop run this many
# rounds: client requests that gRPC has already read get to queue their adds
# and leave in this message instead of the next. At 16 one-entry writers
# (1 KiB, 3 bookies) 0 rounds gave 8 entries per message and 512 us of server
# CPU per entry, 3 rounds 10 and 458, 5 rounds 10.4 and 433, 8 rounds 11 and
# 431. A unary AddEntry reaches the sender over more rounds than a stream's
# message (the call's accept, its task, its read): at 16 unary writers 20
# rounds gave 1,474-1,556 adds/s against 1,336-1,428 with 5, each bookie's
# writer thread 76-80 us per entry against 91-96; AppendEntries at 1, 16 and
# 64 writers and at 64 KiB measured alike with 5, 12 and 20.
YIELDS_BEFORE_SENDING = 20
# Once this many messages in a row carried one add each (a lone writer:
# nobody joins), the next leaves without waiting. At one writer the 20 rounds
# held each entry 110-120 us before it left (the prototype's sender 30), 2
# rounds 69-83. Against 2 rounds, none gave a one-writer p50 of 1.11-1.17 ms
# against 1.14-1.22 and p99 1.80-1.90 against 1.84-2.07 (six alternating
# pairs, `quire bench --local --writers 1`). At 16 writers, unary or streamed,
# four lone messages in a row came 9 times in 9,687 messages: they batch as
# before.
LONE_ADDS_BEFORE_SENDING_AT_ONCE = 4
# How often adds past their deadline are looked for (so a deadline is met within this).
SWEEP_SECONDS = 0.1


_PROPAGATOR = TraceContextTextMapPropagator()


def _loop_rounds(loop: asyncio.AbstractEventLoop, rounds: int) -> asyncio.Future[None]:
    """A future its awaiter resumes from `rounds` turns of `loop` later (at
    least 2), as after that many `asyncio.sleep(0)`: callbacks cost less than
    as many task steps, and the loop's own call_soon, scheduled by itself
    turn after turn, costs no Python call until the last."""
    if rounds < 2:
        raise ValueError(f"{rounds} rounds: a future set this turn would not suspend its awaiter")
    done: asyncio.Future[None] = loop.create_future()
    # Each turn's call_soon schedules the rest of the chain for the next; _resolve runs in
    # turn rounds - 1, so the awaiter resumes in turn `rounds`.
    call_soon: Callable[..., object] = loop.call_soon  # a chain of itself: past what its type can say
    call_soon(*[call_soon] * (rounds - 2), _resolve, done)
    return done


def _resolve(done: asyncio.Future[None]) -> None:
    if not done.done():  # not cancelled meanwhile
        done.set_result(None)


def _traceparent() -> str:
    """The current span's W3C traceparent, carried per add as a unary call
    carries it in its metadata."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent", "")


# What an add's sender is told when the add is done on a bookie: which bookie,
# and None once it has the add durably, else why not. One callback may serve
# every bookie of the add's write set.
AddDone = Callable[[str, QuireError | None], None]
# Queues an add on one bookie's stream (BookieAddStream.send): the add, its
# deadline in seconds once sent, and whom to tell.
AddSender = Callable[["AddRequest", float, AddDone], None]


class AddRequest:
    """One add as every bookie of its write set receives it: its wire form is
    built once and shared by their streams. Ids come from one counter per
    gateway, so an id is unique on every stream it is sent on."""

    __slots__ = (
        "add_id",
        "entries",
        "ledger_id",
        "master_key",
        "recovery",
        "size",
        "traceparent",
        "wire",
    )

    def __init__(
        self,
        ledger_id: LedgerId,
        master_key: bytes,
        entries: list[tuple[int, bytes]],  # references to the writer's packed entries: no copy until sent
        recovery: bool = False,
        fields: bytes | None = None,  # the writer's add_fields(ledger_id, master_key), encoded once per ledger
    ) -> None:
        self.add_id = add_id = next(_add_ids)
        self.ledger_id = ledger_id
        self.master_key = master_key
        self.entries = entries
        self.recovery = recovery
        self.traceparent = _traceparent() if tracing_enabled() else ""
        if fields is None or recovery or self.traceparent:
            fields = add_fields(ledger_id, master_key, recovery, self.traceparent)
        # This add as it appears in an AddStreamRequest (one element of its `adds` field), in
        # pieces to be joined into a message, built here once for every stream it goes on: the
        # packed entries are pieces of their own, referenced rather than copied, so a bookie's
        # message is the one copy of an entry's bytes the gateway makes (a protobuf built per
        # add copied a 64 KiB entry five times).
        head = _ADD_ID_TAG + varint(add_id) + fields
        pieces = [b"", head]  # the first piece is the add's own tag and length, once they are known
        length = len(head)
        size = 0
        framings = _entry_framings
        for entry_id, data in entries:
            data_length = len(data)
            id_varint = varint(entry_id & U64)
            framing = framings.get(key := (len(id_varint), data_length)) or _entry_framing(*key)
            entry_field = framing[0] + id_varint + framing[1]
            pieces += (entry_field, data)
            length += len(entry_field) + data_length
            size += data_length
        pieces[0] = _ADDS_FIELD_TAG + varint(length)
        self.size = size
        self.wire = pieces


def add_fields(ledger_id: LedgerId, master_key: bytes, recovery: bool = False, traceparent: str = "") -> bytes:
    """A StreamedAdd's fields but its id and entries, encoded by protobuf's
    encoder: the same for every add a writer sends (no trace, no recovery),
    so a writer encodes them once per ledger rather than once per add."""
    return bookie_pb2.StreamedAdd(
        ledger_id=ledger_id_to_proto(ledger_id), master_key=master_key, recovery=recovery, traceparent=traceparent
    ).SerializeToString()


_add_ids = itertools.count(1)

# AddStreamRequest's wire format, written here: its messages are joined from
# adds encoded once (AddRequest.wire) rather than built as protobufs.
_ADDS_FIELD_TAG = b"\x0a"  # AddStreamRequest field 1 (adds), length-delimited
_ADD_ID_TAG = b"\x08"  # StreamedAdd field 1 (add_id), varint
_STORED_IDS = b"\x10\x01"  # AddStreamRequest field 2 (stored_ids) = true: stored adds answered in one packed list
_ENTRIES_TAG = b"\x22"  # StreamedAdd field 4 (entries), length-delimited
_ENTRY_ID_TAG = b"\x08"  # PackedEntry field 1 (entry_id), varint
_DATA_TAG = b"\x12"  # PackedEntry field 2 (data), length-delimited
_ADD_STREAM_METHOD = "/{}/AddStream".format(bookie_pb2.DESCRIPTOR.services_by_name["BookieService"].full_name)

AddStreamCallable: TypeAlias = grpc.aio.StreamStreamMultiCallable


def add_stream_callable(channel: grpc.aio.Channel) -> AddStreamCallable:
    """A bookie's AddStream on `channel`, sending requests already encoded."""
    return channel.stream_stream(
        _ADD_STREAM_METHOD, request_serializer=None, response_deserializer=bookie_pb2.AddStreamResponse.FromString
    )


# A PackedEntry's framing around its id's varint, by (that varint's length, the data's length):
# the entries field's tag, the PackedEntry's length and the entry_id tag before it, the data's
# tag and length after it. Entries of one size share it, so an entry's wire form is joined
# from two lookups and one varint (0.51 against 0.83 µs for each entry of an add of 100).
_entry_framings: dict[tuple[int, int], tuple[bytes, bytes]] = {}
_MAX_ENTRY_FRAMINGS = 4096  # then the table starts again rather than grow


def _entry_framing(id_varint_length: int, data_length: int) -> tuple[bytes, bytes]:
    data_framing = _DATA_TAG + varint(data_length)
    packed_entry_length = len(_ENTRY_ID_TAG) + id_varint_length + len(data_framing) + data_length
    framing = (_ENTRIES_TAG + varint(packed_entry_length) + _ENTRY_ID_TAG, data_framing)
    if len(_entry_framings) >= _MAX_ENTRY_FRAMINGS:
        _entry_framings.clear()
    _entry_framings[(id_varint_length, data_length)] = framing
    return framing


class _Add(NamedTuple):
    """An AddRequest on one stream, until that bookie answers it. A tuple made by
    tuple.__new__: one is made for every add to every bookie."""

    request: AddRequest
    on_done: AddDone
    timeout_seconds: float  # from when it is sent


_new_add = tuple.__new__


@dataclass(eq=False, slots=True)
class _Message:
    """A request message sent and not yet fully answered. What is counted per
    add elsewhere (the message it left in, when that was) is counted here once
    per message: a message can carry hundreds of adds."""

    adds: dict[int, _Add]  # its adds not yet answered, by id
    sent_at: float  # loop time: each add's deadline runs from here


class BookieAddStream:
    def __init__(
        self,
        bookie_id: str,
        open_call: Callable[[], Awaitable[AddStreamCallable]],
        on_broken: Callable[[], None],
        *,
        max_message_bytes: int = 4 * 1024 * 1024,
        max_unanswered_bytes: int = 64 * 1024 * 1024,
        max_messages_in_flight: int = MAX_MESSAGES_IN_FLIGHT,
    ) -> None:
        self.bookie_id = bookie_id
        self._open_call = open_call
        self._on_broken = on_broken
        self._max_message_bytes = max_message_bytes
        self._max_unanswered_bytes = max_unanswered_bytes
        # Adds queued and not sent, oldest first, and their bytes.
        self._outgoing: deque[_Add] = deque()
        self._outgoing_bytes = 0
        # Messages sent and not fully answered, oldest first, and the bytes of their adds not answered.
        self._in_flight: deque[_Message] = deque()
        self._sent_bytes = 0
        self._room = asyncio.Event()
        self._room.set()
        # The sender waiting for adds to send, woken by `send`: a plain future rather than an
        # asyncio.Event, whose set() is a Python call for each add to each bookie.
        self._sender_idle: asyncio.Future[None] | None = None
        self._max_messages_in_flight = max_messages_in_flight
        self._window = asyncio.Event()  # set when a message in flight is fully answered
        self._writing: _Message | None = None  # the message whose write has not ended yet
        self._sweep: asyncio.TimerHandle | None = None
        self._call: grpc.aio.StreamStreamCall | None = None
        self._opener: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.messages_sent = 0
        self._lone_adds_in_a_row = 0  # messages sent in a row that carried one add each
        self.adds_sent = 0

    @property
    def _unanswered_bytes(self) -> int:
        """Bytes of the adds queued or sent and not answered: what `max_unanswered_bytes` bounds."""
        return self._outgoing_bytes + self._sent_bytes

    def send(self, request: AddRequest, timeout_seconds: float, on_done: AddDone) -> None:
        """Queue `request` for the bookie; `on_done` is called once its entries
        are durable there (None) or with the QuireError the bookie answered, or
        UNAVAILABLE `timeout_seconds` after it is sent without an answer (or
        queued behind one such) or when the stream breaks. No task
        or future per add: the writer's handle counts the answers itself."""
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_SECONDS, self._expire_overdue)
        self._outgoing.append(_new_add(_Add, (request, on_done, timeout_seconds)))
        self._outgoing_bytes += request.size
        if self._call is None:
            if self._opener is None:
                self._opener = asyncio.create_task(self._open(), name=f"add-stream-open-{self.bookie_id}")
            return  # the opened stream's sender takes it
        idle = self._sender_idle
        if idle is not None:
            self._sender_idle = None
            if not idle.done():
                idle.set_result(None)
        if self._outgoing_bytes >= FULL_MESSAGE_BYTES:
            self._window.set()  # a full message waits: the sender may pipeline it

    async def add(
        self,
        ledger_id: LedgerId,
        master_key: bytes,
        entries: list[tuple[int, bytes]],
        recovery: bool,
        timeout_seconds: float,
    ) -> None:
        """Store `entries` on the bookie; returns once they are durable there,
        raises the QuireError the bookie answered (or UNAVAILABLE). Waits for
        room first while `max_unanswered_bytes` are unanswered."""
        size = sum(len(data) for _, data in entries)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds
        while self._unanswered_bytes and self._unanswered_bytes + size > self._max_unanswered_bytes:
            self._room.clear()
            try:
                await asyncio.wait_for(self._room.wait(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise Unavailable(
                    f"bookie {self.bookie_id} did not take adds for {timeout_seconds}s "
                    f"({self._unanswered_bytes} bytes unanswered)",
                    Reason.BOOKIE_UNAVAILABLE,
                ) from None
        done: asyncio.Future[None] = loop.create_future()

        def settled(bookie_id: str, error: QuireError | None) -> None:
            if done.done():
                return  # the waiting caller was cancelled
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        self.send(AddRequest(ledger_id, master_key, entries, recovery), max(0.0, deadline - loop.time()), settled)
        await done

    def _answered(self, add_ids: Iterable[int]) -> list[_Add]:
        """Take the adds of `add_ids` out of the messages in flight (ids answered,
        expired or failed already are passed over) and count the bytes and
        messages that frees, once for all of them: an answer can cover hundreds
        of adds. The caller tells their senders."""
        in_flight = self._in_flight
        if not in_flight:
            return []
        oldest = in_flight[0].adds  # an answer's adds are nearly always the oldest message's
        answered: list[_Add] = []
        freed = 0
        for add_id in add_ids:
            pending = oldest.pop(add_id, None)
            if pending is None:
                pending = self._take_from_any_message(add_id)
                if pending is None:
                    continue
            answered.append(pending)
            freed += pending.request.size
        if answered:
            self._sent_bytes -= freed
            self._drop_answered_messages()
            self._made_room()
        return answered

    def _take_from_any_message(self, add_id: int) -> _Add | None:
        for message in self._in_flight:
            pending = message.adds.pop(add_id, None)
            if pending is not None:
                return pending
        return None

    def _drop_answered_messages(self) -> None:
        """Messages whose every add is answered leave the window (so the sender may send)."""
        in_flight = self._in_flight
        if all(message.adds for message in in_flight):
            return
        self._in_flight = deque(message for message in in_flight if message.adds)
        self._window.set()

    def _made_room(self) -> None:
        if not self._room.is_set() and self._unanswered_bytes < self._max_unanswered_bytes:
            self._room.set()

    def _tell(self, answered: list[_Add], error: QuireError | None) -> None:
        bookie_id = self.bookie_id
        for pending in answered:
            try:
                pending.on_done(bookie_id, error)
            except Exception:  # a writer's bug must not stop the answers to every other writer
                log.exception(
                    "the sender of add %d to bookie %s failed on its answer", pending.request.add_id, bookie_id
                )

    def _take_every_add(self) -> list[_Add]:
        """Every add sent and not answered, then every add queued, out of the
        stream, with nothing left counted: to fail them all."""
        every = [pending for message in self._in_flight for pending in message.adds.values()]
        every += self._outgoing
        self._in_flight.clear()
        self._sent_bytes = 0
        self._outgoing.clear()
        self._outgoing_bytes = 0
        self._window.set()
        self._made_room()
        return every

    def _expire_overdue(self) -> None:
        """Fail the sent adds whose deadline has passed, and with them the
        adds queued behind them. One periodic check per stream while adds
        are unanswered, rather than a timer per add."""
        self._sweep = None
        now = asyncio.get_running_loop().time()
        overdue = [
            pending
            for message in self._in_flight
            for pending in message.adds.values()
            if message.sent_at + pending.timeout_seconds <= now
        ]
        if overdue:
            expired = self._answered([pending.request.add_id for pending in overdue])
            for pending in expired:
                error = Unavailable(
                    f"adding {len(pending.request.entries)} entries on bookie {self.bookie_id}: "
                    f"no answer within {pending.timeout_seconds}s",
                    Reason.BOOKIE_UNAVAILABLE,
                )
                self._tell([pending], error)
            queued = list(self._outgoing)
            self._outgoing.clear()
            self._outgoing_bytes = 0
            self._made_room()
            self._tell(
                queued,
                Unavailable(
                    f"adding entries on bookie {self.bookie_id}: "
                    f"queued behind adds it did not answer within {overdue[0].timeout_seconds}s",
                    Reason.BOOKIE_UNAVAILABLE,
                ),
            )
            writing, call = self._writing, self._call
            if writing is not None and not writing.adds and call is not None:
                # Every add of the message being written is past its deadline and the bookie has
                # still not taken it: it stopped reading. Whatever is queued next would wait behind
                # this write with no deadline of its own, so the stream goes, and the next add
                # opens another.
                log.warning(
                    "bookie %s took no message on its add stream within %ss; opening a new one",
                    self.bookie_id,
                    overdue[0].timeout_seconds,
                )
                self._broken(
                    call,
                    Unavailable(f"bookie {self.bookie_id} stopped reading its add stream", Reason.BOOKIE_UNAVAILABLE),
                )
        if self._in_flight or self._outgoing:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_SECONDS, self._expire_overdue)

    async def _open(self) -> None:
        """Open the stream for the adds queued meanwhile; if it cannot be
        opened, they fail with why."""
        try:
            add_stream = await self._open_call()  # UNAVAILABLE when the bookie cannot be resolved
        except Exception as exc:  # a bug as well: the adds waiting must hear of it, not wait for ever
            if isinstance(exc, QuireError):
                error = exc
            else:
                log.exception("opening the add stream to bookie %s failed", self.bookie_id)
                error = Unavailable(
                    f"opening the add stream to bookie {self.bookie_id} failed: {exc!r}", Reason.BOOKIE_UNAVAILABLE
                )
            self._opener = None
            self._tell(self._take_every_add(), error)
            return
        call = add_stream()
        self._call = call
        self._opener = None
        self._tasks = [
            asyncio.create_task(self._send(call), name=f"add-stream-send-{self.bookie_id}"),
            asyncio.create_task(self._receive(call), name=f"add-stream-receive-{self.bookie_id}"),
        ]

    def _may_send(self) -> bool:
        if not self._in_flight:
            return True
        if self._sent_bytes >= self._max_unanswered_bytes:
            return False  # a slow bookie: what it has not taken stays here, bounded by the writers
        return len(self._in_flight) < self._max_messages_in_flight and self._outgoing_bytes >= FULL_MESSAGE_BYTES

    def _take(self) -> tuple[list[_Add], int]:
        """The adds of the next message, oldest first, and their bytes: at
        least one, then as many as max_message_bytes allows. Counted in locals
        and stored once: a message can carry hundreds of adds."""
        outgoing, limit = self._outgoing, self._max_message_bytes
        taken: list[_Add] = []
        size = 0
        while outgoing:
            add_size = outgoing[0].request.size
            if taken and size + add_size > limit:
                break
            taken.append(outgoing.popleft())
            size += add_size
        self._outgoing_bytes -= size
        return taken, size

    async def _send(self, call: grpc.aio.StreamStreamCall) -> None:
        # The loop, once: asking for it makes a system call (getpid) in this Python.
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not self._outgoing:
                    self._sender_idle = loop.create_future()
                    await self._sender_idle
                    continue
                while self._outgoing:
                    if not self._may_send():
                        # Adds arriving meanwhile wait and go together in the next message.
                        self._window.clear()
                        await self._window.wait()
                        continue
                    # Writers whose requests are read join this message; a lone writer's leaves at once.
                    if self._lone_adds_in_a_row < LONE_ADDS_BEFORE_SENDING_AT_ONCE:
                        await _loop_rounds(loop, YIELDS_BEFORE_SENDING)
                    taken, size = self._take()
                    if not taken:
                        continue  # failed meanwhile (expired or broken)
                    message = _Message({pending.request.add_id: pending for pending in taken}, loop.time())
                    self._in_flight.append(message)
                    self._sent_bytes += size
                    wire = [piece for pending in taken for piece in pending.request.wire]
                    wire.append(_STORED_IDS)
                    self._writing = message
                    await call.write(b"".join(wire))
                    self._writing = None
                    self.messages_sent += 1
                    self.adds_sent += len(taken)
                    self._lone_adds_in_a_row = self._lone_adds_in_a_row + 1 if len(taken) == 1 else 0
        except grpc.aio.AioRpcError as exc:
            self._broken(call, error_from_rpc(exc, f"adding entries on bookie {self.bookie_id}"))
        except (asyncio.InvalidStateError, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # Written after the call ended or was cancelled: the receiver reports why.

    async def _receive(self, call: grpc.aio.StreamStreamCall) -> None:
        try:
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    raise Unavailable(f"bookie {self.bookie_id} ended the add stream", Reason.BOOKIE_UNAVAILABLE)
                # The stored adds of one answer are counted first and told after: the
                # room and window they free are counted once per answer, not per add.
                self._tell(self._answered(response.stored_add_ids), None)
                for result in response.results:  # refusals (and every answer of a bookie that predates stored_ids)
                    what = f"adding entries on bookie {self.bookie_id}"
                    error = error_from_result(result.code, result.reason, result.message, what)
                    self._tell(self._answered((result.add_id,)), error)
                metrics.add_latencies.record()  # one sample per answer, whatever it acknowledged
        except grpc.aio.AioRpcError as exc:
            self._broken(call, error_from_rpc(exc, f"adding entries on bookie {self.bookie_id}"))
        except QuireError as exc:
            self._broken(call, exc)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # stopped by this stream (close, or the sender saw it break)
            # The call was cancelled under us: its channel was closed (a retired channel).
            self._broken(
                call, Unavailable(f"the add stream to bookie {self.bookie_id} was cancelled", Reason.BOOKIE_UNAVAILABLE)
            )

    def _broken(self, call: grpc.aio.StreamStreamCall, error: QuireError) -> None:
        """The stream ended: fail every add sent or queued on it; the next add opens a new one."""
        current = self._call
        if current is None or current is not call:
            return  # an earlier stream, already dealt with
        self._call = None
        current.cancel()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._tasks = []
        self._writing = None
        failed = self._take_every_add()
        if failed:
            log.warning("add stream to bookie %s broke with %d adds unanswered: %s", self.bookie_id, len(failed), error)
        self._tell(failed, error)
        self._on_broken()

    async def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        if self._opener is not None:
            self._opener.cancel()
            self._opener = None
        call, tasks = self._call, self._tasks
        self._call, self._tasks = None, []
        for task in tasks:
            task.cancel()
        if call is not None:
            call.cancel()
        self._tell(self._take_every_add(), Unavailable("the gateway is shutting down", Reason.SERVICE_UNAVAILABLE))
        await asyncio.gather(*tasks, return_exceptions=True)


class BookieAddStreams:
    """One BookieAddStream per bookie id, opened on first use."""

    def __init__(
        self,
        open_call: Callable[[str], Awaitable[AddStreamCallable]],
        on_broken: Callable[[str], None],
        max_unanswered_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._open_call = open_call
        self._on_broken = on_broken
        self._max_unanswered_bytes = max_unanswered_bytes
        self._streams: dict[str, BookieAddStream] = {}

    def get(self, bookie_id: str) -> BookieAddStream:
        stream = self._streams.get(bookie_id)
        if stream is None:
            stream = self._streams[bookie_id] = BookieAddStream(
                bookie_id,
                lambda: self._open_call(bookie_id),
                lambda: self._on_broken(bookie_id),
                max_unanswered_bytes=self._max_unanswered_bytes,
            )
        return stream

    def stats(self) -> dict[str, dict[str, int]]:
        return {
            bookie_id: {"messages_sent": s.messages_sent, "adds_sent": s.adds_sent}
            for bookie_id, s in sorted(self._streams.items())
        }

    async def close(self) -> None:
        for stream in self._streams.values():
            await stream.close()
        self._streams.clear()
