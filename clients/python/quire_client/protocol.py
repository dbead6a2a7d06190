"""What the sync client (quire_client.client) and the asyncio client
(quire_client.aio) share, with no I/O of its own: building requests and
checking their fields, the create retry rule, the bookkeeping that resumes a
write session or a read without a gap or a duplicate, and call deadlines.
Each client does the calls; this module decides what to send and what to do
with each answer, so the two cannot drift apart."""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import grpc

from quire_api.backoff import Backoff
from quire_api.errors import InvalidArgument
from quire_api.ids import U64_MAX, LedgerId, ledger_id_to_proto, validate_request_id
from quire_client.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    QuireClientError,
    UnavailableError,
    never_sent,
)
from quire_client.results import AppendAck, DigestType
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import blob_pb2, ledger_pb2

UNEXPECTED_ENTRY_ID = "ERROR_REASON_UNEXPECTED_ENTRY_ID"
NOT_ENOUGH_BOOKIES = "ERROR_REASON_NOT_ENOUGH_BOOKIES"

U32_MAX = (1 << 32) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

CREATE_RETRY = Backoff(first_seconds=0.5, longest_seconds=2.0)  # a create retried after a lost answer
RESUME_BACKOFF = Backoff(first_seconds=0.1, longest_seconds=2.0)  # between attempts of a resumed session


def resume_pause(attempt: int, suggested: float | None = None) -> float:
    """The pause before attempt `attempt` + 1 of a resumed session (write,
    read or tail), never shorter than the delay the service suggested
    (RetryInfo), if any."""
    return max(RESUME_BACKOFF.pause(attempt), suggested or 0.0)


def in_range(name: str, value: int, low: int, high: int) -> int:
    """`value` for a request field, or INVALID_ARGUMENT naming the field (a
    number the field cannot hold would otherwise fail inside protobuf)."""
    if not low <= value <= high:
        raise InvalidArgument(f"{name} {value} is out of range: it must be between {low} and {high}")
    return value


def as_ledger_id(ledger: LedgerId | str) -> LedgerId:
    return ledger if isinstance(ledger, LedgerId) else LedgerId.parse(ledger)


def ledger_proto(ledger: LedgerId | str) -> common_pb2.LedgerId:
    return ledger_id_to_proto(as_ledger_id(ledger))


# Requests -------------------------------------------------------------------


def create_ledger_request(
    *,
    ensemble_size: int,
    write_quorum_size: int,
    ack_quorum_size: int,
    password: bytes,
    digest_type: int | DigestType,
    ledger_id: LedgerId | str | None,
    scope_id: int | None,
    legacy: bool,
    custom_metadata: Mapping[str, str] | None,
    request_id: str | None,
) -> ledger_pb2.CreateLedgerRequest:
    """A CreateLedger request; it always carries a request_id (a new UUID
    unless one is given), so that sending it again cannot make a second ledger."""
    request = ledger_pb2.CreateLedgerRequest(
        ensemble_size=in_range("ensemble_size", ensemble_size, 0, U32_MAX),
        write_quorum_size=in_range("write_quorum_size", write_quorum_size, 0, U32_MAX),
        ack_quorum_size=in_range("ack_quorum_size", ack_quorum_size, 0, U32_MAX),
        password=password,
        digest_type=digest_type.value if isinstance(digest_type, DigestType) else digest_type,
        custom_metadata=dict(custom_metadata or {}),
        request_id=validate_request_id(request_id) if request_id is not None else str(uuid.uuid4()),
    )
    if ledger_id is not None:
        request.ledger_id.CopyFrom(ledger_proto(ledger_id))
    elif scope_id is not None:
        request.scope_id = in_range("scope_id", scope_id, 0, U64_MAX)
    elif legacy:
        request.legacy = True
    return request


