"""A small synchronous client for the gateway's LedgerService and
BlobService (and the registry's bookie listing).

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
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from quire.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire.common.v1 import common_pb2
from quire.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from quire.placement.v1 import placement_pb2, placement_pb2_grpc
from quire.registry.v1 import registry_pb2, registry_pb2_grpc
from quire_api.backoff import Backoff
from quire_api.bookie_addresses import bookie_rpc_address
from quire_api.errors import InvalidArgument
from quire_api.ids import U64_MAX, LedgerId, ledger_id_to_proto, validate_bookie_id, validate_request_id
from quire_api.replication import LostReplica, lost_replicas, marked_replicas

# The error classes live in quire_client.errors; importable from here as before.
from quire_client.errors import (  # noqa: F401
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

_CREATE_RETRY = Backoff(first_seconds=0.5, longest_seconds=2.0)  # a create retried after a lost answer


_UNEXPECTED_ENTRY_ID = "ERROR_REASON_UNEXPECTED_ENTRY_ID"
_RESUME_BACKOFF = Backoff(first_seconds=0.1, longest_seconds=2.0)  # between attempts of a resumed session


def _backoff(attempt: int, suggested: float | None = None) -> float:
    """The pause before attempt `attempt` + 1 of a resumed session (write,
    read or tail), never shorter than the delay the service suggested
    (RetryInfo), if any."""
    return max(_RESUME_BACKOFF.pause(attempt), suggested or 0.0)


@dataclass(frozen=True)
class AppendAck:
    first_entry_id: int
    last_entry_id: int
    last_add_confirmed: int


_U32_MAX = (1 << 32) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _in_range(name: str, value: int, low: int, high: int) -> int:
    """`value` for a request field, or INVALID_ARGUMENT naming the field (a
    number the field cannot hold would otherwise fail inside protobuf)."""
    if not low <= value <= high:
        raise InvalidArgument(f"{name} {value} is out of range: it must be between {low} and {high}")
    return value


def _as_ledger_id(ledger: LedgerId | str) -> LedgerId:
    return ledger if isinstance(ledger, LedgerId) else LedgerId.parse(ledger)


@dataclass(frozen=True)
class ClientTls:
    """TLS for the client's channels: the CA that signed the services'
    certificates and, for mutual TLS, the client's certificate and key."""

    ca: Path
    cert: Path | None = None
    key: Path | None = None

    def credentials(self, token: str | None = None) -> grpc.ChannelCredentials:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=self.ca.read_bytes(),
            private_key=self.key.read_bytes() if self.key else None,
            certificate_chain=self.cert.read_bytes() if self.cert else None,
        )
        if token:
            # Sent as `authorization: Bearer <token>` on every call.
            credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
        return credentials


