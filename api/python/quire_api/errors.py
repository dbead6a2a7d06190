"""Typed errors that carry their gRPC status code, reason and retryability.

Domain code raises these; one server interceptor (quire_common.server) turns
them into a gRPC status with a google.rpc.ErrorInfo detail, and a
google.rpc.RetryInfo when the reason is retryable (quire_api.rpc_status).
The status code is kept as a name so that domain modules need no grpc import.
The Python client's error classes derive from these, so callers and services
share one hierarchy.

Retryability belongs to the reason, not to the status code: RETRY_DELAYS is
the one table of which reasons may succeed when the same call is tried again,
and after how long.
"""

from __future__ import annotations

import enum

ERROR_DOMAIN = "quire"


class Reason(enum.StrEnum):
    """Every ErrorInfo.reason, by the names of the quire.common.v1.ErrorReason
    catalogue (a unit test keeps the two identical)."""

    INVALID_ARGUMENT = "ERROR_REASON_INVALID_ARGUMENT"
    INVALID_LEDGER_ID = "ERROR_REASON_INVALID_LEDGER_ID"
    INVALID_QUORUM = "ERROR_REASON_INVALID_QUORUM"
    INVALID_BOOKIE_ID = "ERROR_REASON_INVALID_BOOKIE_ID"
    ENTRY_HEADER_MISMATCH = "ERROR_REASON_ENTRY_HEADER_MISMATCH"
    LEDGER_NOT_FOUND = "ERROR_REASON_LEDGER_NOT_FOUND"
    ENTRY_NOT_FOUND = "ERROR_REASON_ENTRY_NOT_FOUND"
    BOOKIE_NOT_FOUND = "ERROR_REASON_BOOKIE_NOT_FOUND"
    READ_BEYOND_LAC = "ERROR_REASON_READ_BEYOND_LAC"
    LEDGER_FENCED = "ERROR_REASON_LEDGER_FENCED"
    LEDGER_CLOSED = "ERROR_REASON_LEDGER_CLOSED"
    BOOKIE_READ_ONLY = "ERROR_REASON_BOOKIE_READ_ONLY"
    LEDGER_NOT_WRITABLE_HERE = "ERROR_REASON_LEDGER_NOT_WRITABLE_HERE"
    LEDGER_OWNER_GONE = "ERROR_REASON_LEDGER_OWNER_GONE"
    UNEXPECTED_ENTRY_ID = "ERROR_REASON_UNEXPECTED_ENTRY_ID"
    METADATA_VERSION_CONFLICT = "ERROR_REASON_METADATA_VERSION_CONFLICT"
    LEDGER_EXISTS = "ERROR_REASON_LEDGER_EXISTS"
    BOOKIE_ALREADY_REGISTERED = "ERROR_REASON_BOOKIE_ALREADY_REGISTERED"
    COOKIE_EXISTS = "ERROR_REASON_COOKIE_EXISTS"
    REQUEST_ID_REUSED = "ERROR_REASON_REQUEST_ID_REUSED"
    WRONG_PASSWORD = "ERROR_REASON_WRONG_PASSWORD"
    NOT_ENOUGH_BOOKIES = "ERROR_REASON_NOT_ENOUGH_BOOKIES"
    BOOKIE_UNAVAILABLE = "ERROR_REASON_BOOKIE_UNAVAILABLE"
    METADATA_STORE_UNAVAILABLE = "ERROR_REASON_METADATA_STORE_UNAVAILABLE"
    SERVICE_UNAVAILABLE = "ERROR_REASON_SERVICE_UNAVAILABLE"
    DISK_FULL = "ERROR_REASON_DISK_FULL"
    OVERLOADED = "ERROR_REASON_OVERLOADED"
    ENTRY_TOO_LARGE = "ERROR_REASON_ENTRY_TOO_LARGE"
    DIGEST_MISMATCH = "ERROR_REASON_DIGEST_MISMATCH"
    STORAGE_ERROR = "ERROR_REASON_STORAGE_ERROR"
    NOT_IMPLEMENTED = "ERROR_REASON_NOT_IMPLEMENTED"
    UNAUTHENTICATED = "ERROR_REASON_UNAUTHENTICATED"
    PERMISSION_DENIED_ROLE = "ERROR_REASON_PERMISSION_DENIED_ROLE"
    SERVICE_IDENTITY_REQUIRED = "ERROR_REASON_SERVICE_IDENTITY_REQUIRED"
    CLIENT_IDENTITY_REQUIRED = "ERROR_REASON_CLIENT_IDENTITY_REQUIRED"