def add_entry_request(
    ledger: LedgerId | str, payload: bytes, expected_entry_id: int | None = None
) -> ledger_pb2.AddEntryRequest:
    request = ledger_pb2.AddEntryRequest(ledger_id=ledger_proto(ledger), payload=payload)
    if expected_entry_id is not None:
        request.expected_entry_id = in_range("expected_entry_id", expected_entry_id, I64_MIN, I64_MAX)
    return request


def next_entry_id_probe(ledger: LedgerId | str) -> ledger_pb2.AddEntryRequest:
    """An AddEntry that cannot be accepted: its writer refuses it with the id
    its next entry would get (see next_entry_id_from)."""
    return add_entry_request(ledger, b"", expected_entry_id=-1)


def next_entry_id_from(error: FailedPreconditionError) -> int:
    """The next entry id a refused next_entry_id_probe names; the error
    itself if it was refused for another reason."""
    if error.reason != UNEXPECTED_ENTRY_ID:
        raise error
    return int(error.details["next_entry_id"])


PROBE_ACCEPTED = FailedPreconditionError(grpc.StatusCode.FAILED_PRECONDITION, "", "expected_entry_id -1 was accepted")


def read_request(
    ledger: common_pb2.LedgerId, first: int, last: int, unconfirmed: bool
) -> ledger_pb2.ReadEntriesRequest | ledger_pb2.ReadUnconfirmedEntriesRequest:
    kind = ledger_pb2.ReadUnconfirmedEntriesRequest if unconfirmed else ledger_pb2.ReadEntriesRequest
    return kind(ledger_id=ledger, first_entry_id=first, last_entry_id=last)


def checked_read_range(first: int, last: int) -> tuple[int, int]:
    return in_range("first_entry_id", first, I64_MIN, I64_MAX), in_range("last_entry_id", last, I64_MIN, I64_MAX)


def read_entry_request(ledger: LedgerId | str, entry_id: int) -> ledger_pb2.ReadEntryRequest:
    return ledger_pb2.ReadEntryRequest(
        ledger_id=ledger_proto(ledger), entry_id=in_range("entry_id", entry_id, I64_MIN, I64_MAX)
    )


def list_ledgers_request(scope_id: int | None, page_size: int, page_token: str) -> ledger_pb2.ListLedgersRequest:
    """One page of ListLedgers: of one scope, or of every scope when scope_id is None."""
    if scope_id is not None:
        in_range("scope_id", scope_id, 0, U64_MAX)
    return ledger_pb2.ListLedgersRequest(
        scope_id=scope_id or 0, all_scopes=scope_id is None, page_size=page_size, page_token=page_token
    )


def ledger_pages(
    ask: Callable[[ledger_pb2.ListLedgersRequest], ledger_pb2.ListLedgersResponse],
    request: ledger_pb2.ListLedgersRequest,
) -> Iterator[common_pb2.LedgerMetadata]:
    """Every ledger ListLedgers lists from `request` on, asking page after
    page through `ask` (one unary call, errors translated by the caller)."""
    while True:
        response = ask(request)
        yield from response.ledgers
        if not response.next_page_token:
            return
        request.page_token = response.next_page_token


def blob_part_requests(
    part: bytes | bytearray | memoryview, scope_id: int, part_bytes: int
) -> Iterator[blob_pb2.PutBlobRequest]:
    """One part of a blob as PutBlob messages of at most `part_bytes` each
    (an empty part: one empty message)."""
    for start in range(0, max(len(part), 1), part_bytes):
        yield blob_pb2.PutBlobRequest(scope_id=scope_id, data=bytes(part[start : start + part_bytes]))


# Creating a ledger ------------------------------------------------------------


