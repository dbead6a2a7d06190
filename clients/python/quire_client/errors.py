"""The errors the Python client raises: one class per gRPC code, each a
subclass of the services' own class for that code (quire_api.errors), so
`except quire_api.errors.NotFound` and `except NotFoundError` catch the same
answers. Statuses are decoded by quire_api.rpc_status, the decoder the
services use between themselves."""

from __future__ import annotations

import grpc

from quire_api import errors as common
from quire_api.errors import retry_delay_for
from quire_api.rpc_status import CallStatus, call_status
from quire_proto.gateway.v1 import ledger_pb2

_LEDGER_FENCED = common.Reason.LEDGER_FENCED
_LEDGER_CLOSED = common.Reason.LEDGER_CLOSED


class QuireClientError(common.QuireError):
    """A call failed: `code` is the gRPC status code (a grpc.StatusCode),
    `reason` the ErrorInfo reason (e.g. ERROR_REASON_LEDGER_FENCED), `details`
    the ErrorInfo metadata (e.g. next_entry_id, needed/available), and
    `retry_delay` the RetryInfo delay in seconds: None when the service says
    that trying again cannot help. `retryable` is whether it can."""

    code: grpc.StatusCode

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        details: dict[str, str] | None = None,
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(message, reason or None, **(details or {}))
        self.code = code
        self.reason = reason
        self.details = self.metadata
        self._retry_delay = retry_delay if retry_delay is not None else retry_delay_for(reason)

    @property
    def retry_delay(self) -> float | None:
        return self._retry_delay

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class InvalidArgumentError(QuireClientError, common.InvalidArgument):
    pass


class NotFoundError(QuireClientError, common.NotFound):
    pass


class OutOfRangeError(QuireClientError, common.OutOfRange):
    """A confirmed read beyond the LAC."""


class FailedPreconditionError(QuireClientError, common.FailedPrecondition):
    """The ledger is closed or fenced, or the bookie is read-only."""

    @property
    def fenced(self) -> bool:
        return self.reason == _LEDGER_FENCED

    @property
    def closed(self) -> bool:
        return self.reason == _LEDGER_CLOSED


class AbortedError(QuireClientError, common.Aborted):
    pass


class AlreadyExistsError(QuireClientError, common.AlreadyExists):
    pass


class PermissionDeniedError(QuireClientError, common.PermissionDenied):
    """Wrong ledger password, or the caller's roles lack the permission
    (reason ERROR_REASON_PERMISSION_DENIED_ROLE; the message names it)."""


class UnauthenticatedError(QuireClientError, common.Unauthenticated):
    """No valid credentials: no token or client certificate, or an expired one."""


class UnavailableError(QuireClientError, common.Unavailable):
    """A service or the connection to it failed. Without a reason (the
    connection broke before any Quire service answered) it counts as
    retryable; with one, the RetryInfo the service sent decides."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        details: dict[str, str] | None = None,
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(code, reason, message, details, retry_delay)
        if not reason and self._retry_delay is None:
            self._retry_delay = retry_delay_for(common.Reason.SERVICE_UNAVAILABLE)


class ResourceExhaustedError(QuireClientError, common.ResourceExhausted):
    pass


class DataLossError(QuireClientError, common.DataLoss):
    pass


class UnimplementedError(QuireClientError, common.Unimplemented):
    pass


class DeadlineExceededError(QuireClientError):
    """The outcome is unknown: a write may or may not have been stored."""


ERRORS_BY_CODE: dict[grpc.StatusCode, type[QuireClientError]] = {
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    **{
        grpc.StatusCode[cls.code]: cls
        for cls in (
            InvalidArgumentError,
            NotFoundError,
            OutOfRangeError,
            FailedPreconditionError,
            AbortedError,
            AlreadyExistsError,
            PermissionDeniedError,
            UnauthenticatedError,
            UnavailableError,
            ResourceExhaustedError,
            DataLossError,
            UnimplementedError,
        )
    },
}


def error_from_status(status: CallStatus) -> QuireClientError:
    """The client error for a decoded status. With details, the RetryInfo
    decides retryability (its absence means final); without, the reason's
    entry in quire_api.errors.RETRY_DELAYS does."""
    error_class = ERRORS_BY_CODE.get(status.code, QuireClientError)
    error = error_class(status.code, status.reason, status.message, status.metadata, status.retry_delay)
    if status.has_details and status.retry_delay is None:
        error._retry_delay = None
    return error


_CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def error_from_read_error(error: ledger_pb2.ReadEntryError) -> QuireClientError:
    """The client error one request of a ReadEntryStream was answered with:
    the one a ReadEntry call failing the same way raises."""
    delay = error.retry_delay.ToNanoseconds() / 1e9 if error.HasField("retry_delay") else None
    code = _CODES_BY_NUMBER.get(error.code, grpc.StatusCode.UNKNOWN)
    return error_from_status(CallStatus(code, error.message, error.reason, dict(error.metadata), delay, True))


def translate(exc: grpc.RpcError) -> QuireClientError:
    """The client error a failed call stands for."""
    return error_from_status(call_status(exc))


# What gRPC says when a call ended before it reached any server: the
# connection (or the name lookup) failed, so nothing of the request was sent.
_NOT_CONNECTED_MARKS = ("failed to connect to all addresses", "errors resolving", "DNS resolution failed")


def never_sent(error: QuireClientError) -> bool:
    """Whether `error` proves the call never left this process (its
    connection failed), so a write it carried cannot have happened."""
    return (
        error.code == grpc.StatusCode.UNAVAILABLE
        and not error.reason
        and any(mark in error.message for mark in _NOT_CONNECTED_MARKS)
    )
