"""Transport security for every listener and channel, in one place.

`TlsSettings.from_env()` reads QUIRE_TLS_* once; `quire_common.server` turns
it into server credentials (reloaded from disk when the files change) and
`quire_common.channels` into client credentials. Plaintext is allowed only
with QUIRE_INSECURE_PLAINTEXT_DEV=true, which logs a warning.

Service identity: a service's certificate has the common name
`quire-service:<name>` (`quire dev certs` issues them). Internal services
(registry, placement, bookies) accept only such peers; see
`ServiceIdentityInterceptor`. Health checks and reflection stay open so that
probes work (they still need a TLS client certificate from the CA).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.metrics import CallbackOptions, Observation

from quire_api.errors import PermissionDenied, Reason, Unauthenticated
from quire_common.config import ConfigError, env_bool, env_str
from quire_common.telemetry import meter

log = logging.getLogger(__name__)

SERVICE_IDENTITY_PREFIX = "quire-service:"
# grpc's Python API can require a client certificate or not ask for one; it
# cannot ask for one and accept its absence.
CLIENT_AUTH_MODES = ("require", "none")


@dataclass(frozen=True)
class TlsSettings:
    cert_path: Path | None
    key_path: Path | None
    ca_path: Path | None
    plaintext_dev: bool
    # Overrides the name checked against the server certificate's SAN
    # (QUIRE_TLS_SERVER_NAME); empty: the target's host.
    server_name: str = ""

    @property
    def enabled(self) -> bool:
        return not self.plaintext_dev

    @classmethod
    def from_env(cls) -> TlsSettings:
        plaintext = env_bool("QUIRE_INSECURE_PLAINTEXT_DEV", False)
        paths = {name: env_str(name, "") for name in ("QUIRE_TLS_CERT", "QUIRE_TLS_KEY", "QUIRE_TLS_CA")}
        if plaintext:
            return cls(None, None, None, True)
        missing = [name for name, value in paths.items() if not value]
        if missing:
            raise ConfigError(
                f"{', '.join(missing)} not set: every listener and channel uses mutual TLS; give the "
                "certificate, key and CA paths (`quire dev certs` makes a throwaway set), or set "
                "QUIRE_INSECURE_PLAINTEXT_DEV=true for a development cluster"
            )
        for name, value in paths.items():
            if not Path(value).is_file():
                raise ConfigError(f"{name}={value!r}: no such file")
        return cls(
            Path(paths["QUIRE_TLS_CERT"]),
            Path(paths["QUIRE_TLS_KEY"]),
            Path(paths["QUIRE_TLS_CA"]),
            False,
            env_str("QUIRE_TLS_SERVER_NAME", ""),
        )

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(certificate chain, private key, CA) as they are on disk now."""
        assert self.cert_path and self.key_path and self.ca_path, "TLS is off"
        return self.cert_path.read_bytes(), self.key_path.read_bytes(), self.ca_path.read_bytes()

    def mtimes(self) -> tuple[int, ...]:
        assert self.cert_path and self.key_path and self.ca_path, "TLS is off"
        return tuple(os.stat(p).st_mtime_ns for p in (self.cert_path, self.key_path, self.ca_path))


def certificate_not_after(pem: bytes) -> float:
    """The first certificate's notAfter in a PEM chain, as Unix seconds."""
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()


_not_after_cache: dict[tuple[Path, int], float] = {}


def _observe_certificates(_: CallbackOptions) -> list[Observation]:
    """Read at each scrape, so a renewed certificate (reloaded without a
    restart) shows at once; parsed again only when the file changed."""
    try:
        settings = tls_settings()
    except ConfigError:
        return []
    if not settings.enabled:
        return []
    observations = []
    for role, path in (("service", settings.cert_path), ("ca", settings.ca_path)):
        assert path is not None
        try:
            key = (path, os.stat(path).st_mtime_ns)
            if key not in _not_after_cache:
                if len(_not_after_cache) > 8:  # renewed many times: forget the old files' answers
                    _not_after_cache.clear()
                _not_after_cache[key] = certificate_not_after(path.read_bytes())
            observations.append(Observation(_not_after_cache[key], {"certificate": role}))
        except (OSError, ValueError) as exc:
            log.warning("%s certificate %s unreadable for its expiry metric: %s", role, path, exc)
    return observations


# Certificate expiry is alerted on (deploy/monitoring/alerts.yaml): each
# process reports what it serves with, which is what matters if renewal
# reached the files but not the process.
meter("quire.tls").create_observable_gauge(
    "quire.tls.certificate.not_after",
    callbacks=[_observe_certificates],
    unit="s",
    description="When this process's TLS certificate (certificate=service) or CA (certificate=ca) expires, Unix time",
)


@functools.cache
def tls_settings() -> TlsSettings:
    """The process's settings, read once (tests reset with cache_clear)."""
    settings = TlsSettings.from_env()
    if settings.plaintext_dev:
        log.warning("QUIRE_INSECURE_PLAINTEXT_DEV=true: no TLS, no authentication; for development only")
    return settings


