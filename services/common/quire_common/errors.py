"""Typed errors that carry their gRPC status code, reason and retryability.

Domain code raises these; one server interceptor (quire_common.server) turns
them into a gRPC status with a google.rpc.ErrorInfo detail. The status code is
kept as a name so that domain modules need no grpc import. The table of
DESIGN section 7 lives here: each class is one row.
"""

from __future__ import annotations

import enum

from quire.common.v1 import common_pb2

ERROR_DOMAIN = "quire"

# Every ErrorInfo.reason, taken from the quire.common.v1.ErrorReason catalogue
# so that the proto stays the one list: Reason.LEDGER_NOT_FOUND has the value
# "ERROR_REASON_LEDGER_NOT_FOUND".
Reason = enum.StrEnum(  # type: ignore[misc]
    "Reason",
    {
        name.removeprefix("ERROR_REASON_"): name
        for name in common_pb2.ErrorReason.keys()
        if name != "ERROR_REASON_UNSPECIFIED"
    },
)


class QuireError(Exception):
    """Base of every error a Quire service returns on purpose."""

    code: str = "INTERNAL"
    default_reason: str = "ERROR_REASON_UNSPECIFIED"
    retryable: bool = False

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
    retryable = True


class AlreadyExists(QuireError):
    code = "ALREADY_EXISTS"
    default_reason = Reason.LEDGER_EXISTS


class PermissionDenied(QuireError):
    code = "PERMISSION_DENIED"
    default_reason = Reason.WRONG_PASSWORD


class Unavailable(QuireError):
    code = "UNAVAILABLE"
    default_reason = Reason.SERVICE_UNAVAILABLE
    retryable = True


class ResourceExhausted(QuireError):
    code = "RESOURCE_EXHAUSTED"
    default_reason = Reason.OVERLOADED
    retryable = True


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
        Unavailable,
        ResourceExhausted,
        DataLoss,
        Unimplemented,
    )
}
