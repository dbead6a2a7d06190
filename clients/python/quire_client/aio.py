"""The asyncio client: the sync QuireClient's ledger and blob calls on
grpc.aio, for applications that run an event loop (FastAPI, aiohttp, ...).

    async with AsyncQuireClient("gw-1:7000", gateways=["gw-2:7000"]) as quire:
        ledger = (await quire.create_ledger()).ledger_id
        async for ack in quire.append(ledger, payloads):
            ...
        async for entry in quire.read(ledger):
            ...

Every call takes `timeout=` (seconds for the whole call, resumptions and
retries included; DeadlineExceededError when it runs out) and can be
cancelled like any coroutine. Answers are the typed results of
quire_client.results, failures the errors of quire_client.errors. Write
sessions, reads and tails resume through the other gateways by the rules
of quire_client.protocol, the same as the sync client's."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import grpc
import grpc.aio

from quire_api.ids import U64_MAX, LedgerId
from quire_client import protocol
from quire_client.channels import CHANNEL_OPTIONS, ClientTls, open_aio_channel
from quire_client.errors import (
    FailedPreconditionError,
    QuireClientError,
    UnavailableError,
    error_from_read_error,
    translate,
)
from quire_client.protocol import Deadline, as_ledger_id
from quire_client.results import AppendAck, DigestType, Entry, LedgerMetadata, OpenedLedger
from quire_proto.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc

__all__ = ["AsyncLedgerWriter", "AsyncQuireClient"]

_Answer = TypeVar("_Answer")

# What a payload source ends with, in the queue between it and the write sessions.
_SOURCE_DONE = object()

# What grpc.aio reports, in place of the call's own status, when a message of
# a request stream could not be sent because the stream had already ended or
# its connection broke (grpc/grpc#36066).
_FAILED_SEND = "Internal error from Core"


def _failed_send(error: QuireClientError) -> bool:
    return error.code == grpc.StatusCode.INTERNAL and not error.reason and error.message == _FAILED_SEND


class AsyncQuireClient:
    """The asyncio client of one Quire cluster's gateways. One instance is
    shared by every task of a program; its calls may run at once."""

    def __init__(
        self,
        gateway: str = "127.0.0.1:7000",
        *,
        gateways: Iterable[str] = (),
        timeout: float = 30.0,
        tls: ClientTls | None = None,
        token: str | None = None,
        follow_owner: bool = False,
        resume_attempts: int = 30,
        conditional_resume: bool = True,
    ) -> None:
        """`gateway`, then `gateways`: gateways of the same cluster, tried in
        order when one is lost. `timeout`: the default deadline of a unary
        call (streams have none unless given one). With `follow_owner`, a
        write session resumes at the ledger's owner first, as the answers name
        it, when that address is reachable from here. `resume_attempts` bounds
        the attempts of one resumption. `conditional_resume=False` resends
        unacknowledged entries without expected_entry_id: it can write them
        twice (a test-only positive control)."""
        if timeout <= 0:
            raise ValueError(f"timeout {timeout} must be more than 0 seconds")
        self._targets = [gateway, *gateways]
        self.gateway = gateway  # where calls go now
        self.timeout = timeout
        self.follow_owner = follow_owner
        self.resume_attempts = resume_attempts
        self.conditional_resume = conditional_resume
        self._tls, self._token = tls, token
        # One channel per gateway used, all open until close(): a call in
        # flight on one gateway is not cut off when others move to the next.
        self._channels: dict[str, grpc.aio.Channel] = {}
        # Entries a resumed append found stored though their acknowledgement was lost.
        self.landed_on_resume = 0
        # Read and tail streams resumed after a retryable failure.
        self.resumed_reads = 0
        # Append streams resumed after a retryable failure.
        self.resumed_writes = 0

    # Channels and gateways -------------------------------------------------------

    def _channel(self) -> grpc.aio.Channel:
        channel = self._channels.get(self.gateway)
        if channel is None:
            channel = open_aio_channel(self.gateway, self._tls, self._token, CHANNEL_OPTIONS)
            self._channels[self.gateway] = channel
        return channel

    @property
    def _ledgers(self) -> Any:
        return ledger_pb2_grpc.LedgerServiceStub(self._channel())

    @property
    def _blobs(self) -> Any:
        return blob_pb2_grpc.BlobServiceStub(self._channel())

    def use_gateway(self, target: str) -> None:
        """Send the following calls to `target`."""
        self.gateway = target

    def _next_gateway(self, lost: str, owner_address: str = "") -> None:
        """After losing gateway `lost`: the owner if asked to follow it, else
        the next of the given gateways. Calls that lost the same gateway at
        once move the client on once, not once each."""
        if self.gateway != lost:
            return
        if self.follow_owner and owner_address and owner_address != lost:
            self.gateway = owner_address
            return
        index = self._targets.index(lost) if lost in self._targets else -1
        self.gateway = self._targets[(index + 1) % len(self._targets)]

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()

    async def __aenter__(self) -> AsyncQuireClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _deadline(self, timeout: float | None, default: float | None) -> Deadline:
        return Deadline(timeout if timeout is not None else default)

    async def _unary(
        self, method: Callable[..., Awaitable[Any]], request: Any, answer: type[_Answer], deadline: Deadline
    ) -> _Answer:
        """One unary call (`answer`: the type of its answer, which the
        generated stubs do not declare)."""
        try:
            response: _Answer = await method(request, timeout=deadline.remaining())
        except grpc.RpcError as exc:
            raise translate(exc) from None
        return response

    # Ledgers -----------------------------------------------------------------

    async def create_ledger(
        self,
        *,
        ensemble_size: int = 3,
        write_quorum_size: int = 2,
        ack_quorum_size: int = 2,
        password: bytes = b"",
        digest_type: DigestType = DigestType.CRC32C,
        ledger_id: LedgerId | str | None = None,
        scope_id: int | None = None,
        legacy: bool = False,
        custom_metadata: Mapping[str, str] | None = None,
        request_id: str | None = None,
        attempts: int = 3,
        timeout: float | None = None,
    ) -> LedgerMetadata:
        """Create a ledger; its metadata. A create whose outcome is unknown
        (UNAVAILABLE or DEADLINE_EXCEEDED) is sent again with the same
        request_id, up to `attempts` times, and never makes a second ledger.
        `timeout` covers every attempt."""
        request = protocol.create_ledger_request(
            ensemble_size=ensemble_size,
            write_quorum_size=write_quorum_size,
            ack_quorum_size=ack_quorum_size,
            password=password,
            digest_type=digest_type,
            ledger_id=ledger_id,
            scope_id=scope_id,
            legacy=legacy,
            custom_metadata=custom_metadata,
            request_id=request_id,
        )
        retries = protocol.CreateAttempts(attempts)
        deadline = self._deadline(timeout, self.timeout)
        for attempt in itertools.count(1):
            try:
                answer = await self._unary(
                    self._ledgers.CreateLedger, request, ledger_pb2.CreateLedgerResponse, deadline
                )
                return LedgerMetadata.from_proto(answer.metadata)
            except QuireClientError as exc:
                pause = retries.pause_after(exc, attempt)
            await asyncio.sleep(deadline.pause(pause))
        raise AssertionError("unreachable")

    async def open_ledger(
        self, ledger: LedgerId | str, password: bytes = b"", *, recovery: bool = False, timeout: float | None = None
    ) -> OpenedLedger:
        """Open for reading: metadata and LAC. With recovery, fence the
        ledger's bookies, recover its end and close it."""
        request = ledger_pb2.OpenLedgerRequest(
            ledger_id=protocol.ledger_proto(ledger), password=password, recovery=recovery
        )
        deadline = self._deadline(timeout, self.timeout)
        answer = await self._unary(self._ledgers.OpenLedger, request, ledger_pb2.OpenLedgerResponse, deadline)
        return OpenedLedger.from_proto(answer)

    async def recover_ledger(
        self, ledger: LedgerId | str, password: bytes = b"", *, timeout: float | None = None
    ) -> LedgerMetadata:
        """Fence, recover and close a ledger; its closed metadata."""
        return (await self.open_ledger(ledger, password, recovery=True, timeout=timeout)).metadata

    async def ledger_metadata(
        self, ledger: LedgerId | str, *, timeout: float | None = None
    ) -> tuple[LedgerMetadata, int]:
        """The ledger's metadata and the version of its record."""
        request = ledger_pb2.GetLedgerMetadataRequest(ledger_id=protocol.ledger_proto(ledger))
        deadline = self._deadline(timeout, self.timeout)
        answer = await self._unary(
            self._ledgers.GetLedgerMetadata, request, ledger_pb2.GetLedgerMetadataResponse, deadline
        )
        version: int = answer.version
        return LedgerMetadata.from_proto(answer.metadata), version

    async def last_add_confirmed(self, ledger: LedgerId | str, *, timeout: float | None = None) -> int:
        request = ledger_pb2.ReadLastAddConfirmedRequest(ledger_id=protocol.ledger_proto(ledger))
        deadline = self._deadline(timeout, self.timeout)
        answer = await self._unary(
            self._ledgers.ReadLastAddConfirmed, request, ledger_pb2.ReadLastAddConfirmedResponse, deadline
        )
        last_add_confirmed: int = answer.last_add_confirmed
        return last_add_confirmed

    async def close_ledger(self, ledger: LedgerId | str, *, timeout: float | None = None) -> LedgerMetadata:
        request = ledger_pb2.CloseLedgerRequest(ledger_id=protocol.ledger_proto(ledger))
        deadline = self._deadline(timeout, self.timeout)
        answer = await self._unary(self._ledgers.CloseLedger, request, ledger_pb2.CloseLedgerResponse, deadline)
        return LedgerMetadata.from_proto(answer.metadata)

    async def delete_ledger(self, ledger: LedgerId | str, *, timeout: float | None = None) -> None:
        request = ledger_pb2.DeleteLedgerRequest(ledger_id=protocol.ledger_proto(ledger))
        deadline = self._deadline(timeout, self.timeout)
        await self._unary(self._ledgers.DeleteLedger, request, ledger_pb2.DeleteLedgerResponse, deadline)

    async def list_ledgers(
        self, scope_id: int | None = None, page_size: int = 100, *, timeout: float | None = None
    ) -> AsyncIterator[LedgerMetadata]:
        """Ledgers of one scope, or of every scope when scope_id is None.
        `timeout` (default the client's) is per page."""
        request = protocol.list_ledgers_request(scope_id, page_size, "")
        while True:
            deadline = self._deadline(timeout, self.timeout)
            answer = await self._unary(self._ledgers.ListLedgers, request, ledger_pb2.ListLedgersResponse, deadline)
            for metadata in answer.ledgers:
                yield LedgerMetadata.from_proto(metadata)
            if not answer.next_page_token:
                return
            request.page_token = answer.next_page_token

    # Writing ----------------------------------------------------------------------

    async def add_entry(
        self,
        ledger: LedgerId | str,
        payload: bytes,
        expected_entry_id: int | None = None,
        *,
        timeout: float | None = None,
    ) -> int:
        """Append one entry; its id. With `expected_entry_id`, only if it gets
        that id (else FailedPreconditionError, reason
        ERROR_REASON_UNEXPECTED_ENTRY_ID, details next_entry_id). Not retried:
        after UNAVAILABLE or DEADLINE_EXCEEDED the entry may or may not be
        stored (see docs/clients.md)."""
        request = protocol.add_entry_request(ledger, payload, expected_entry_id)
        deadline = self._deadline(timeout, self.timeout)
        answer = await self._unary(self._ledgers.AddEntry, request, ledger_pb2.AddEntryResponse, deadline)
        entry_id: int = answer.entry_id
        return entry_id

    async def next_entry_id(self, ledger: LedgerId | str, *, timeout: float | None = None) -> int:
        """The id the ledger's writer would give its next entry, asked without writing."""
        deadline = self._deadline(timeout, self.timeout)
        try:
            await self._unary(
                self._ledgers.AddEntry, protocol.next_entry_id_probe(ledger), ledger_pb2.AddEntryResponse, deadline
            )
        except FailedPreconditionError as exc:
            return protocol.next_entry_id_from(exc)
        raise protocol.PROBE_ACCEPTED

    async def append(
        self,
        ledger: LedgerId | str,
        payloads: Iterable[bytes] | AsyncIterable[bytes],
        batch_size: int = 100,
        *,
        timeout: float | None = None,
    ) -> AsyncIterator[AppendAck]:
        """Stream `payloads` (an iterable or an async iterable) in write
        sessions, up to batch_size per message; yields acknowledgements as
        entries are confirmed, in order.

        A session that loses its gateway is resumed through the next one with
        a conditional append, so no entry is lost or written twice (the rules
        of protocol.WriteResumption, as in the sync client). Other errors, or
        running out of `resume_attempts`, end the iteration with the error.
        `timeout`: a deadline for the whole append (default none)."""
        progress = protocol.WriteResumption(
            as_ledger_id(ledger), conditional=self.conditional_resume, resume_attempts=self.resume_attempts
        )
        deadline = Deadline(timeout)
        # One task reads the source into a bounded queue (back-pressure); the
        # sessions take entries from the queue. A session's request stream is
        # cancelled when its call ends, and a cancelled queue read loses nothing,
        # where a cancelled read of the caller's async iterator could end it.
        pending: asyncio.Queue[object] = asyncio.Queue(maxsize=4 * batch_size)
        feeder = asyncio.create_task(_feed(payloads, pending))
        source = _SessionSource(pending, progress, batch_size)
        try:
            while True:
                target = self.gateway
                call: Any = None
                try:
                    if progress.needs_next_id:
                        progress.next_id = await self.next_entry_id(progress.ledger, timeout=deadline.remaining())
                    session = source.begin()
                    call = self._ledgers.AppendEntries(session, timeout=deadline.remaining())
                    async for answer in call:
                        yield progress.acknowledged(answer)
                    if source.error is not None:
                        raise source.error
                    if not progress.unacked and source.done:
                        return
                    raise progress.ended_early()
                except grpc.RpcError as exc:
                    error = translate(exc)
                    if _failed_send(error):
                        error = await self._session_end_unknown(progress, deadline)
                except UnavailableError as exc:  # ended early, or from next_entry_id
                    error = exc
                finally:
                    if call is not None:
                        call.cancel()  # stops its request stream too
                if source.error is not None:
                    raise source.error
                resume = progress.after_failure(error)
                self.resumed_writes += 1
                if resume.landed is not None:
                    self.landed_on_resume += resume.landed.last_entry_id - resume.landed.first_entry_id + 1
                    yield resume.landed
                if resume.next_gateway:
                    self._next_gateway(target, progress.owner_address)
                await asyncio.sleep(deadline.pause(resume.pause))
        finally:
            feeder.cancel()

    async def _session_end_unknown(self, progress: protocol.WriteResumption, deadline: Deadline) -> QuireClientError:
        """What to resume a session by when grpc.aio hid how it ended (a
        failed send, _FAILED_SEND): the writer's refusal of a probe, which
        names its next entry id and LAC as a refused conditional session
        would, or the error the probe met (the gateway lost, the ledger
        closed or fenced, ...)."""
        if not progress.conditional:
            return UnavailableError(grpc.StatusCode.UNAVAILABLE, "", f"the stream broke while sending ({_FAILED_SEND})")
        try:
            await self._unary(
                self._ledgers.AddEntry,
                protocol.next_entry_id_probe(progress.ledger),
                ledger_pb2.AddEntryResponse,
                Deadline(deadline.pause(self.timeout)),
            )
        except QuireClientError as exc:
            return exc
        return protocol.PROBE_ACCEPTED

    async def append_all(
        self,
        ledger: LedgerId | str,
        payloads: Iterable[bytes] | AsyncIterable[bytes],
        batch_size: int = 100,
        *,
        timeout: float | None = None,
    ) -> int:
        """Append everything; the last acknowledged entry id (-1 if none)."""
        last = -1
        async for ack in self.append(ledger, payloads, batch_size, timeout=timeout):
            last = ack.last_entry_id
        return last

    def writer(self, ledger: LedgerId | str, batch_size: int = 100) -> AsyncLedgerWriter:
        """A write session as an async context manager: `await w.append(p)`
        queues an entry, acknowledgements arrive in the background, `await
        w.flush()` waits for every entry so far, and leaving the block waits
        for all of them (raising the session's error, if any). It resumes
        like append()."""
        return AsyncLedgerWriter(self, as_ledger_id(ledger), batch_size)

    # Reading ----------------------------------------------------------------------

    def read(
        self,
        ledger: LedgerId | str,
        first: int = 0,
        last: int = -1,
        *,
        unconfirmed: bool = False,
        timeout: float | None = None,
    ) -> AsyncIterator[Entry]:
        """Entries `first`..`last` in order (`last` -1: up to the LAC; with
        `unconfirmed`, whatever the bookies hold). A stream that fails part
        way with a retryable error is resumed after the last entry delivered,
        through the next gateway: every entry once, in order (the rules of
        protocol.ReadResumption). `timeout`: a deadline for the whole read
        (default none)."""
        ledger_id = as_ledger_id(ledger)
        ledger_proto = protocol.ledger_proto(ledger_id)
        first, last = protocol.checked_read_range(first, last)
        deadline = Deadline(timeout)

        def stream(start: int) -> Any:
            request = protocol.read_request(ledger_proto, start, last, unconfirmed)
            method = self._ledgers.ReadUnconfirmedEntries if unconfirmed else self._ledgers.ReadEntries
            return method(request, timeout=deadline.remaining())

        async def refresh_lac() -> int:
            return await self.last_add_confirmed(ledger_id, timeout=deadline.remaining())

        # A resumed read up to the LAC asks the (new) gateway for it first.
        return self._resumed(stream, first, last, deadline, None if unconfirmed or last >= 0 else refresh_lac)

    def tail(self, ledger: LedgerId | str, first: int = 0, *, timeout: float | None = None) -> AsyncIterator[Entry]:
        """Confirmed entries from `first` on, as they are confirmed; ends when
        the ledger is closed and its last entry delivered. Resumed like
        read(). `timeout`: a deadline for the whole tail (default none)."""
        ledger_proto = protocol.ledger_proto(ledger)
        first, _ = protocol.checked_read_range(first, -1)
        deadline = Deadline(timeout)

        def stream(start: int) -> Any:
            request = ledger_pb2.TailEntriesRequest(ledger_id=ledger_proto, first_entry_id=start)
            return self._ledgers.TailEntries(request, timeout=deadline.remaining())

        return self._resumed(stream, first, None, deadline)

    async def _resumed(
        self,
        open_stream: Callable[[int], Any],
        first: int,
        last: int | None,
        deadline: Deadline,
        refresh_lac: Callable[[], Awaitable[int]] | None = None,
    ) -> AsyncIterator[Entry]:
        progress = protocol.ReadResumption(
            first, last, resume_attempts=self.resume_attempts, single_gateway=len(self._targets) == 1
        )
        while True:
            target = self.gateway
            call: Any = None
            try:
                if progress.resuming and refresh_lac is not None and progress.next_id > await refresh_lac():
                    return  # a read up to the LAC whose broken stream had delivered all of it
                call = open_stream(progress.next_id)
                async for response in call:
                    progress.answered()
                    for entry in response.entries:
                        if progress.fresh(entry.entry_id):
                            yield Entry.from_proto(entry)
                return
            except grpc.RpcError as exc:
                error = translate(exc)
            except QuireClientError as exc:  # from refresh_lac
                error = exc
            finally:
                if call is not None:
                    call.cancel()  # the caller stopped early, or the stream failed: end the RPC
            resume = progress.after_failure(error)
            if resume is None:
                return
            if resume.next_gateway:
                self._next_gateway(target)
            self.resumed_reads += 1
            await asyncio.sleep(deadline.pause(resume.pause))

    async def read_entry(self, ledger: LedgerId | str, entry_id: int, *, timeout: float | None = None) -> Entry:
        """One confirmed entry: past the LAC OutOfRangeError, an unknown
        ledger NotFoundError. One call, not resumed."""
        request = protocol.read_entry_request(ledger, entry_id)
        deadline = self._deadline(timeout, self.timeout)
        answer = await self._unary(self._ledgers.ReadEntry, request, ledger_pb2.ReadEntryResponse, deadline)
        return Entry.from_proto(answer.entry)

    async def read_entries_by_id(
        self, ledger: LedgerId | str, entry_ids: Iterable[int], *, timeout: float | None = None
    ) -> AsyncIterator[Entry | QuireClientError]:
        """The confirmed entries `entry_ids` over one ReadEntryStream, one item
        per id in order; an id that fails yields its error (not raised). A
        failure of the stream itself is raised, not resumed."""
        wanted = [protocol.read_entry_request(ledger, entry_id) for entry_id in entry_ids]
        if not wanted:
            return
        deadline = Deadline(timeout)
        call: Any = self._ledgers.ReadEntryStream(iter(wanted), timeout=deadline.remaining())
        answered = 0
        try:
            async for response in call:
                answered += 1
                if response.HasField("error"):
                    yield error_from_read_error(response.error)
                else:
                    yield Entry.from_proto(response.entry)
        except grpc.RpcError as exc:
            raise translate(exc) from None
        finally:
            call.cancel()
        if answered != len(wanted):
            raise UnavailableError(
                grpc.StatusCode.UNAVAILABLE, "", f"the read stream ended after {answered} of {len(wanted)} answers"
            )

    # Blobs ------------------------------------------------------------------------

    async def put_blob(
        self,
        data: bytes | Iterable[bytes] | AsyncIterable[bytes],
        scope_id: int = 0,
        part_bytes: int = 1024 * 1024,
        *,
        timeout: float | None = None,
    ) -> str:
        """Store a blob (bytes, or an iterable or async iterable of parts for
        a large one); its id. Not retried: a blob stored by a call whose
        answer was lost is left for the store's garbage collection."""
        protocol.in_range("scope_id", scope_id, 0, U64_MAX)

        async def requests() -> AsyncIterator[blob_pb2.PutBlobRequest]:
            sent = False
            async for part in _parts(data):
                for request in protocol.blob_part_requests(part, scope_id, part_bytes):
                    yield request
                    sent = True
            if not sent:
                yield blob_pb2.PutBlobRequest(scope_id=scope_id)

        deadline = Deadline(timeout)
        try:
            answer = await self._blobs.PutBlob(requests(), timeout=deadline.remaining())
        except grpc.RpcError as exc:
            raise translate(exc) from None
        return str(answer.blob_id)

    async def get_blob_parts(self, blob_id: str, *, timeout: float | None = None) -> AsyncIterator[bytes]:
        deadline = Deadline(timeout)
        call: Any = self._blobs.GetBlob(blob_pb2.GetBlobRequest(blob_id=blob_id), timeout=deadline.remaining())
        try:
            async for response in call:
                data: bytes = response.data
                yield data
        except grpc.RpcError as exc:
            raise translate(exc) from None
        finally:
            call.cancel()

    async def get_blob(self, blob_id: str, *, timeout: float | None = None) -> bytes:
        return b"".join([part async for part in self.get_blob_parts(blob_id, timeout=timeout)])