def server_credentials(settings: TlsSettings, require_client_cert: bool) -> grpc.ServerCredentials:
    """Credentials whose certificate, key and CA are read again from disk for
    new connections once any of the files changes (rotation without restart).
    A half-written set (unreadable or mismatched) keeps the previous one."""
    cert, key, ca = settings.read()
    state = {"mtimes": settings.mtimes()}

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        try:
            mtimes = settings.mtimes()
            if mtimes == state["mtimes"]:
                return None
            new_cert, new_key, new_ca = settings.read()
        except OSError as exc:
            log.warning("TLS files unreadable, keeping the current certificate: %s", exc)
            return None
        state["mtimes"] = mtimes
        log.info("TLS certificate files changed; new connections use them")
        return grpc.ssl_server_certificate_configuration([(new_key, new_cert)], root_certificates=new_ca)

    initial = grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)
    return grpc.dynamic_ssl_server_credentials(initial, fetch, require_client_authentication=require_client_cert)


def channel_credentials(settings: TlsSettings) -> grpc.ChannelCredentials:
    """Client credentials from the files as they are now: a channel opened
    after a rotation presents the new certificate."""
    cert, key, ca = settings.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def channel_options(settings: TlsSettings) -> list[tuple[str, str]]:
    return [("grpc.ssl_target_name_override", settings.server_name)] if settings.server_name else []


# -- peer identity -------------------------------------------------------------------


def peer_common_name(context: grpc.aio.ServicerContext) -> str | None:
    """The verified client certificate's common name, or None without one."""
    auth = context.auth_context()
    names = auth.get("x509_common_name") if auth else None
    return names[0].decode("utf-8", "replace") if names else None


def is_service_identity(common_name: str | None) -> bool:
    return common_name is not None and common_name.startswith(SERVICE_IDENTITY_PREFIX)


def require_service_identity(context: grpc.aio.ServicerContext, method: str) -> None:
    name = peer_common_name(context)
    if name is None:
        raise Unauthenticated(f"{method} needs a service certificate; none was presented")
    if not is_service_identity(name):
        raise PermissionDenied(
            f"{method} is internal: it accepts only service identities ({SERVICE_IDENTITY_PREFIX}<name>), not {name!r}",
            Reason.SERVICE_IDENTITY_REQUIRED,
        )


def guard_handler(
    handler: grpc.RpcMethodHandler,
    check: Callable[[grpc.aio.ServicerContext], Any],
    check_request: Callable[[Any, Any], None] | None = None,
) -> grpc.RpcMethodHandler:
    """`handler` with `check(context)` run before it, then
    `check_request(what check returned, request)` on the (first) request
    message. Their QuireErrors reach the error-mapping interceptor, which must
    be installed outside this one."""

    def on_request(checked: Any, request: Any) -> None:
        if check_request is not None:
            check_request(checked, request)

    async def guarded_stream(requests: Any, checked: Any) -> Any:
        first = True
        async for request in requests:
            if first:
                on_request(checked, request)
                first = False
            yield request

    if handler.unary_unary:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            on_request(check(context), request)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary_unary, handler.request_deserializer, handler.response_serializer
        )
    if handler.unary_stream:
        inner_us = handler.unary_stream

        async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            on_request(check(context), request)
            async for response in inner_us(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(
            unary_stream, handler.request_deserializer, handler.response_serializer
        )
    if handler.stream_unary:
        inner_su = handler.stream_unary

        async def stream_unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            checked = check(context)
            return await inner_su(guarded_stream(requests, checked), context)

        return grpc.stream_unary_rpc_method_handler(
            stream_unary, handler.request_deserializer, handler.response_serializer
        )
    inner_ss = handler.stream_stream

    async def stream_stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        checked = check(context)
        async for response in inner_ss(guarded_stream(requests, checked), context):
            yield response

    return grpc.stream_stream_rpc_method_handler(
        stream_stream, handler.request_deserializer, handler.response_serializer
    )


class ServiceIdentityInterceptor(grpc.aio.ServerInterceptor):
    """Internal services: every /quire.* call must come from a peer whose
    certificate carries a service identity. Health and reflection pass."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith("/quire."):
            return handler
        name = method.rsplit("/", 1)[-1]
        return guard_handler(handler, lambda context: require_service_identity(context, name))


HEALTH_METHOD_PREFIX = "/grpc.health.v1."


def require_tls_transport(context: grpc.aio.ServicerContext) -> None:
    security = context.auth_context().get("transport_security_type") or []
    if b"ssl" not in security:
        raise Unauthenticated(
            "only grpc.health.v1 answers on the plaintext health-probe port; use the TLS port for everything else"
        )


class ProbePortInterceptor(grpc.aio.ServerInterceptor):
    """With TLS on, a plaintext health-probe port (QUIRE_HEALTH_PROBE_PORT) lets
    Kubernetes' native gRPC probes, which cannot speak TLS, reach
    grpc.health.v1. Every other call that arrives without TLS (so through that
    port) is refused, whatever credentials it carries."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(HEALTH_METHOD_PREFIX):
            return handler
        return guard_handler(handler, require_tls_transport)


def check_client_auth_mode(name: str, value: str) -> str:
    if value not in CLIENT_AUTH_MODES:
        raise ConfigError(f"{name}={value!r}: use one of {', '.join(CLIENT_AUTH_MODES)}")
    return value
