"""Rate, errors and duration of every call a service serves, by method.

One histogram, OpenTelemetry's `rpc.server.duration` with the RPC semantic
conventions' attributes (`rpc.system`, `rpc.service`, `rpc.method`,
`rpc.grpc.status_code` as the numeric code), in seconds with the shared
duration buckets like every Quire duration, plus `quire.error.reason` (the
ErrorInfo reason) on a call that failed with one. Its count is the call
count, so no counter repeats it: calls per second, errors per second by code
and reason, and latency are all queries over this one series
(docs/telemetry.md).

The error-mapping interceptor (quire_common.server) records each call once,
when it ends: a streaming call is one call however many messages it carries.
Recording is on the path of every call, so each method's attribute sets are
built once per (code, reason) and kept; a call only looks one up.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import grpc
from opentelemetry import metrics

from quire_common.deferred_histogram import DeferredHistogram
from quire_common.telemetry import duration_histogram

ERROR_REASON_ATTRIBUTE = "quire.error.reason"

# grpc.StatusCode's numeric values, the semantic conventions' form of the code.
_NUMERIC_CODE = {code: code.value[0] for code in grpc.StatusCode}
_OK = grpc.StatusCode.OK


def server_call_histogram(meter_: metrics.Meter) -> DeferredHistogram:
    return duration_histogram(
        meter_,
        "rpc.server.duration",
        "Calls served, from the handler's start to its last response or status; a streaming call once, at its "
        "end. rpc.grpc.status_code is the numeric gRPC status; quire.error.reason the ErrorInfo reason of a "
        "Quire error",
    )


class MethodCalls:
    """The recorder of one method's calls (`/package.Service/Method`)."""

    __slots__ = ("_by_outcome", "_histogram", "_method_attributes", "_ok_attributes")

    def __init__(self, histogram: DeferredHistogram, method: str) -> None:
        service, _, name = method.lstrip("/").rpartition("/")
        self._histogram = histogram
        self._method_attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}
        self._by_outcome: dict[tuple[grpc.StatusCode, str], Mapping[str, str | int]] = {}
        self._ok_attributes = self._attributes(_OK, "")

    def ok(self, started: float) -> None:
        """A call that began at `started` (time.perf_counter) ended OK."""
        self._histogram.record(time.perf_counter() - started, self._ok_attributes)

    def failed(self, started: float, code: grpc.StatusCode, reason: str = "") -> None:
        """A call that began at `started` ended with `code` (and the Quire error `reason`, if any)."""
        attributes = self._by_outcome.get((code, reason))
        if attributes is None:
            attributes = self._attributes(code, reason)
        self._histogram.record(time.perf_counter() - started, attributes)

    def _attributes(self, code: grpc.StatusCode, reason: str) -> Mapping[str, str | int]:
        # Codes are a fixed set and reasons Quire's catalogue (quire_api.errors.Reason), so this stays small.
        attributes: dict[str, str | int] = {**self._method_attributes, "rpc.grpc.status_code": _NUMERIC_CODE[code]}
        if reason:
            attributes[ERROR_REASON_ATTRIBUTE] = reason
        self._by_outcome[(code, reason)] = attributes
        return attributes


def interrupted_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    """The status of a call whose handler was cancelled: its deadline passed,
    or the client went away."""
    remaining = context.time_remaining()
    return grpc.StatusCode.DEADLINE_EXCEEDED if remaining is not None and remaining <= 0 else grpc.StatusCode.CANCELLED


def aborted_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    """The status a handler ended its call with through `context.abort`."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
