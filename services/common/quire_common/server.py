"""Server bootstrap shared by every service.

`create_server` builds a grpc.aio server with the telemetry and error-mapping
interceptors, gRPC health and server reflection, bound to an address (port 0
picks a free port) and returns (server, port, health). `serve_until_signalled`
runs it until SIGTERM/SIGINT, then marks health NOT_SERVING and stops with a
grace period so in-flight calls finish.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from opentelemetry import metrics

from quire_api.errors import QuireError
from quire_api.rpc_status import grpc_status_for
from quire_common.build_info import version
from quire_common.call_limits import ConnectionLimits
from quire_common.config import ConfigError
from quire_common.faults import FaultInjectionInterceptor, fault_rules_from_settings
from quire_common.handler_cache import HandlerCache, HandlerWrapper, wrap_generic_handlers
from quire_common.malformed import checked, checked_stream, tolerant
from quire_common.rpc_metrics import MethodCalls, aborted_code, interrupted_code, server_call_histogram
from quire_common.security import ProbePortInterceptor, ServiceIdentityInterceptor, server_credentials, tls_settings
from quire_common.server_tracing import tracing_interceptor
from quire_common.settings import ServerEnv, common_settings
from quire_common.telemetry import meter, tracing_enabled
from quire_common.thread_names import name_grpc_poller

log = logging.getLogger(__name__)

# Only our own services' handlers are wrapped; health and reflection are left alone.
_QUIRE_METHOD_PREFIX = "/quire."
# The initial metadata of every health check's answer: the release the process runs.
VERSION_METADATA = "quire-version"


class VersionedHealthServicer(health.aio.HealthServicer):
    """gRPC health, whose checks answer with the process's version in their
    initial metadata (VERSION_METADATA). A health check is the one call every
    service answers to every caller allowed to reach it, so a gateway learns
    the release of each service it can reach (the admin API's cluster status)
    without a version RPC in every service's API. Done here rather than by an
    interceptor, which every call of every method would pass through."""

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        await context.send_initial_metadata(((VERSION_METADATA, version()),))
        return await super().Check(request, context)


async def _abort(context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
    if not isinstance(exc, QuireError):
        log.error("unexpected error in %s", method, exc_info=exc)
    # Drop the error's frames before answering: they hold the request (an
    # oversized entry is megabytes), and the traceback's reference cycle would
    # keep it alive until the cyclic garbage collector happens to run (BAD-3
    # saw the gateway grow by 200+ MiB over 100 refused 4 MiB adds).
    exc.__traceback__ = exc.__context__ = exc.__cause__ = None
    if isinstance(exc, QuireError):
        status = grpc_status_for(exc)
        await context.abort(status.code, status.details, trailing_metadata=status.trailing_metadata)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}; see the service log")


class ErrorMappingInterceptor(HandlerWrapper):
    """Turns QuireErrors into status + ErrorInfo, and anything unexpected into
    INTERNAL without its traceback. Aborts and cancellations pass through.
    A request that does not decode is INVALID_ARGUMENT. Every call's method,
    outcome and duration are recorded here (quire_common.rpc_metrics), where
    each outcome is known: the one place every Quire call passes through."""

    def __init__(self, meter_: metrics.Meter | None = None) -> None:
        """`meter_` defaults to the process's (quire_common.telemetry)."""
        self._handlers = HandlerCache()
        self._calls_histogram = server_call_histogram(meter_ or meter("quire.rpc"))

    def wrap(
        self, handler: grpc.RpcMethodHandler | None, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if handler is None or not method.startswith(_QUIRE_METHOD_PREFIX):
            return handler
        return self._handlers.get(
            method, handler, lambda: _error_mapped(handler, method, MethodCalls(self._calls_histogram, method))
        )


def _status_of(error: Exception) -> tuple[grpc.StatusCode, str]:
    """The code and reason `_abort` answers `error` with."""
    if isinstance(error, QuireError):
        return grpc.StatusCode[error.code], error.reason
    return grpc.StatusCode.INTERNAL, ""


def _error_mapped(handler: grpc.RpcMethodHandler, method: str, calls: MethodCalls) -> grpc.RpcMethodHandler:
    """`handler` with QuireErrors and undecodable requests turned into
    statuses, and each call's outcome and duration recorded in `calls`."""
    streamed_requests = bool(handler.stream_unary or handler.stream_stream)

    def decoded(request: Any) -> Any:
        """What the handler takes: the request, or the stream of them, refused where one did not decode."""
        return checked_stream(request) if streamed_requests else checked(request)

    if handler.unary_unary or handler.stream_unary:
        inner_unary = handler.unary_unary or handler.stream_unary

        async def unary_response(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            try:
                response = await inner_unary(decoded(request), context)
            except grpc.aio.AbortError:
                calls.failed(started, aborted_code(context))
                raise
            except asyncio.CancelledError:
                calls.failed(started, interrupted_code(context))
                raise
            except Exception as exc:
                error = exc
            else:
                calls.ok(started)
                return response
            # grpc keeps the abort's exception, whose traceback holds this frame: let go of the request.
            del request
            calls.failed(started, *_status_of(error))
            await _abort(context, error, method)

        factory = grpc.unary_unary_rpc_method_handler if handler.unary_unary else grpc.stream_unary_rpc_method_handler
        return factory(
            unary_response,
            request_deserializer=tolerant(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )

    inner_stream = handler.unary_stream or handler.stream_stream

    async def stream_response(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        started = time.perf_counter()
        try:
            async for response in inner_stream(decoded(request), context):
                yield response
        except grpc.aio.AbortError:
            calls.failed(started, aborted_code(context))
            raise
        except (asyncio.CancelledError, GeneratorExit):  # GeneratorExit: closed while it waited to send
            calls.failed(started, interrupted_code(context))
            raise
        except Exception as exc:
            error = exc
        else:
            calls.ok(started)
            return
        request = response = None  # as above: nothing large stays reachable from the abort
        calls.failed(started, *_status_of(error))
        await _abort(context, error, method)

    factory = grpc.unary_stream_rpc_method_handler if handler.unary_stream else grpc.stream_stream_rpc_method_handler
    return factory(
        stream_response,
        request_deserializer=tolerant(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )


def _bind(server: grpc.aio.Server, address: str, setting: str, credentials: grpc.ServerCredentials | None) -> int:
    """The bound port; grpc says only "Failed to bind" (RuntimeError) or 0."""
    try:
        port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port == 0:
        raise ConfigError(
            f"{setting}: cannot listen on {address} (the port is taken, or the host is not a local address); "
            "choose another"
        )
    return port


# grpc.reflection.v1 is v1alpha under a new package name, message for message
# and field for field; grpcio-reflection serves only v1alpha, so the same
# servicer answers both (grpcurl, Postman and recent tools ask v1 first).
_REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


def _enable_reflection(server: grpc.aio.Server, service_names: list[str]) -> None:
    servicer = reflection.aio.ReflectionServicer([*service_names, reflection.SERVICE_NAME, _REFLECTION_V1])
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    handlers = {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        )
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_REFLECTION_V1, handlers),))


def _serve_by_generic_handlers_only(server: grpc.aio.Server) -> None:
    """Make `server` ignore methods registered one by one.

    The generated add_*_to_server functions add each service twice: as a
    generic handler, which serves every method, and method by method as
    "registered" handlers. grpc's serving loop then keeps one pending
    request per registered method and waits on all of them for each call it
    accepts (an asyncio.wait over about 30 futures in the gateway): a cost
    every unary call paid, and more the more methods a server has. The
    generic handlers serve the same methods without it (docs/decisions.md,
    "Every call paid for every method")."""

    def ignore(service_name: str, method_handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        return None  # the generic handler added with them serves these methods

    server.add_registered_method_handlers = ignore  # type: ignore[method-assign]


def create_server(
    address: str,
    register: Callable[[grpc.aio.Server], Iterable[str]],
    *,
    internal: bool = True,
    require_client_cert: bool = True,
    auth_interceptors: Sequence[HandlerWrapper] = (),
    address_setting: str = "address",
    connection_limits: ConnectionLimits | None = None,
    settings: ServerEnv | None = None,
) -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    """Build a server listening on `address` (port 0 picks one).

    `register` adds the service's servicers and returns their full names, which
    are published through health and reflection (reflection only with
    QUIRE_REFLECTION_ENABLED). With TLS on (quire_common.security), an
    `internal` service accepts only the service identities its methods allow
    (quire_common.allowlist) and only the service CA at the handshake; the gateway
    passes internal=False, its own `auth_interceptors` and whether a client
    certificate is required at the handshake. An address that cannot be bound
    (taken, or not a local address) is a ConfigError naming `address_setting`.
    `connection_limits` bound what one client connection may hold (the gateway's).
    `settings` default to the process's (quire_common.settings.common_settings).
    """
    tls = tls_settings()
    settings = common_settings().server if settings is None else settings
    probe_port = settings.health_probe_port
    # Error mapping outermost, so that the checks' QuireErrors become statuses. Composed into
    # the server's generic handlers, not run as interceptors: grpc.aio would run each as a
    # coroutine for every call (quire_common.handler_cache).
    wrappers: list[HandlerWrapper] = [ErrorMappingInterceptor()]
    if tls.enabled and probe_port:
        wrappers.append(ProbePortInterceptor())
    if tls.enabled and internal:
        wrappers.append(ServiceIdentityInterceptor(tls.allowlist_enabled))
    wrappers.extend(auth_interceptors)
    fault_rules = fault_rules_from_settings(settings.fault_injection_rules)  # test-only; empty in production
    if fault_rules:
        wrappers.append(FaultInjectionInterceptor(fault_rules))
    # Tracing's interceptor, outside them all, stays one (server_tracing.py: streams end cleanly).
    interceptors = [tracing_interceptor()] if tracing_enabled() else None
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            # gRPC binds with SO_REUSEPORT by default: a second service given a
            # port already in use would share it silently and take half of its
            # connections. Without it, a taken port fails the start (BAD-12).
            ("grpc.so_reuseport", 0),
            *(connection_limits.server_options() if connection_limits else ()),
        ],
    )
    name_grpc_poller()  # started with grpc.aio's first server or channel in the process
    _serve_by_generic_handlers_only(server)
    wrap_generic_handlers(server, wrappers)
    service_names = list(register(server))
    health_servicer = VersionedHealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if settings.reflection_enabled:
        _enable_reflection(server, [*service_names, health.SERVICE_NAME])
    # Client certificates (QUIRE_TLS_CLIENT_CA) get through the gateway's handshake only.
    credentials = server_credentials(tls, require_client_cert, trust_client_ca=not internal) if tls.enabled else None
    port = _bind(server, address, address_setting, credentials)
    if probe_port:
        # Kubernetes' gRPC probes cannot speak TLS: a plaintext port for them
        # (health only when TLS is on; without TLS everything is plaintext anyway).
        _bind(server, f"{address.rsplit(':', 1)[0]}:{probe_port}", "QUIRE_HEALTH_PROBE_PORT", None)
    return server, port, health_servicer


async def mark_serving(health_servicer: health.aio.HealthServicer, service_names: Iterable[str]) -> None:
    for name in ["", *service_names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)


async def mark_not_serving(health_servicer: health.aio.HealthServicer, service_names: Iterable[str]) -> None:
    """NOT_SERVING while a started server waits for its dependencies (grpc's
    health servicer answers SERVING for the server as a whole by default)."""
    for name in ["", *service_names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)


async def serve_until_signalled(
    server: grpc.aio.Server,
    health_servicer: health.aio.HealthServicer,
    grace_seconds: float = 5.0,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    before_drain: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Wait for SIGTERM or SIGINT, then drain and stop (`before_drain` and
    `on_stop` are stop_gracefully's `before_server` and `after_server`)."""
    await stop_signal().wait()
    await stop_gracefully(server, health_servicer, grace_seconds, before_server=before_drain, after_server=on_stop)


def stop_signal() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT: a service that must also stop
    while it starts (waiting for the registry) waits for it itself."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def stop_gracefully(
    server: grpc.aio.Server,
    health_servicer: health.aio.HealthServicer,
    grace_seconds: float,
    before_server: Callable[[], Awaitable[None]] | None = None,
    after_server: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Health NOT_SERVING first (balancers stop sending), then
    `before_server` (background work that feeds the server), then the server
    stops taking calls and lets those in flight finish for up to
    `grace_seconds`, then `after_server` (what those calls used)."""
    log.info("stopping: health NOT_SERVING, draining for up to %.1fs", grace_seconds)
    await health_servicer.enter_graceful_shutdown()
    if before_server is not None:
        await before_server()
    await server.stop(grace_seconds)
    if after_server is not None:
        await after_server()