def open_client_channel(
    target: str, tls: ClientTls | None, token: str | None = None, options: list[tuple[str, int]] | None = None
) -> grpc.Channel:
    """A plaintext channel without `tls` (development clusters), else TLS,
    with the bearer token on every call when one is given."""
    if tls is None:
        if token:
            raise ValueError("a bearer token needs TLS (grpc sends call credentials only over TLS)")
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, tls.credentials(token), options=options)


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
        registry: str = "127.0.0.1:7001",
        timeout: float = 30.0,
        placement: str = "127.0.0.1:7002",
        *,
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
        options = [
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ]
        self._targets = [gateway, *gateways]
        self.gateway = gateway  # the gateway calls go to now
        self._gateway_channel = open_client_channel(gateway, tls, token, options)
        # Opened at the first registry call: a client of the ledger calls alone may have no registry address.
        self._registry_target = registry
        self._registry_channel: grpc.Channel | None = None
        self._registry_stub: registry_pb2_grpc.RegistryServiceStub | None = None
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
        self._placement_target = placement
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

    @property
    def registry(self) -> registry_pb2_grpc.RegistryServiceStub:
        if self._registry_stub is None:
            self._registry_channel = open_client_channel(self._registry_target, self._tls, self._token, self._options)
            self._registry_stub = registry_pb2_grpc.RegistryServiceStub(self._registry_channel)
        return self._registry_stub

    def close(self) -> None:
        self._gateway_channel.close()
        if self._registry_channel is not None:
            self._registry_channel.close()

    def __enter__(self) -> QuireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _unary(self, method, request):  # type: ignore[no-untyped-def]
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise _translate(exc) from None

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
        if attempts < 1:
            raise ValueError(f"attempts {attempts} must be at least 1")
        request = ledger_pb2.CreateLedgerRequest(
            ensemble_size=_in_range("ensemble_size", ensemble_size, 0, _U32_MAX),
            write_quorum_size=_in_range("write_quorum_size", write_quorum_size, 0, _U32_MAX),
            ack_quorum_size=_in_range("ack_quorum_size", ack_quorum_size, 0, _U32_MAX),
            password=password,
            digest_type=digest_type,
            custom_metadata=custom_metadata or {},
            request_id=validate_request_id(request_id) if request_id is not None else str(uuid.uuid4()),
        )
        if ledger_id is not None:
            request.ledger_id.CopyFrom(ledger_id_to_proto(_as_ledger_id(ledger_id)))
        elif scope_id is not None:
            request.scope_id = _in_range("scope_id", scope_id, 0, U64_MAX)
        elif legacy:
            request.legacy = True
        sent_unanswered: QuireClientError | None = None  # an attempt that may have made the ledger
        for attempt in range(1, attempts + 1):
            try:
                return self._unary(self.ledgers.CreateLedger, request).metadata  # type: ignore[no-any-return]
            except (UnavailableError, DeadlineExceededError) as exc:
                if exc.reason == "ERROR_REASON_NOT_ENOUGH_BOOKIES":  # a definite answer
                    raise
                if not never_sent(exc):
                    sent_unanswered = exc
                if attempt == attempts:
                    # A later attempt that could not connect says less than an earlier one that was lost.
                    raise sent_unanswered or exc from None
                time.sleep(_CREATE_RETRY.pause(attempt))
        raise AssertionError("unreachable")

    def open_ledger(
        self, ledger: LedgerId | str, password: bytes = b"", recovery: bool = False
    ) -> ledger_pb2.OpenLedgerResponse:
        """Open for reading: metadata and LAC. With recovery, fence the
        ledger's bookies, recover its end and close it (the LAC returned is
        then its last entry)."""
        request = ledger_pb2.OpenLedgerRequest(
            ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)), password=password, recovery=recovery
        )
        return self._unary(self.ledgers.OpenLedger, request)  # type: ignore[no-any-return]

    def recover_ledger(self, ledger: LedgerId | str, password: bytes = b"") -> common_pb2.LedgerMetadata:
        """Fence, recover and close a ledger; its closed metadata."""
        return self.open_ledger(ledger, password, recovery=True).metadata

    def add_entry(self, ledger: LedgerId | str, payload: bytes, expected_entry_id: int | None = None) -> int:
        """Append one entry; with `expected_entry_id`, only if it gets that id
        (else FailedPreconditionError, reason ERROR_REASON_UNEXPECTED_ENTRY_ID,
        details next_entry_id)."""
        request = ledger_pb2.AddEntryRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)), payload=payload)
        if expected_entry_id is not None:
            request.expected_entry_id = expected_entry_id
        return self._unary(self.ledgers.AddEntry, request).entry_id

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
        `resume_attempts`, end the iteration with the error."""
        ledger_id = _as_ledger_id(ledger)
        source = iter(payloads)
        unacked: deque[bytes] = deque()  # sent (or being sent), not acknowledged, in order
        next_id: int | None = None  # the id of unacked[0] (or of the next entry), once known
        owner_address = ""
        attempt = 0
        # Per call, so that appends running at once on one client do not stop each other's sessions.
        sessions = _AppendSessions()
        while True:
            session = sessions.begin()  # an older session's request stream stops taking entries
            try:
                if next_id is None and self.conditional_resume:
                    next_id = self.next_entry_id(ledger_id)
                expected = next_id if self.conditional_resume else None
                calls = self.ledgers.AppendEntries(
                    self._session_requests(ledger_id, expected, unacked, source, batch_size, sessions, session),
                    timeout=self.timeout * 10,
                )
                for ack in calls:
                    if ack.HasField("owner"):
                        owner_address = ack.owner.address
                    for _ in range(ack.last_entry_id - ack.first_entry_id + 1):
                        unacked.popleft()
                    next_id, attempt = ack.last_entry_id + 1, 0
                    yield AppendAck(ack.first_entry_id, ack.last_entry_id, ack.last_add_confirmed)
                if not unacked:
                    return
                raise UnavailableError(grpc.StatusCode.UNAVAILABLE, "", "the write session ended early")
            except grpc.RpcError as exc:
                error = _translate(exc)
            except UnavailableError as exc:
                error = exc
            attempt += 1
            if attempt > self.resume_attempts:
                raise error
            if isinstance(error, UnavailableError):
                self.resumed_writes += 1
                self._next_gateway(owner_address)
            elif error.reason == _UNEXPECTED_ENTRY_ID and self.conditional_resume:
                self.resumed_writes += 1
                actual = int(error.details.get("next_entry_id", "-1"))
                settled = int(error.details.get("last_add_confirmed", "-1")) >= actual - 1
                assert next_id is not None  # always known with conditional_resume
                landed = actual - next_id
                if landed < 0 or landed > len(unacked):
                    raise FailedPreconditionError(
                        error.code, error.reason, f"another writer wrote ledger {ledger_id}: {error.message}"
                    ) from None
                if settled:
                    for _ in range(landed):
                        unacked.popleft()
                    self.landed_on_resume += landed
                    if landed:
                        yield AppendAck(next_id, actual - 1, actual - 1)
                    next_id, attempt = actual, 0
                    continue
            else:
                raise error
            time.sleep(_backoff(attempt))

    def next_entry_id(self, ledger: LedgerId | str) -> int:
        """The id the ledger's writer would give its next entry, asked without
        writing: a conditional AddEntry with an impossible expected id (-1) is
        refused with it."""
        try:
            self.add_entry(ledger, b"", expected_entry_id=-1)
        except FailedPreconditionError as exc:
            if exc.reason == _UNEXPECTED_ENTRY_ID:
                return int(exc.details["next_entry_id"])
            raise
        raise FailedPreconditionError(grpc.StatusCode.FAILED_PRECONDITION, "", "expected_entry_id -1 was accepted")

    def _session_requests(
        self,
        ledger: LedgerId,
        expected: int | None,
        unacked: deque[bytes],
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
        first = ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(ledger))
        if expected is not None:
            first.expected_entry_id = expected
        with sessions.lock:
            resend = list(unacked)
        yield first
        for start in range(0, len(resend), batch_size):
            yield ledger_pb2.AppendEntriesRequest(payloads=resend[start : start + batch_size])
        while True:
            with sessions.lock:
                if sessions.current != session:
                    return
                batch = list(itertools.islice(source, batch_size))
                unacked.extend(batch)
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
        first = _in_range("first_entry_id", first, _I64_MIN, _I64_MAX)
        last = _in_range("last_entry_id", last, _I64_MIN, _I64_MAX)

        def stream(start: int) -> Iterable[ledger_pb2.ReadEntriesResponse]:
            if unconfirmed:
                request = ledger_pb2.ReadUnconfirmedEntriesRequest(
                    ledger_id=ledger_proto, first_entry_id=start, last_entry_id=last
                )
                return self.ledgers.ReadUnconfirmedEntries(request, timeout=self.timeout * 10)  # type: ignore[no-any-return]
            return self.ledgers.ReadEntries(  # type: ignore[no-any-return]
                ledger_pb2.ReadEntriesRequest(ledger_id=ledger_proto, first_entry_id=start, last_entry_id=last),
                timeout=self.timeout * 10,
            )

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
        request = ledger_pb2.ReadEntryRequest(
            ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)),
            entry_id=_in_range("entry_id", entry_id, _I64_MIN, _I64_MAX),
        )
        return self._unary(self.ledgers.ReadEntry, request).entry  # type: ignore[no-any-return]

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
        ledger_proto = ledger_id_to_proto(_as_ledger_id(ledger))
        wanted = [_in_range("entry_id", entry_id, _I64_MIN, _I64_MAX) for entry_id in entry_ids]
        if not wanted:
            return
        requests = (ledger_pb2.ReadEntryRequest(ledger_id=ledger_proto, entry_id=entry_id) for entry_id in wanted)
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
        ledger_proto = ledger_id_to_proto(_as_ledger_id(ledger))
        first = _in_range("first_entry_id", first, _I64_MIN, _I64_MAX)

        def stream(start: int) -> Iterable[ledger_pb2.TailEntriesResponse]:
            request = ledger_pb2.TailEntriesRequest(ledger_id=ledger_proto, first_entry_id=start)
            return self.ledgers.TailEntries(request)  # type: ignore[no-any-return]

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
        next_id = first
        attempt = 0
        resuming = False
        started = False  # a stream answered: a failure now is a broken stream, not a refused call
        while True:
            try:
                if resuming and refresh_lac is not None and next_id > refresh_lac():
                    return  # a read up to the LAC whose broken stream had delivered all of it
                for response in open_stream(next_id):
                    started = True
                    for entry in response.entries:
                        if entry.entry_id < next_id:
                            continue  # already delivered before the stream was resumed
                        yield entry
                        next_id, attempt = entry.entry_id + 1, 0
                return
            except grpc.RpcError as exc:
                error = _translate(exc)
            except QuireClientError as exc:  # from refresh_lac
                error = exc
            if started and last is not None and last >= 0 and next_id > last:
                return  # every entry asked for was delivered; only the end of the stream was lost
            attempt += 1
            if not error.retryable or attempt > self.resume_attempts:
                raise error
            if not started and len(self._targets) == 1:
                raise error  # the only gateway refused or cannot be reached: say so at once
            if isinstance(error, UnavailableError):
                self._next_gateway("")
            self.resumed_reads += 1
            resuming = True
            time.sleep(_backoff(attempt, error.retry_delay))

    def writer(self, ledger: LedgerId | str, batch_size: int = 100) -> LedgerWriter:
        """A write session as a context manager: append() queues entries,
        acknowledgements arrive in the background, and leaving the block waits
        for every entry (raising the session's error, if any)."""
        return LedgerWriter(self, _as_ledger_id(ledger), batch_size)

    def put_blob(self, data: bytes | Iterable[bytes], scope_id: int = 0, part_bytes: int = 1024 * 1024) -> str:
        """Store a blob (bytes, or an iterable of parts for a large one); its id."""
        parts = [data] if isinstance(data, bytes | bytearray | memoryview) else data
        _in_range("scope_id", scope_id, 0, U64_MAX)

        def requests() -> Iterator[blob_pb2.PutBlobRequest]:
            sent = False
            for part in parts:
                for start in range(0, max(len(part), 1), part_bytes):
                    yield blob_pb2.PutBlobRequest(scope_id=scope_id, data=bytes(part[start : start + part_bytes]))
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
        request = ledger_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        return self._unary(self.ledgers.ReadLastAddConfirmed, request).last_add_confirmed

    def close_ledger(self, ledger: LedgerId | str) -> common_pb2.LedgerMetadata:
        request = ledger_pb2.CloseLedgerRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        return self._unary(self.ledgers.CloseLedger, request).metadata

    def delete_ledger(self, ledger: LedgerId | str) -> None:
        request = ledger_pb2.DeleteLedgerRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        self._unary(self.ledgers.DeleteLedger, request)

    def ledger_metadata(self, ledger: LedgerId | str) -> tuple[common_pb2.LedgerMetadata, int]:
        request = ledger_pb2.GetLedgerMetadataRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        response = self._unary(self.ledgers.GetLedgerMetadata, request)
        return response.metadata, response.version

    def list_ledgers(self, scope_id: int | None = None, page_size: int = 100) -> Iterator[common_pb2.LedgerMetadata]:
        """Ledgers of one scope, or of every scope when scope_id is None."""
        if scope_id is not None:
            _in_range("scope_id", scope_id, 0, U64_MAX)
        token = ""
        while True:
            response = self._unary(
                self.ledgers.ListLedgers,
                ledger_pb2.ListLedgersRequest(
                    scope_id=scope_id or 0, all_scopes=scope_id is None, page_size=page_size, page_token=token
                ),
            )
            yield from response.ledgers
            token = response.next_page_token
            if not token:
                return

    def list_bookies(self, state: int = registry_pb2.BOOKIE_STATE_ALL) -> list[registry_pb2.BookieRecord]:
        return list(self._unary(self.registry.ListBookies, registry_pb2.ListBookiesRequest(state=state)).bookies)

    def bookie_info(self, record: registry_pb2.BookieRecord, timeout: float = 5.0) -> bookie_pb2.GetBookieInfoResponse:
        """One bookie's GetBookieInfo, at the address its registration resolves to."""
        address = bookie_rpc_address(record.bookie_id, record.service_info)
        with open_client_channel(address, self._tls, self._token, self._options) as channel:
            try:
                return bookie_pb2_grpc.BookieServiceStub(channel).GetBookieInfo(
                    bookie_pb2.GetBookieInfoRequest(), timeout=timeout
                )
            except grpc.RpcError as exc:
                raise _translate(exc) from None

    def placement_weights(self) -> placement_pb2.GetPlacementWeightsResponse:
        with open_client_channel(self._placement_target, self._tls, self._token, self._options) as channel:
            stub = placement_pb2_grpc.PlacementServiceStub(channel)
            return self._unary(stub.GetPlacementWeights, placement_pb2.GetPlacementWeightsRequest())

    def under_replicated(self) -> list[tuple[common_pb2.LedgerMetadata, LostReplica, str]]:
        """Every ledger segment with a replica on a bookie that is not registered
        ("missing"), or with entries flagged for repair in the metadata
        ("flagged": a bookie a writer left out without an ensemble change, or
        copies a read, a writer's ensemble change or the scrub flagged); the
        auditor repairs them (of open ledgers, the entries already confirmed)."""
        registered = {record.bookie_id for record in self.list_bookies()}
        found: list[tuple[common_pb2.LedgerMetadata, LostReplica, str]] = []
        for metadata in self.list_ledgers():
            missing = {b for e in metadata.ensembles for b in e.bookie_ids} - registered
            found.extend((metadata, replica, "missing") for replica in lost_replicas(metadata, missing))
            found.extend(
                (metadata, replica, "flagged")
                for replica in marked_replicas(metadata)
                if replica.bookie_id not in missing
            )
        return found

    def auditor(self) -> registry_pb2.Leader:
        """Which gateway holds the auditor role (holder empty: none yet), and
        the figures it publishes: what its scrub checked, found and repaired."""
        return self._unary(self.registry.GetLeader, registry_pb2.GetLeaderRequest(role="auditor")).leader

    def delete_cookie(self, bookie_id: str) -> bool:
        """Remove a stopped bookie's cookie (the end of a decommission); False
        when it has none. The registry refuses while the bookie is registered."""
        validate_bookie_id(bookie_id)
        try:
            current = self._unary(self.registry.GetCookie, registry_pb2.GetCookieRequest(bookie_id=bookie_id))
        except NotFoundError:
            return False
        self._unary(
            self.registry.DeleteCookie,
            registry_pb2.DeleteCookieRequest(bookie_id=bookie_id, expected_version=current.version),
        )
        return True

    def bookie_service_info(self, bookie_id: str) -> registry_pb2.GetBookieServiceInfoResponse:
        """A bookie's registration as stored, and the service info clients use."""
        validate_bookie_id(bookie_id)
        return self._unary(
            self.registry.GetBookieServiceInfo, registry_pb2.GetBookieServiceInfoRequest(bookie_id=bookie_id)
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
