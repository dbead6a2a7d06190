"""Client channels between services, and turning their failures back into
QuireErrors so each hop can decide again what a downstream error means."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import TypeVar

import grpc
from opentelemetry import propagate
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from quire_api.errors import ERROR_CLASSES_BY_CODE, QuireError, Reason, Unavailable
from quire_api.rpc_status import call_status
from quire_common.security import channel_credentials, channel_options, tls_settings
from quire_common.telemetry import tracing_enabled

T = TypeVar("T")

# Reconnect quickly after a peer restarts instead of backing off for up to
# gRPC's default two minutes (the etcd channel takes these too).
RECONNECT_OPTIONS: list[tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    *RECONNECT_OPTIONS,
    # Each channel its own connections: with gRPC's process-wide pool a channel
    # opened to replace a failing one would inherit its reconnect backoff.
    ("grpc.use_local_subchannel_pool", 1),
]


# Calls wait (within their deadline) for the channel to connect instead of
# failing at once while the peer restarts.
_WAIT_FOR_READY = json.dumps({"methodConfig": [{"name": [{}], "waitForReady": True}]})


def open_channel(target: str, *, wait_for_ready: bool = False, server_name: str = "") -> grpc.aio.Channel:
    """A channel to another service, with mutual TLS unless in plaintext
    development mode, carrying trace context when tracing is on. With
    `wait_for_ready`, calls ride out a restart of the peer (a registry or
    placement replica); leave it off for bookies, whose failure the caller
    must see at once to try another replica. `server_name` overrides the
    name checked against the server's certificate (QUIRE_TLS_SERVER_NAME for
    this channel only): a gateway reached by its pod address presents a
    certificate for its Service name."""
    options: list[tuple[str, str | int]] = list(CHANNEL_OPTIONS)
    if wait_for_ready:
        options.append(("grpc.service_config", _WAIT_FOR_READY))
    interceptors = _tracing_interceptors() if tracing_enabled() else None
    tls = tls_settings()
    if tls.enabled:
        options.extend([("grpc.ssl_target_name_override", server_name)] if server_name else channel_options(tls))
        return grpc.aio.secure_channel(target, channel_credentials(tls), options=options, interceptors=interceptors)
    return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)


def _tracing_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """OpenTelemetry's client interceptors, but for bidirectional streams.
    Intercepted, a stream written with `write` is fed through a task of
    gRPC's that a call which failed leaves pending for good (grpc/grpc#29518):
    a gateway logged "Task was destroyed but it is pending!" each time its
    AddStream to a killed bookie broke. Such a stream carries requests of
    many traces over its life, so its one span told nothing: each add carries
    its writer's trace context itself, and a relayed AppendEntries session
    sends its own (trace_context_metadata)."""
    return [i for i in aio_client_interceptors() if not isinstance(i, grpc.aio.StreamStreamClientInterceptor)]


def trace_context_metadata() -> tuple[tuple[str, str], ...]:
    """The current trace context as call metadata (W3C traceparent), for a
    bidirectional stream that should join the caller's trace; empty when
    tracing is off."""
    if not tracing_enabled():
        return ()
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return tuple(carrier.items())


def error_from_rpc(exc: grpc.aio.AioRpcError, what: str) -> QuireError:
    """The QuireError a failed call stands for, keeping its ErrorInfo reason
    and metadata (the details a caller acts on, e.g. a next_entry_id, or
    placement's needed/available), so the next hop sends them on unchanged."""
    status = call_status(exc)
    # "retryable" was metadata before RetryInfo; a peer of an older release may still send it.
    details = {k: v for k, v in status.metadata.items() if k != "retryable"}
    return error_from_status(status.code.name, status.reason or None, status.message, what, details)


def error_from_status(
    code_name: str, reason: str | None, message: str, what: str, details: dict[str, str] | None = None
) -> QuireError:
    """The QuireError for a status code (by name), reason and message, as a
    failed call or a per-item result on a stream carries them."""
    error_class = ERROR_CLASSES_BY_CODE.get(code_name)
    if error_class is None or error_class is Unavailable:
        # Transport trouble (or a peer's bug): say which hop failed.
        return Unavailable(f"{what}: {message or code_name}", reason or Reason.SERVICE_UNAVAILABLE, **(details or {}))
    # A deliberate answer from a Quire service: its message already says what is wrong.
    return error_class(message or code_name, reason, **(details or {}))


_CODE_NAMES = {status.value[0]: status.name for status in grpc.StatusCode}


def error_from_result(
    code: int, reason: str, message: str, what: str, metadata: Mapping[str, str] | None = None
) -> QuireError | None:
    """The QuireError of one item's result in a batch or stream answer (a
    numeric google.rpc.Code with reason, message and ErrorInfo metadata);
    None when it is OK."""
    if code == 0:
        return None
    return error_from_status(_CODE_NAMES.get(code, "UNKNOWN"), reason, message, what, dict(metadata or {}))


async def call(awaitable: Awaitable[T], what: str) -> T:
    """Await one RPC, raising a QuireError instead of an AioRpcError."""
    try:
        return await awaitable
    except grpc.aio.AioRpcError as exc:
        raise error_from_rpc(exc, what) from None
