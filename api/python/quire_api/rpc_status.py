"""QuireErrors to and from gRPC's rich status (google.rpc.Status in the
`grpc-status-details-bin` trailer), through grpcio-status. The one encoder and
the one decoder: servers, the hops between services and the Python client all
use these.

A status carries a google.rpc.ErrorInfo (domain `quire`, the reason, and the
error's metadata) and, when the reason is retryable, a google.rpc.RetryInfo
with the pause to take before trying again (AIP-193).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from quire_api.errors import ERROR_DOMAIN, QuireError

STATUS_DETAILS_KEY = "grpc-status-details-bin"


def status_for(error: QuireError) -> status_pb2.Status:
    """The google.rpc.Status that carries a QuireError: ErrorInfo, and RetryInfo when retryable."""
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata)
    details = [_packed(info)]
    delay = error.retry_delay
    if delay is not None:
        retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration())
        retry.retry_delay.FromNanoseconds(int(delay * 1e9))
        details.append(_packed(retry))
    return status_pb2.Status(code=status_code(error), message=error.message, details=details)


def status_code(error: QuireError) -> int:
    """The numeric google.rpc.Code of a QuireError, as per-item results in batch answers carry it."""
    return int(grpc.StatusCode[error.code].value[0])


def grpc_status_for(error: QuireError) -> grpc.Status:
    """The grpc.Status (code, message, details trailer) to end a call with."""
    return rpc_status.to_status(status_for(error))  # type: ignore[no-any-return]


def _packed(message: error_details_pb2.ErrorInfo | error_details_pb2.RetryInfo) -> any_pb2.Any:
    detail = any_pb2.Any()
    detail.Pack(message)
    return detail


@dataclass(frozen=True)
class CallStatus:
    """What a failed call said: its code and message, and from its details the
    ErrorInfo reason and metadata and the RetryInfo delay (None: no RetryInfo)."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    retry_delay: float | None = None
    has_details: bool = False


def call_status(call: grpc.Call) -> CallStatus:
    """Decode a failed call (a grpc.RpcError or grpc.aio.AioRpcError)."""
    code, message = call.code(), call.details() or ""
    try:
        status = rpc_status.from_call(call)
    except ValueError:  # a details trailer that contradicts the call's own status: ignore it
        status = None
    if status is None:
        return CallStatus(code, message)
    reason, metadata, delay = "", {}, None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            reason, metadata = info.reason, dict(info.metadata)
        elif detail.Unpack(retry):
            delay = retry.retry_delay.ToNanoseconds() / 1e9
    return CallStatus(code, message, reason, metadata, delay, has_details=True)
