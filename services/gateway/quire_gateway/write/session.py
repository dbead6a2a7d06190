"""One AppendEntries write session, without gRPC: payloads in, acknowledgements out.

The session reads the client's requests in a task of its own and submits each
message's payloads to the ledger's write handle as it arrives, so a client can
keep sending while earlier entries wait for their quorum. Acknowledgements come
out in entry order; entries already confirmed when one is answered are folded
into that answer. A refused request ends the session with its error once every
entry submitted before it has been answered.

A session holds a future for each entry taken and not yet answered. A client
that sends without reading its answers would grow that without end: gRPC's
flow control stops the answers, not the requests. So once `window_entries`
are unanswered, the session reads no more of the client's messages until
answers leave; gRPC's flow control then holds the client back.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import AsyncIterator
from typing import NamedTuple

from quire_api.errors import InvalidArgument, QuireError
from quire_api.ids import LedgerId, ledger_id_from_proto
from quire_common.telemetry import tracer
from quire_gateway.ledgers import LedgerOperations
from quire_gateway.write.handle import WriteSettings
from quire_proto.gateway.v1 import ledger_pb2

_tracer = tracer(__name__)
_new_tuple = tuple.__new__


class Acknowledgement(NamedTuple):
    """Entries first..last are confirmed; `owner` is named in a session's first answer only.
    A tuple: one is made for every answer, and a tuple costs half a frozen dataclass. It is
    made by tuple.__new__, which skips the Python-level __new__ that NamedTuple generates."""

    first_entry_id: int
    last_entry_id: int
    last_add_confirmed: int
    owner: str | None


class WriteSession:
    def __init__(
        self,
        ledgers: LedgerOperations,
        ledger: LedgerId,
        requests: AsyncIterator[ledger_pb2.AppendEntriesRequest],
        traced: bool,
        window_entries: int = WriteSettings.session_window_entries,
    ) -> None:
        self.ledgers = ledgers
        self.ledger = ledger
        self._requests = requests
        self._traced = traced
        self._pending: deque[asyncio.Future[int]] = deque()
        # The acknowledging side waiting for entries, woken by the reading side (a plain
        # future: an asyncio.Event costs Python calls per entry on both sides).
        self._waiting: asyncio.Future[None] | None = None
        self._window_entries = window_entries
        # The reading side waiting for answers to leave (window_entries unanswered).
        self._window_full: asyncio.Future[None] | None = None
        self._finished = False  # the client's side of the stream has ended, or was refused
        self._error: QuireError | None = None
        # Asked for once: asking for the running loop makes a system call (getpid) in this Python.
        self._loop = asyncio.get_running_loop()

    async def _take_requests(self) -> None:
        expected: int | None = None  # a conditional append applies to the session's first entries
        submitted = False
        # A client names the ledger the same way in every message: parse a form once, compare the
        # rest, and ask whether the field is set only when it differs (then one comparison is the
        # whole check).
        named = None
        try:
            async for request in self._requests:
                ledger_id = request.ledger_id
                if ledger_id != named and request.HasField("ledger_id"):
                    if ledger_id_from_proto(ledger_id) != self.ledger:
                        raise InvalidArgument("a write session writes one ledger; ledger_id changed mid-stream")
                    named = ledger_id
                if not submitted and request.HasField("expected_entry_id"):
                    expected = request.expected_entry_id
                payloads = request.payloads[:]  # a slice copies a repeated field faster than list()
                if payloads:
                    futures = self.ledgers.append_now(self.ledger, payloads, expected)
                    if futures is None:
                        futures = await self.ledgers.append(self.ledger, payloads, expected)
                    self._pending.extend(futures)
                    submitted, expected = True, None
                    self._wake_once_confirmed()
                    if len(self._pending) >= self._window_entries:
                        self._window_full = self._loop.create_future()
                        await self._window_full
        except QuireError as exc:
            self._error = exc
        finally:
            self._finished = True
            self._wake()

    def _wake(self) -> None:
        waiting = self._waiting
        if waiting is not None:
            self._waiting = None
            _resolve(waiting)

    def _wake_once_confirmed(self) -> None:
        """Wake the acknowledging side when the oldest entry pending is
        confirmed (or fails), rather than now only to wait for it again:
        each wake resumes every generator between it and gRPC. A traced
        session wakes at once: its quorum_wait span times the wait."""
        if self._traced:
            self._wake()
            return
        waiting = self._waiting
        if waiting is not None:
            self._waiting = None
            self._pending[0].add_done_callback(functools.partial(_resolve, waiting))

    async def _next_confirmed_traced(self) -> int:
        with _tracer.start_as_current_span("quire.gateway.quorum_wait", attributes={"quire.ledger": str(self.ledger)}):
            return await self._pending.popleft()

    async def acknowledgements(self) -> AsyncIterator[Acknowledgement]:
        reader = asyncio.create_task(self._take_requests())
        owner = self.ledgers.owner_here(self.ledger)  # named in the session's first answer
        try:
            while True:
                if not self._pending:
                    if self._finished:
                        if self._error is not None:
                            raise self._error
                        return
                    self._waiting = self._loop.create_future()
                    await self._waiting
                    continue
                if self._traced:
                    first = last = await self._next_confirmed_traced()
                else:  # the future itself, without a coroutine around it: this runs for every entry
                    first = last = await self._pending.popleft()
                # Coalesce entries that are already confirmed into one ack.
                pending = self._pending
                while pending and pending[0].done() and not pending[0].cancelled():
                    if pending[0].exception() is not None or pending[0].result() != last + 1:
                        break
                    last = pending.popleft().result()
                window_full = self._window_full
                if window_full is not None and len(pending) < self._window_entries:
                    self._window_full = None
                    _resolve(window_full)
                handle = self.ledgers.handles.get(self.ledger)
                lac = handle.last_add_confirmed if handle else last
                yield _new_tuple(Acknowledgement, (first, last, lac, owner))
                owner = None
        finally:
            reader.cancel()


def _resolve(waiting: asyncio.Future[None], _confirmed: asyncio.Future[int] | None = None) -> None:
    """Wake `waiting`; also a done callback of the entry it waits for (`_confirmed`)."""
    if not waiting.done():  # not cancelled meanwhile
        waiting.set_result(None)
