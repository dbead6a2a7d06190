"""A small synchronous client for the gateway's LedgerService and
BlobService: the application's calls (the operator's are QuireAdmin's, in
quire_client.admin).

Errors come back as QuireClientError subclasses, one per gRPC code
(NotFoundError, OutOfRangeError, FailedPreconditionError, ...), each carrying
the code and the ErrorInfo reason. Write sessions are context managers
(`with client.writer(ledger) as w: w.append(b"...")`), reads and tails are
iterators."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import grpc

from quire_api.ids import U64_MAX, LedgerId, ledger_id_to_proto
from quire_client import protocol
from quire_client.channels import CHANNEL_OPTIONS, ClientTls, open_client_channel

# The error classes live in quire_client.errors; importable from here as before.
from quire_client.errors import (
    AbortedError,
    AlreadyExistsError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    QuireClientError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    never_sent,
)
from quire_client.errors import error_from_read_error as _error_from_read_error
from quire_client.errors import translate as _translate
from quire_client.protocol import as_ledger_id as _as_ledger_id
from quire_client.results import AppendAck
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "AppendAck",
    "ClientTls",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "LedgerWriter",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "QuireClient",
    "QuireClientError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "never_sent",
    "open_client_channel",
]

_Answer = TypeVar("_Answer")


class _AppendSessions:
    """The write sessions of one `QuireClient.append` call: which one is
    current, and the lock under which a session takes entries from the source."""

    def __init__(self) -> None:
        self.current = 0
        self.lock = threading.Lock()

    def begin(self) -> int:
        with self.lock:
            self.current += 1
            return self.current


class QuireClient:
    def __init__(
        self,
        gateway: str = "127.0.0.1:7000",
        *,
        timeout: float = 30.0,
        tls: ClientTls | None = None,
        token: str | None = None,
        gateways: Iterable[str] = (),
        follow_owner: bool = False,
        resume_attempts: int = 30,
        conditional_resume: bool = True,
    ):
        """`gateways`: more gateways of the same cluster; a write session
        (append) that loses its gateway resumes through the next one. With
        `follow_owner`, it resumes at the ledger's owner first, as the answers
        name it, when that address is reachable from here. `resume_attempts`
        bounds the attempts of one resumption. `conditional_resume=False`
        resends unacknowledged entries without expected_entry_id: it can write
        them twice (a test-only positive control)."""
        options = CHANNEL_OPTIONS
        self._targets = [gateway, *gateways]
        self.gateway = gateway  # the gateway calls go to now
        self._gateway_channel = open_client_channel(gateway, tls, token, options)
        self.ledgers = ledger_pb2_grpc.LedgerServiceStub(self._gateway_channel)
        self.blobs = blob_pb2_grpc.BlobServiceStub(self._gateway_channel)
        self.follow_owner = follow_owner
        self.resume_attempts = resume_attempts
        self.conditional_resume = conditional_resume
        # Entries a resumed append found stored though their acknowledgement was lost.
        self.landed_on_resume = 0
        # Read and tail streams resumed after a retryable failure.
        self.resumed_reads = 0
        # Append streams resumed after a retryable failure.
        self.resumed_writes = 0
        self._options = options
        self._tls, self._token = tls, token
        self.timeout = timeout

    def use_gateway(self, target: str) -> None:
        """Send the following calls to `target`."""
        if target == self.gateway:
            return
        self._gateway_channel.close()
        self.gateway = target
        self._gateway_channel = open_client_channel(target, self._tls, self._token, self._options)
        self.ledgers = ledger_pb2_grpc.LedgerServiceStub(self._gateway_channel)
        self.blobs = blob_pb2_grpc.BlobServiceStub(self._gateway_channel)

    def _next_gateway(self, owner_address: str) -> None:
        """After losing a gateway: the owner if asked to follow it, else the
        next of the given gateways."""
        if self.follow_owner and owner_address and owner_address != self.gateway:
            self.use_gateway(owner_address)
            return
        known = self._targets
        index = known.index(self.gateway) if self.gateway in known else -1
        self.use_gateway(known[(index + 1) % len(known)])

    def close(self) -> None:
        self._gateway_channel.close()

    def __enter__(self) -> QuireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _unary(self, method: Callable[..., Any], request: Any, answer: type[_Answer]) -> _Answer:
        """One unary call (`answer`: the type of its answer, which the
        generated stubs do not declare)."""
        try:
            response: _Answer = method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise _translate(exc) from None
        return response

    def create_ledger(
        self,
        *,
        ensemble_size: int = 3,
        write_quorum_size: int = 2,
        ack_quorum_size: int = 2,
        password: bytes = b"",
        digest_type: int = common_pb2.DIGEST_TYPE_CRC32C,
        ledger_id: LedgerId | str | None = None,
        scope_id: int | None = None,
        legacy: bool = False,
        custom_metadata: dict[str, str] | None = None,
        request_id: str | None = None,
        attempts: int = 3,
    ) -> common_pb2.LedgerMetadata:
        """Create a ledger. Every create carries a request_id (a new UUID unless
        one is given), and a create that fails UNAVAILABLE or DEADLINE_EXCEEDED
        (its outcome unknown) is sent again with it, up to `attempts` times:
        the gateway then returns the ledger the lost attempt made, never a
        second one. Not enough bookies is a definite answer, not retried."""
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
        for attempt in itertools.count(1):
            try:
                return self._unary(self.ledgers.CreateLedger, request, ledger_pb2.CreateLedgerResponse).metadata
            except QuireClientError as exc:
                pause = retries.pause_after(exc, attempt)
            time.sleep(pause)
        raise AssertionError("unreachable")

    def open_ledger(
        self, ledger: LedgerId | str, password: bytes = b"", recovery: bool = False
    ) -> ledger_pb2.OpenLedgerResponse:
        """Open for reading: metadata and LAC. With recovery, fence the
        ledger's bookies, recover its end and close it (the LAC returned is
        then its last entry)."""
        request = ledger_pb2.OpenLedgerRequest(
            ledger_id=protocol.ledger_proto(ledger), password=password, recovery=recovery
        )
        return self._unary(self.ledgers.OpenLedger, request, ledger_pb2.OpenLedgerResponse)

    def recover_ledger(self, ledger: LedgerId | str, password: bytes = b"") -> common_pb2.LedgerMetadata:
        """Fence, recover and close a ledger; its closed metadata."""
        return self.open_ledger(ledger, password, recovery=True).metadata

    def add_entry(self, ledger: LedgerId | str, payload: bytes, expected_entry_id: int | None = None) -> int:
        """Append one entry; with `expected_entry_id`, only if it gets that id
        (else FailedPreconditionError, reason ERROR_REASON_UNEXPECTED_ENTRY_ID,
        details next_entry_id)."""
        request = protocol.add_entry_request(ledger, payload, expected_entry_id)
        entry_id: int = self._unary(self.ledgers.AddEntry, request, ledger_pb2.AddEntryResponse).entry_id
        return entry_id

    def append(self, ledger: LedgerId | str, payloads: Iterable[bytes], batch_size: int = 100) -> Iterator[AppendAck]:
        """Stream payloads in write sessions, batch_size per message; yields
        acknowledgements as entries are confirmed, in order.

        A session that fails UNAVAILABLE (its gateway died, or the owner it
        relays to) is resumed through the next gateway: the new session is a
        conditional append (expected_entry_id = the first unacknowledged
        entry's id). If some of the unacknowledged entries landed, the writer
        refuses with the id its next entry would get; once its LAC shows them
        confirmed they are acknowledged here and the rest are sent again, so
        none is lost or written twice. This assumes one writer per ledger (as
        BookKeeper's ledgers have). Other errors, or running out of
        `resume_attempts`, end the iteration with the error. (The rules are
        protocol.WriteResumption's, shared with the asyncio client.)"""
        progress = protocol.WriteResumption(
            _as_ledger_id(ledger), conditional=self.conditional_resume, resume_attempts=self.resume_attempts
        )
        source = iter(payloads)
        # Per call, so that appends running at once on one client do not stop each other's sessions.
        sessions = _AppendSessions()
        while True:
            session = sessions.begin()  # an older session's request stream stops taking entries
            try:
                if progress.needs_next_id:
                    progress.next_id = self.next_entry_id(progress.ledger)
                calls = self.ledgers.AppendEntries(
                    self._session_requests(progress, source, batch_size, sessions, session), timeout=self.timeout * 10
                )
                for answer in calls:
                    yield progress.acknowledged(answer)
                if not progress.unacked:
                    return
                raise progress.ended_early()
            except grpc.RpcError as exc:
                error = _translate(exc)
            except UnavailableError as exc:
                error = exc
            resume = progress.after_failure(error)
            self.resumed_writes += 1
            if resume.landed is not None:
                self.landed_on_resume += resume.landed.last_entry_id - resume.landed.first_entry_id + 1
                yield resume.landed
            if resume.next_gateway:
                self._next_gateway(progress.owner_address)
            time.sleep(resume.pause)

    def next_entry_id(self, ledger: LedgerId | str) -> int:
        """The id the ledger's writer would give its next entry, asked without
        writing: a conditional AddEntry with an impossible expected id (-1) is
        refused with it."""
        try:
            self._unary(self.ledgers.AddEntry, protocol.next_entry_id_probe(ledger), ledger_pb2.AddEntryResponse)
        except FailedPreconditionError as exc:
            return protocol.next_entry_id_from(exc)
        raise protocol.PROBE_ACCEPTED

    def _session_requests(
        self,
        progress: protocol.WriteResumption,
        source: Iterator[bytes],
        batch_size: int,
        sessions: _AppendSessions,
        session: int,
    ) -> Iterator[ledger_pb2.AppendEntriesRequest]:
        """One session's messages: the ledger (and the condition), the
        unacknowledged entries again, then new ones, each recorded as
        unacknowledged before it is sent. An older session's stream may still
        be taking a batch from `source` (gRPC stops reading it when its call
        ends): the lock lets it record that batch before this one copies the
        entries to send again, and it stops there."""
        first = progress.first_request()
        with sessions.lock:
            resend = list(progress.unacked)
        yield first
        for start in range(0, len(resend), batch_size):
            yield ledger_pb2.AppendEntriesRequest(payloads=resend[start : start + batch_size])
        while True:
            with sessions.lock:
                if sessions.current != session:
                    return
                batch = list(itertools.islice(source, batch_size))
                progress.unacked.extend(batch)
                if not batch or sessions.current != session:
                    return  # the source is done, or a newer session sends this batch
            yield ledger_pb2.AppendEntriesRequest(payloads=batch)

    def append_all(self, ledger: LedgerId | str, payloads: Iterable[bytes], batch_size: int = 100) -> int:
        """Append everything; returns the last acknowledged entry id (-1 if none)."""
        last = -1
        for ack in self.append(ledger, payloads, batch_size):
            last = ack.last_entry_id
        return last

    def read(
        self, ledger: LedgerId | str, first: int = 0, last: int = -1, *, unconfirmed: bool = False
    ) -> Iterator[ledger_pb2.Entry]:
        """Entries `first`..`last` in order (`last` -1: up to the LAC; with
        `unconfirmed`, whatever the bookies hold).

        Reads are idempotent, so a stream that fails part way with a retryable
        error (UNAVAILABLE: its gateway died or the connection broke; or any
        error whose RetryInfo says to try again) is resumed from the entry
        after the last one delivered, through the next of the client's
        gateways, after a pause (doubling, at least the RetryInfo delay): the
        caller sees every entry once, in order, with no gap. Attempts without
        progress are bounded by `resume_attempts`; then, or on a final error,
        the iteration ends with the error. A client with a single gateway
        that fails before its stream has answered at all raises at once. With
        `last` -1 a resumed read goes up to the LAC at the time it resumes."""
        ledger_id = _as_ledger_id(ledger)
        ledger_proto = ledger_id_to_proto(ledger_id)
        first, last = protocol.checked_read_range(first, last)

        def stream(start: int) -> Iterable[ledger_pb2.ReadEntriesResponse]:
            request = protocol.read_request(ledger_proto, start, last, unconfirmed)
            method = self.ledgers.ReadUnconfirmedEntries if unconfirmed else self.ledgers.ReadEntries
            calls: Iterable[ledger_pb2.ReadEntriesResponse] = method(request, timeout=self.timeout * 10)
            return calls

        # A resumed read up to the LAC asks the (new) gateway for it first:
        # ReadLastAddConfirmed refreshes what that gateway knows.
        refresh_lac = None if unconfirmed or last >= 0 else (lambda: self.last_add_confirmed(ledger_id))
        return self._resumed(stream, first, last, refresh_lac)

    def read_entry(self, ledger: LedgerId | str, entry_id: int) -> ledger_pb2.Entry:
        """One confirmed entry (ReadEntry), by read()'s rules with first =
        last = entry_id: past the LAC OutOfRangeError (reason
        ERROR_REASON_READ_BEYOND_LAC, details last_add_confirmed), an unknown
        ledger NotFoundError. One call, not resumed: a retryable error is
        raised for the caller to try again."""
        request = protocol.read_entry_request(ledger, entry_id)
        return self._unary(self.ledgers.ReadEntry, request, ledger_pb2.ReadEntryResponse).entry

    def read_entries_by_id(
        self, ledger: LedgerId | str, entry_ids: Iterable[int]
    ) -> Iterator[ledger_pb2.Entry | QuireClientError]:
        """The confirmed entries `entry_ids` (any order, repeats allowed), read
        one by one over a single ReadEntryStream: one item per id, in the
        order of `entry_ids`. An id that fails (past the LAC, ...) yields the
        error read_entry() would have raised, not raised, and the next ids
        are still read; check with isinstance(item, QuireClientError). A
        failure of the stream itself (the gateway lost, PERMISSION_DENIED, a
        deadline) is raised; it is not resumed."""
        wanted = [protocol.read_entry_request(ledger, entry_id) for entry_id in entry_ids]
        if not wanted:
            return
        requests = iter(wanted)
        call = self.ledgers.ReadEntryStream(requests, timeout=self.timeout * 10)
        answered = 0
        try:
            for response in call:
                answered += 1
                if response.HasField("error"):
                    yield _error_from_read_error(response.error)
                else:
                    yield response.entry
        except grpc.RpcError as exc:
            raise _translate(exc) from None
        finally:
            call.cancel()
        if answered != len(wanted):
            raise UnavailableError(
                grpc.StatusCode.UNAVAILABLE, "", f"the read stream ended after {answered} of {len(wanted)} answers"
            )

    def tail(self, ledger: LedgerId | str, first: int = 0) -> Iterator[ledger_pb2.Entry]:
        """Confirmed entries from `first` on, as they are confirmed; ends when
        the ledger is closed and its last entry delivered. Resumed like
        read() after a retryable failure: every entry once, in order."""
        ledger_proto = protocol.ledger_proto(ledger)
        first, _ = protocol.checked_read_range(first, -1)

        def stream(start: int) -> Iterable[ledger_pb2.TailEntriesResponse]:
            request = ledger_pb2.TailEntriesRequest(ledger_id=ledger_proto, first_entry_id=start)
            calls: Iterable[ledger_pb2.TailEntriesResponse] = self.ledgers.TailEntries(request)
            return calls

        return self._resumed(stream, first, None)

    def _resumed(
        self,
        open_stream: Callable[[int], Iterable[Any]],
        first: int,
        last: int | None,
        refresh_lac: Callable[[], int] | None = None,
    ) -> Iterator[ledger_pb2.Entry]:
        """The entries of `open_stream(first)`, opening it again from the next
        entry after a retryable failure (see read()). `last`: the last entry
        asked for (-1: up to the LAC, None: a tail)."""
        progress = protocol.ReadResumption(
            first, last, resume_attempts=self.resume_attempts, single_gateway=len(self._targets) == 1
        )
        while True:
            try:
                if progress.resuming and refresh_lac is not None and progress.next_id > refresh_lac():
                    return  # a read up to the LAC whose broken stream had delivered all of it
                for response in open_stream(progress.next_id):
                    progress.answered()
                    for entry in response.entries:
                        if progress.fresh(entry.entry_id):
                            yield entry
                return
            except grpc.RpcError as exc:
                error = _translate(exc)
            except QuireClientError as exc:  # from refresh_lac
                error = exc
            resume = progress.after_failure(error)
            if resume is None:
                return
            if resume.next_gateway:
                self._next_gateway("")
            self.resumed_reads += 1
            time.sleep(resume.pause)

    def writer(self, ledger: LedgerId | str, batch_size: int = 100) -> LedgerWriter:
        """A write session as a context manager: append() queues entries,
        acknowledgements arrive in the background, and leaving the block waits
        for every entry (raising the session's error, if any)."""
        return LedgerWriter(self, _as_ledger_id(ledger), batch_size)

    def put_blob(self, data: bytes | Iterable[bytes], scope_id: int = 0, part_bytes: int = 1024 * 1024) -> str:
        """Store a blob (bytes, or an iterable of parts for a large one); its id."""
        parts = [data] if isinstance(data, bytes | bytearray | memoryview) else data
        protocol.in_range("scope_id", scope_id, 0, U64_MAX)

        def requests() -> Iterator[blob_pb2.PutBlobRequest]:
            sent = False
            for part in parts:
                for request in protocol.blob_part_requests(part, scope_id, part_bytes):
                    yield request
                    sent = True
            if not sent:
                yield blob_pb2.PutBlobRequest(scope_id=scope_id)

        try:
            return str(self.blobs.PutBlob(requests(), timeout=self.timeout * 10).blob_id)
        except grpc.RpcError as exc:
            raise _translate(exc) from None

    def get_blob_parts(self, blob_id: str) -> Iterator[bytes]:
        try:
            for response in self.blobs.GetBlob(blob_pb2.GetBlobRequest(blob_id=blob_id), timeout=self.timeout * 10):
                yield response.data
        except grpc.RpcError as exc:
            raise _translate(exc) from None

    def get_blob(self, blob_id: str) -> bytes:
        return b"".join(self.get_blob_parts(blob_id))

    def last_add_confirmed(self, ledger: LedgerId | str) -> int:
        request = ledger_pb2.ReadLastAddConfirmedRequest(ledger_id=protocol.ledger_proto(ledger))
        answer = self._unary(self.ledgers.ReadLastAddConfirmed, request, ledger_pb2.ReadLastAddConfirmedResponse)
        last_add_confirmed: int = answer.last_add_confirmed
        return last_add_confirmed

    def close_ledger(self, ledger: LedgerId | str) -> common_pb2.LedgerMetadata:
        request = ledger_pb2.CloseLedgerRequest(ledger_id=protocol.ledger_proto(ledger))
        return self._unary(self.ledgers.CloseLedger, request, ledger_pb2.CloseLedgerResponse).metadata

    def delete_ledger(self, ledger: LedgerId | str) -> None:
        request = ledger_pb2.DeleteLedgerRequest(ledger_id=protocol.ledger_proto(ledger))
        self._unary(self.ledgers.DeleteLedger, request, ledger_pb2.DeleteLedgerResponse)

    def ledger_metadata(self, ledger: LedgerId | str) -> tuple[common_pb2.LedgerMetadata, int]:
        request = ledger_pb2.GetLedgerMetadataRequest(ledger_id=protocol.ledger_proto(ledger))
        response = self._unary(self.ledgers.GetLedgerMetadata, request, ledger_pb2.GetLedgerMetadataResponse)
        return response.metadata, response.version

    def list_ledgers(self, scope_id: int | None = None, page_size: int = 100) -> Iterator[common_pb2.LedgerMetadata]:
        """Ledgers of one scope, or of every scope when scope_id is None."""
        request = protocol.list_ledgers_request(scope_id, page_size, "")
        yield from protocol.ledger_pages(
            lambda page: self._unary(self.ledgers.ListLedgers, page, ledger_pb2.ListLedgersResponse), request
        )


class LedgerWriter:
    """One AppendEntries session (see QuireClient.writer)."""

    def __init__(self, client: QuireClient, ledger: LedgerId, batch_size: int) -> None:
        self._client = client
        self._ledger = ledger
        self._batch_size = batch_size
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=10 * batch_size)
        self._lock = threading.Condition()
        self.appended = 0  # entries handed to append()
        self.acknowledged = 0  # of those, how many are confirmed
        self.last_acknowledged = -1  # the highest entry id confirmed in this session
        self.error: QuireClientError | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LedgerWriter:
        self._thread = threading.Thread(target=self._run, name=f"quire-writer-{self._ledger}", daemon=True)
        self._thread.start()
        return self

    def _requests(self) -> Iterator[ledger_pb2.AppendEntriesRequest]:
        """One message per batch: whatever is queued, up to batch_size, so an
        entry never waits for a batch to fill."""
        yield ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(self._ledger))
        while True:
            payload = self._queue.get()
            if payload is None:
                return
            batch = [payload]
            while len(batch) < self._batch_size:
                try:
                    payload = self._queue.get_nowait()
                except queue.Empty:
                    break
                if payload is None:
                    yield ledger_pb2.AppendEntriesRequest(payloads=batch)
                    return
                batch.append(payload)
            yield ledger_pb2.AppendEntriesRequest(payloads=batch)

    def _run(self) -> None:
        try:
            for ack in self._client.ledgers.AppendEntries(self._requests()):
                with self._lock:
                    self.acknowledged += ack.last_entry_id - ack.first_entry_id + 1
                    self.last_acknowledged = ack.last_entry_id
                    self._lock.notify_all()
        except grpc.RpcError as exc:
            with self._lock:
                self.error = _translate(exc)
                self._lock.notify_all()
            while True:  # unblock append() callers
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break

    def append(self, payload: bytes) -> None:
        """Queue one entry (entries get ids in the order they are appended)."""
        if self.error is not None:
            raise self.error
        self._queue.put(payload)
        self.appended += 1

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every appended entry is acknowledged; the last entry id."""
        with self._lock:
            self._lock.wait_for(lambda: self.error is not None or self.acknowledged >= self.appended, timeout)
        if self.error is not None:
            raise self.error
        return self.last_acknowledged

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join()
        if exc_type is None and self.error is not None:
            raise self.error