async def _parts(data: bytes | Iterable[bytes] | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(data, bytes | bytearray | memoryview):
        yield bytes(data)
    elif isinstance(data, AsyncIterable):
        async for part in data:
            yield part
    else:
        for part in data:
            yield part


async def _feed(payloads: Iterable[bytes] | AsyncIterable[bytes], pending: asyncio.Queue[object]) -> None:
    """Move the caller's payloads into `pending`, then _SOURCE_DONE (or the
    exception the source raised)."""
    try:
        async for payload in _parts(payloads):
            await pending.put(payload)
    except Exception as exc:  # the caller's source failed: the append ends with its error
        await pending.put(exc)
        return
    await pending.put(_SOURCE_DONE)


class _SessionSource:
    """The request streams of one append's write sessions. Entries come from
    the queue the feeder fills; each is recorded as unacknowledged before it
    is sent, and a new session first sends again every unacknowledged one."""

    def __init__(self, pending: asyncio.Queue[object], progress: protocol.WriteResumption, batch_size: int) -> None:
        self._pending = pending
        self._progress = progress
        self._batch_size = batch_size
        self.done = False  # the source has ended (and every entry of it is in progress.unacked or settled)
        self.error: Exception | None = None  # what the source raised, if it did

    def begin(self) -> AsyncIterator[ledger_pb2.AppendEntriesRequest]:
        return self._requests()

    async def _requests(self) -> AsyncIterator[ledger_pb2.AppendEntriesRequest]:
        progress = self._progress
        yield progress.first_request()
        # Positions are counted from the append's first entry (progress.settled
        # is unacked[0]'s), so acknowledgements arriving meanwhile do not shift them.
        sent = progress.settled
        while True:
            waiting = progress.settled + len(progress.unacked) - sent
            if waiting > 0:
                start = sent - progress.settled
                batch = list(itertools.islice(progress.unacked, start, start + min(waiting, self._batch_size)))
                sent += len(batch)
                yield ledger_pb2.AppendEntriesRequest(payloads=batch)
                continue
            if self.done or self.error is not None:
                return  # half-close: the writer acknowledges what it has and ends the stream
            item = await self._pending.get()
            while True:  # record the item, and whatever else is queued, before anything is sent
                if item is _SOURCE_DONE:
                    self.done = True
                    break
                if isinstance(item, Exception):
                    self.error = item
                    break
                assert isinstance(item, bytes | bytearray | memoryview)
                progress.unacked.append(bytes(item))
                if len(progress.unacked) >= self._batch_size or self._pending.empty():
                    break
                item = self._pending.get_nowait()


class AsyncLedgerWriter:
    """A write session for code that produces entries one at a time (see
    AsyncQuireClient.writer). It runs append() in a task, so it resumes the
    same way."""

    def __init__(self, client: AsyncQuireClient, ledger: LedgerId, batch_size: int) -> None:
        self._client = client
        self._ledger = ledger
        self._batch_size = batch_size
        self._entries: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=10 * batch_size)
        self._progress = asyncio.Condition()
        self.appended = 0  # entries handed to append()
        self.acknowledged = 0  # of those, how many are confirmed
        self.last_acknowledged = -1  # the highest entry id confirmed
        self.error: QuireClientError | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncLedgerWriter:
        self._task = asyncio.create_task(self._run())
        return self

    async def _source(self) -> AsyncIterator[bytes]:
        while (payload := await self._entries.get()) is not None:
            yield payload

    async def _run(self) -> None:
        try:
            async for ack in self._client.append(self._ledger, self._source(), self._batch_size):
                async with self._progress:
                    self.acknowledged += ack.last_entry_id - ack.first_entry_id + 1
                    self.last_acknowledged = ack.last_entry_id
                    self._progress.notify_all()
        except QuireClientError as exc:
            async with self._progress:
                self.error = exc
                self._progress.notify_all()

    async def append(self, payload: bytes) -> None:
        """Queue one entry (entries get ids in the order they are appended);
        waits while the queue is full."""
        if self.error is not None:
            raise self.error
        if self._task is None or self._task.done():
            raise RuntimeError("the writer is not open: use `async with client.writer(ledger) as w`")
        await self._entries.put(payload)
        self.appended += 1

    async def flush(self, timeout: float | None = None) -> int:
        """Wait until every appended entry is acknowledged; the last entry id."""
        async with asyncio.timeout(timeout), self._progress:
            await self._progress.wait_for(lambda: self.error is not None or self.acknowledged >= self.appended)
        if self.error is not None:
            raise self.error
        return self.last_acknowledged

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        if self._task is None:
            return
        if exc_type is not None:
            self._task.cancel()
            return
        await self._entries.put(None)
        await self._task
        if self.error is not None:
            raise self.error