# The reasons for which the same call may succeed if tried again, with the
# pause to suggest (RetryInfo.retry_delay). Every other reason is final: the
# call needs another input, another ledger or an operator first.
RETRY_DELAYS: dict[str, float] = {
    Reason.METADATA_VERSION_CONFLICT: 0.1,  # re-read the metadata and try again
    Reason.NOT_ENOUGH_BOOKIES: 5.0,  # bookies come back or register; a few seconds at least
    Reason.BOOKIE_UNAVAILABLE: 1.0,
    Reason.METADATA_STORE_UNAVAILABLE: 1.0,
    Reason.SERVICE_UNAVAILABLE: 1.0,
    Reason.OVERLOADED: 0.5,
}


def retry_delay_for(reason: str) -> float | None:
    """Seconds to wait before trying again after `reason`, or None when trying
    again cannot help."""
    return RETRY_DELAYS.get(reason)


class QuireError(Exception):
    """Base of every error a Quire service returns on purpose."""

    code: str = "INTERNAL"
    default_reason: str = "ERROR_REASON_UNSPECIFIED"

    @property
    def retry_delay(self) -> float | None:
        """Seconds to wait before the same call may succeed; None: it will not."""
        return retry_delay_for(self.reason)

    @property
    def retryable(self) -> bool:
        return self.retry_delay is not None

    def __init__(self, message: str, reason: str | None = None, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = str(reason or self.default_reason)
        self.metadata = {key: str(value) for key, value in metadata.items()}

    def __str__(self) -> str:
        return self.message


class InvalidArgument(QuireError):
    code = "INVALID_ARGUMENT"
    default_reason = Reason.INVALID_ARGUMENT


class NotFound(QuireError):
    code = "NOT_FOUND"
    default_reason = Reason.LEDGER_NOT_FOUND


class OutOfRange(QuireError):
    code = "OUT_OF_RANGE"
    default_reason = Reason.READ_BEYOND_LAC


class FailedPrecondition(QuireError):
    code = "FAILED_PRECONDITION"
    default_reason = Reason.LEDGER_CLOSED


class Aborted(QuireError):
    code = "ABORTED"
    default_reason = Reason.METADATA_VERSION_CONFLICT


class AlreadyExists(QuireError):
    code = "ALREADY_EXISTS"
    default_reason = Reason.LEDGER_EXISTS


class PermissionDenied(QuireError):
    code = "PERMISSION_DENIED"
    default_reason = Reason.WRONG_PASSWORD


class Unauthenticated(QuireError):
    """No valid credentials (docs/errors.md: UNAUTHENTICATED when no credentials)."""

    code = "UNAUTHENTICATED"
    default_reason = Reason.UNAUTHENTICATED


class Unavailable(QuireError):
    code = "UNAVAILABLE"
    default_reason = Reason.SERVICE_UNAVAILABLE


class DeadlineExceeded(QuireError):
    """A call whose request message did not arrive in time (the gateway's
    QUIRE_GATEWAY_REQUEST_IDLE_SECONDS): nothing was done. Not in
    ERROR_CLASSES_BY_CODE: a DEADLINE_EXCEEDED from another hop stays transport trouble."""

    code = "DEADLINE_EXCEEDED"
    default_reason = Reason.INVALID_ARGUMENT


class ResourceExhausted(QuireError):
    code = "RESOURCE_EXHAUSTED"
    default_reason = Reason.OVERLOADED


class DataLoss(QuireError):
    code = "DATA_LOSS"
    default_reason = Reason.DIGEST_MISMATCH


class Unimplemented(QuireError):
    code = "UNIMPLEMENTED"
    default_reason = Reason.NOT_IMPLEMENTED


ERROR_CLASSES_BY_CODE: dict[str, type[QuireError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        OutOfRange,
        FailedPrecondition,
        Aborted,
        AlreadyExists,
        PermissionDenied,
        Unauthenticated,
        Unavailable,
        ResourceExhausted,
        DataLoss,
        Unimplemented,
    )
}