class CreateAttempts:
    """The retry rule of CreateLedger. A create that fails UNAVAILABLE or
    DEADLINE_EXCEEDED (its outcome unknown) is sent again with the same
    request_id, up to `attempts` times: the gateway then returns the ledger
    the lost attempt made, never a second one. Not enough bookies is a
    definite answer, not retried."""

    def __init__(self, attempts: int) -> None:
        if attempts < 1:
            raise ValueError(f"attempts {attempts} must be at least 1")
        self.attempts = attempts
        self._sent_unanswered: QuireClientError | None = None  # an attempt that may have made the ledger

    def pause_after(self, error: QuireClientError, attempt: int) -> float:
        """How long to wait before the next attempt after attempt `attempt`
        failed with `error`; raises the error to report when not to try again."""
        if not isinstance(error, UnavailableError | DeadlineExceededError) or error.reason == NOT_ENOUGH_BOOKIES:
            raise error
        if not never_sent(error):
            self._sent_unanswered = error
        if attempt >= self.attempts:
            # A later attempt that could not connect says less than an earlier one that was lost.
            raise (self._sent_unanswered or error) from None
        return CREATE_RETRY.pause(attempt)


# Resuming a write session or a read --------------------------------------------


@dataclass(frozen=True)
class Resume:
    """What to do before the next attempt of a resumed session: move to the
    next gateway or not, how long to wait first, and (for a write) the
    acknowledgement of entries found stored though their answer was lost."""

    next_gateway: bool
    pause: float
    landed: AppendAck | None = None


class WriteResumption:
    """The bookkeeping of one append call: the entries sent and not yet
    acknowledged (in order), the id the first of them gets, and how a failed
    session is resumed.

    A session that fails UNAVAILABLE (its gateway died, or the owner it
    relays to) is resumed through the next gateway as a conditional append
    (expected_entry_id = the first unacknowledged entry's id). If some of the
    unacknowledged entries landed, the writer refuses with the id its next
    entry would get; once its LAC shows them confirmed they are acknowledged
    here and the rest are sent again, so none is lost or written twice. This
    assumes one writer per ledger (as BookKeeper's ledgers have)."""

    def __init__(self, ledger: LedgerId, *, conditional: bool, resume_attempts: int) -> None:
        self.ledger = ledger
        self.conditional = conditional
        self.resume_attempts = resume_attempts
        self.unacked: deque[bytes] = deque()  # sent (or being sent), not acknowledged, in order
        self.next_id: int | None = None  # the id of unacked[0] (or of the next entry), once known
        self.settled = 0  # entries of the call acknowledged so far, or found stored: unacked[0]'s position
        self.owner_address = ""  # the ledger's writer, as the answers name it
        self.attempt = 0  # attempts since the last progress

    @property
    def needs_next_id(self) -> bool:
        """Whether the next session must first ask the writer for its next entry id."""
        return self.next_id is None and self.conditional

    def first_request(self) -> ledger_pb2.AppendEntriesRequest:
        """A session's first message: the ledger, and the condition."""
        first = ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(self.ledger))
        if self.conditional and self.next_id is not None:
            first.expected_entry_id = self.next_id
        return first

    def acknowledged(self, answer: ledger_pb2.AppendEntriesResponse) -> AppendAck:
        if answer.HasField("owner"):
            self.owner_address = answer.owner.address
        self._settle(answer.last_entry_id - answer.first_entry_id + 1)
        self.next_id, self.attempt = answer.last_entry_id + 1, 0
        return AppendAck(answer.first_entry_id, answer.last_entry_id, answer.last_add_confirmed)

    def _settle(self, count: int) -> None:
        for _ in range(count):
            self.unacked.popleft()
        self.settled += count

    @staticmethod
    def ended_early() -> UnavailableError:
        """The error of a session whose stream ended with entries unacknowledged."""
        return UnavailableError(grpc.StatusCode.UNAVAILABLE, "", "the write session ended early")

    def after_failure(self, error: QuireClientError) -> Resume:
        """How to resume after a session failed with `error`; raises it when
        the session cannot be resumed (another error, or out of attempts)."""
        self.attempt += 1
        if self.attempt > self.resume_attempts:
            raise error
        if isinstance(error, UnavailableError):
            return Resume(next_gateway=True, pause=resume_pause(self.attempt))
        if error.reason != UNEXPECTED_ENTRY_ID or not self.conditional:
            raise error
        actual = int(error.details.get("next_entry_id", "-1"))
        settled = int(error.details.get("last_add_confirmed", "-1")) >= actual - 1
        assert self.next_id is not None  # always known with conditional sessions
        landed = actual - self.next_id
        if landed < 0 or landed > len(self.unacked):
            raise FailedPreconditionError(
                error.code, error.reason, f"another writer wrote ledger {self.ledger}: {error.message}"
            ) from None
        if not settled:  # the landed entries are not confirmed yet: ask again after a pause
            return Resume(next_gateway=False, pause=resume_pause(self.attempt))
        if not landed:  # nothing landed: resend at once, but count the attempt (no progress)
            return Resume(next_gateway=False, pause=0.0)
        ack = AppendAck(self.next_id, actual - 1, actual - 1)
        self._settle(landed)
        self.next_id, self.attempt = actual, 0
        return Resume(next_gateway=False, pause=0.0, landed=ack)


class ReadResumption:
    """The bookkeeping of one resumed read or tail: the next entry to
    deliver, and whether and how to resume after a failure.

    Reads are idempotent, so a stream that fails part way with a retryable
    error is opened again from the entry after the last one delivered,
    through the next gateway when it was lost (UNAVAILABLE), after a pause
    (doubling, at least the RetryInfo delay): every entry is delivered once,
    in order, with no gap. `last`: the last entry asked for (-1: up to the
    LAC, None: a tail)."""

    def __init__(self, first: int, last: int | None, *, resume_attempts: int, single_gateway: bool) -> None:
        self.next_id = first
        self.last = last
        self.resume_attempts = resume_attempts
        self.single_gateway = single_gateway
        self.attempt = 0
        self.resuming = False  # a stream failed and is being opened again
        self.started = False  # a stream answered: a failure now is a broken stream, not a refused call

    def answered(self) -> None:
        self.started = True

    def fresh(self, entry_id: int) -> bool:
        """Whether entry `entry_id` is to be delivered (not already delivered
        before the stream was resumed); it counts as delivered from here."""
        if entry_id < self.next_id:
            return False
        self.next_id, self.attempt = entry_id + 1, 0
        return True

    def after_failure(self, error: QuireClientError) -> Resume | None:
        """How to resume after the stream failed with `error`; None when
        everything asked for was already delivered. Raises the error when the
        read cannot be resumed: a final error, out of attempts, or the only
        gateway refused before answering at all."""
        if self.started and self.last is not None and self.last >= 0 and self.next_id > self.last:
            return None  # only the end of the stream was lost
        self.attempt += 1
        if not error.retryable or self.attempt > self.resume_attempts:
            raise error
        if not self.started and self.single_gateway:
            raise error  # the only gateway refused or cannot be reached: say so at once
        self.resuming = True
        return Resume(
            next_gateway=isinstance(error, UnavailableError), pause=resume_pause(self.attempt, error.retry_delay)
        )


# Deadlines --------------------------------------------------------------------


class Deadline:
    """The deadline of one call of the client, across all the RPCs it makes
    (retries, resumptions, pages): each RPC gets what is left of it."""

    def __init__(self, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout {timeout} must be more than 0 seconds")
        self.timeout = timeout
        self._ends = None if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        """Seconds left for the next RPC (None: no deadline); DEADLINE_EXCEEDED when none are."""
        if self._ends is None:
            return None
        left = self._ends - time.monotonic()
        if left <= 0:
            raise self.exceeded()
        return left

    def pause(self, seconds: float) -> float:
        """`seconds`, cut short so that a pause never outlasts the deadline."""
        left = self.remaining()
        return seconds if left is None else min(seconds, left)

    def exceeded(self) -> DeadlineExceededError:
        return DeadlineExceededError(
            grpc.StatusCode.DEADLINE_EXCEEDED, "", f"the call did not finish within its timeout of {self.timeout}s"
        )
