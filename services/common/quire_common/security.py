"""Transport security for every listener and channel, in one place.

`tls_settings()` checks the process's QUIRE_TLS_* settings once; `quire_common.server` turns
it into server credentials (reloaded from disk when the files change) and
`quire_common.channels` into client credentials. Plaintext is allowed only
with QUIRE_INSECURE_PLAINTEXT_DEV=true, which logs a warning.

Service identity: a service's certificate carries the name
`quire-service:<name>`, and counts only when the service CA (QUIRE_TLS_CA)
issued it and no other name on it disagrees (`PeerIdentity`). Client
certificates come from a separate CA (QUIRE_TLS_CLIENT_CA) that only the
gateway's listener trusts. Internal services (registry, placement, bookies)
accept each RPC only from the identities quire_common.allowlist lists for it;
see `ServiceIdentityInterceptor`. Health checks and reflection stay open so
that probes work (they still need a certificate from a trusted CA).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.metrics import CallbackOptions, Observation

from quire_api.errors import InvalidArgument, PermissionDenied, Reason, Unauthenticated
from quire_common.allowlist import SERVICE_IDENTITY_PREFIX, allowed_callers
from quire_common.call_limits import NO_IDLE_LIMIT, RequestIdle
from quire_common.config import ConfigError, load_settings
from quire_common.handler_cache import HandlerCache, HandlerWrapper
from quire_common.malformed import checked as checked_message
from quire_common.settings import TlsEnv, common_settings
from quire_common.telemetry import meter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TlsSettings:
    cert_path: Path | None
    key_path: Path | None
    ca_path: Path | None
    plaintext_dev: bool
    # Overrides the name checked against the server certificate's SAN
    # (QUIRE_TLS_SERVER_NAME); empty: the target's host.
    server_name: str = ""
    # The CA of client certificates (QUIRE_TLS_CLIENT_CA): trusted by the
    # gateway's listener next to QUIRE_TLS_CA, never for a service identity.
    client_ca_path: Path | None = None
    # QUIRE_RPC_ALLOWLIST_ENABLED: false accepts any service identity for
    # any internal RPC (the allow-list's positive control).
    allowlist_enabled: bool = True

    @property
    def enabled(self) -> bool:
        return not self.plaintext_dev

    @classmethod
    def from_settings(cls, env: TlsEnv) -> TlsSettings:
        if env.plaintext_dev:
            return cls(None, None, None, True)
        paths = {"QUIRE_TLS_CERT": env.cert, "QUIRE_TLS_KEY": env.key, "QUIRE_TLS_CA": env.ca}
        missing = [name for name, value in paths.items() if not value]
        if missing:
            raise ConfigError(
                f"{', '.join(missing)} not set: every listener and channel uses mutual TLS; give the "
                "certificate, key and CA paths (`quire dev certs` makes a throwaway set), or set "
                "QUIRE_INSECURE_PLAINTEXT_DEV=true for a development cluster"
            )
        if env.client_ca:
            paths["QUIRE_TLS_CLIENT_CA"] = env.client_ca
        for name, value in paths.items():
            if not Path(value).is_file():
                raise ConfigError(f"{name}={value!r}: no such file")
        return cls(
            Path(env.cert),
            Path(env.key),
            Path(env.ca),
            False,
            env.server_name,
            Path(env.client_ca) if env.client_ca else None,
            env.allowlist_enabled,
        )

    @classmethod
    def from_env(cls) -> TlsSettings:
        """From the process's environment (tools and tests)."""
        return cls.from_settings(load_settings(TlsEnv))

    def read(self, with_client_ca: bool = False) -> tuple[bytes, bytes, bytes]:
        """(certificate chain, private key, CA) as they are on disk now; with
        `with_client_ca`, the CAs a listener open to clients trusts."""
        assert self.cert_path and self.key_path and self.ca_path, "TLS is off"
        ca = self.ca_path.read_bytes()
        if with_client_ca and self.client_ca_path is not None:
            ca = ca.rstrip(b"\n") + b"\n" + self.client_ca_path.read_bytes()
        return self.cert_path.read_bytes(), self.key_path.read_bytes(), ca

    def mtimes(self) -> tuple[int, ...]:
        assert self.cert_path and self.key_path and self.ca_path, "TLS is off"
        paths = [self.cert_path, self.key_path, self.ca_path]
        if self.client_ca_path is not None:
            paths.append(self.client_ca_path)
        return tuple(os.stat(p).st_mtime_ns for p in paths)


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
    files = [("service", settings.cert_path), ("ca", settings.ca_path)]
    if settings.client_ca_path is not None:  # the gateway's
        files.append(("client_ca", settings.client_ca_path))
    for role, path in files:
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
    description="When this process's TLS certificate (certificate=service), its CA (certificate=ca) or the "
    "gateway's client CA (certificate=client_ca) expires, Unix time",
)


@functools.cache
def tls_settings() -> TlsSettings:
    """The process's settings (quire_common.settings.common_settings), checked
    once (tests reset with cache_clear)."""
    settings = TlsSettings.from_settings(common_settings().tls)
    if settings.plaintext_dev:
        log.warning("QUIRE_INSECURE_PLAINTEXT_DEV=true: no TLS, no authentication; for development only")
    return settings


def server_credentials(
    settings: TlsSettings, require_client_cert: bool, trust_client_ca: bool = False
) -> grpc.ServerCredentials:
    """Credentials whose certificate, key and CA are read again from disk for
    new connections once any of the files changes (rotation without restart).
    A half-written set (unreadable or mismatched) keeps the previous one.
    `trust_client_ca`: the gateway's listener also accepts certificates from
    QUIRE_TLS_CLIENT_CA; internal services' listeners accept the service CA only."""
    cert, key, ca = settings.read(trust_client_ca)
    state = {"mtimes": settings.mtimes()}

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        try:
            mtimes = settings.mtimes()
            if mtimes == state["mtimes"]:
                return None
            new_cert, new_key, new_ca = settings.read(trust_client_ca)
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


@dataclass(frozen=True)
class PeerIdentity:
    """What a verified peer certificate says about its holder. Every name it
    carries is considered (subject common names, URI and DNS SANs), so that
    no identity rests on whichever name happens to come first."""

    common_name: str | None  # the subject's common name (None without one)
    service: str | None  # `<name>` of a `quire-service:<name>` the service CA issued
    why_not_service: str  # when `service` is None: why (for refusals)
    ambiguous: str  # when not empty: why the certificate cannot be judged at all
    # The `quire-service:<name>` it carries, whoever issued it (None without one).
    service_name: str | None = None
    # Whether the client CA (QUIRE_TLS_CLIENT_CA) signed it directly.
    client_issued: bool = False

    def describe(self) -> str:
        return repr(self.common_name) if self.common_name is not None else "a certificate without a common name"


def _issued_by_any(cert: Any, authorities: list[Any]) -> bool:
    from cryptography.exceptions import InvalidSignature

    for authority in authorities:
        if cert.issuer != authority.subject:
            continue
        try:
            cert.verify_directly_issued_by(authority)
            return True
        except (InvalidSignature, ValueError, TypeError):
            continue
    return False


def read_peer_identity(
    cert_pem: bytes, service_authorities: list[Any], client_authorities: list[Any] | None = None
) -> PeerIdentity:
    """The identity of a (handshake-verified) certificate. It is a service
    identity when its only `quire-service:` name agrees with every other
    identity name it carries (common names, URI SANs) and one of
    `service_authorities` (the service CA's certificates) signed it directly;
    it is a client's when one of `client_authorities` signed it directly."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_pem_x509_certificate(cert_pem)
    common_names = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        uris = [str(u) for u in sans.get_values_for_type(x509.UniformResourceIdentifier)]
        dns_names = [str(d) for d in sans.get_values_for_type(x509.DNSName)]
    except x509.ExtensionNotFound:
        uris, dns_names = [], []
    identity_names = set(common_names) | set(uris)
    service_names = {n for n in identity_names | set(dns_names) if n.startswith(SERVICE_IDENTITY_PREFIX)}
    common_name = common_names[0] if len(set(common_names)) == 1 else None
    service_name = min(service_names) if service_names else None
    client_issued = _issued_by_any(cert, client_authorities or [])
    ambiguous = ""
    if len(set(common_names)) > 1:
        ambiguous = f"it carries several common names ({', '.join(sorted(set(common_names)))})"
    elif len(service_names) > 1:
        ambiguous = f"it carries several service names ({', '.join(sorted(service_names))})"
    elif service_names and identity_names - service_names:
        ambiguous = f"its names disagree ({', '.join(sorted(identity_names | service_names))})"
    if ambiguous:
        return PeerIdentity(common_name, None, ambiguous, ambiguous, service_name, client_issued)
    if not service_names:
        why = f"it carries no {SERVICE_IDENTITY_PREFIX}<name>"
        return PeerIdentity(common_name, None, why, "", None, client_issued)
    if not _issued_by_any(cert, service_authorities):
        why = "the service CA (QUIRE_TLS_CA) did not issue it"
        return PeerIdentity(common_name, None, why, "", service_name, client_issued)
    (name,) = service_names
    return PeerIdentity(common_name, name.removeprefix(SERVICE_IDENTITY_PREFIX), "", "", service_name, client_issued)


class _Authorities:
    """Every CA certificate of one file (the service CA's, or the client CA's)
    this process has trusted, newest last: a connection established before a
    rotation keeps the certificate it was opened with (and passed the
    handshake with), so an earlier CA still names who holds it; a new
    connection from that CA fails the handshake already."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.read_key: tuple[Path, int] | None = None

    def current(self, path: Path | None) -> tuple[list[Any], bool]:
        """The certificates, and whether the file changed since last asked."""
        from cryptography import x509

        if path is None:
            return self.seen, False
        key = (path, os.stat(path).st_mtime_ns)
        if key == self.read_key:
            return self.seen, False
        for authority in x509.load_pem_x509_certificates(path.read_bytes()):
            if authority not in self.seen:
                self.seen.append(authority)
        del self.seen[:-8]
        self.read_key = key
        return self.seen, True


_service_authorities = _Authorities()
_client_authorities = _Authorities()
_identity_cache: dict[bytes, PeerIdentity] = {}


def peer_identity(context: grpc.aio.ServicerContext) -> PeerIdentity | None:
    """The verified peer certificate's identity, or None without one. Parsed
    once per certificate, not once per call: the CA files are looked at only
    for a certificate not seen before (a call on a known connection costs no
    file system access)."""
    auth = context.auth_context()
    pems = auth.get("x509_pem_cert") if auth else None
    if not pems:
        return None
    identity = _identity_cache.get(pems[0])
    if identity is None:
        settings = tls_settings()
        assert settings.ca_path is not None, "TLS is off"
        services, services_changed = _service_authorities.current(settings.ca_path)
        clients, clients_changed = _client_authorities.current(settings.client_ca_path)
        if services_changed or clients_changed or len(_identity_cache) > 1024:  # a rotation, or many peers
            _identity_cache.clear()
        identity = _identity_cache[pems[0]] = read_peer_identity(pems[0], services, clients)
    return identity


def peer_client_name(context: grpc.aio.ServicerContext) -> str | None:
    """The name a client certificate is known by at the gateway's public API,
    or None without a certificate. Only the client CA (QUIRE_TLS_CLIENT_CA)
    vouches for clients: a certificate it did not issue directly, one that
    carries a `quire-service:` name (a service identity never holds client
    roles, whichever CA issued it), and one whose names cannot be judged
    (several common names, several or disagreeing service names) are refused."""
    identity = peer_identity(context)
    if identity is None:
        return None
    if identity.ambiguous:
        raise Unauthenticated(
            f"the client certificate is refused: {identity.ambiguous}", Reason.CLIENT_IDENTITY_REQUIRED
        )
    if identity.service_name is not None:
        raise Unauthenticated(
            f"the client certificate is refused: it carries the service name {identity.service_name!r}; service "
            "identities call internal RPCs only and hold no roles at the gateway (docs/security.md)",
            Reason.CLIENT_IDENTITY_REQUIRED,
        )
    if not identity.client_issued:
        raise Unauthenticated(
            f"the client certificate {identity.describe()} is refused: the client CA (QUIRE_TLS_CLIENT_CA) did not "
            "issue it, and only the client CA vouches for clients",
            Reason.CLIENT_IDENTITY_REQUIRED,
        )
    return identity.common_name


def require_service_identity(context: grpc.aio.ServicerContext, method: str, check_allowlist: bool = True) -> str:
    """The caller's service name, if it may call `method` (a full method name)."""
    short = method.rsplit("/", 1)[-1]
    identity = peer_identity(context)
    if identity is None:
        raise Unauthenticated(f"{short} needs a service certificate; none was presented")
    if identity.service is None:
        raise PermissionDenied(
            f"{short} is internal: it accepts only service identities ({SERVICE_IDENTITY_PREFIX}<name> from the "
            f"service CA), not {identity.describe()}: {identity.why_not_service}",
            Reason.SERVICE_IDENTITY_REQUIRED,
        )
    if check_allowlist:
        allowed = allowed_callers(method)
        if identity.service not in allowed:
            callers = ", ".join(SERVICE_IDENTITY_PREFIX + name for name in sorted(allowed)) or "no service"
            raise PermissionDenied(
                f"{short} accepts calls from {callers}, not from {SERVICE_IDENTITY_PREFIX}{identity.service}",
                Reason.SERVICE_IDENTITY_REQUIRED,
            )
    return identity.service


def guard_handler(
    handler: grpc.RpcMethodHandler,
    check: Callable[[grpc.aio.ServicerContext], Any],
    check_request: Callable[[Any, Any], None] | None = None,
    *,
    idle: RequestIdle = NO_IDLE_LIMIT,
    check_before_read: bool = True,
    check_every_request: bool = False,
) -> grpc.RpcMethodHandler:
    """`handler` with `check(context)` run before it, then
    `check_request(what check returned, request)` on the (first) request
    message, or with `check_every_request` on each message of a request
    stream, as the handler takes it: a message refused there ends the call
    with the refusal, where the handler reads it. Their QuireErrors reach the
    error-mapping interceptor, which must be installed outside this one.

    `check` runs before any request message is read: grpc reads and decodes a
    unary call's message before calling its handler, so a unary request is
    served here as a stream of one, whose handler starts with only the
    headers (a refused caller's 32 MiB message is never taken in). `idle`
    bounds the wait for the messages. `check_before_read=False` restores the
    old order, for the tests that show what it cost."""
    request_streamed = bool(handler.stream_unary or handler.stream_stream)
    response_streamed = bool(handler.unary_stream or handler.stream_stream)
    inner = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream

    def on_request(checked: Any, request: Any) -> None:
        if check_request is not None:
            check_request(checked, request)

    def guarded_stream(requests: Any, checked: Any) -> Any:
        check = functools.partial(check_request, checked) if check_request is not None else None
        return idle.limit(requests, check, check_every_request)

    async def argument(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        """What the inner handler takes: the stream, or the single message."""
        if not request_streamed and not check_before_read:
            on_request(check(context), requests)  # grpc has read the whole message already
            return requests
        if request_streamed:
            return guarded_stream(requests, check(context))
        # A unary call's one message: context.read(), not the request iterator and generators
        # around it (about 40 µs a call; docs/decisions.md, "Every call paid for every method").
        checked = check(context)
        request = checked_message(await idle.first_message(context.read))
        if request is grpc.aio.EOF:
            raise InvalidArgument("the call ended without its request message")
        on_request(checked, request)
        return request

    # A unary request read before the check only with check_before_read off.
    takes_stream = request_streamed or check_before_read
    if response_streamed:

        async def streaming(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            async for response in inner(await argument(requests, context), context):
                yield response

        factory = grpc.stream_stream_rpc_method_handler if takes_stream else grpc.unary_stream_rpc_method_handler
        return factory(streaming, handler.request_deserializer, handler.response_serializer)

    async def unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        return await inner(await argument(requests, context), context)

    factory = grpc.stream_unary_rpc_method_handler if takes_stream else grpc.unary_unary_rpc_method_handler
    return factory(unary, handler.request_deserializer, handler.response_serializer)


class ServiceIdentityInterceptor(HandlerWrapper):
    """Internal services: every /quire.* call must come from a service
    identity that quire_common.allowlist lists for its method (any service
    identity with `check_allowlist` false). Only the peer's certificate is
    read, never the message. Health and reflection pass."""

    def __init__(self, check_allowlist: bool = True) -> None:
        self.check_allowlist = check_allowlist
        self._handlers = HandlerCache()

    def wrap(
        self, handler: grpc.RpcMethodHandler | None, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if handler is None or not method.startswith("/quire."):
            return handler
        return self._handlers.get(
            method,
            handler,
            lambda: guard_handler(
                handler, lambda context: require_service_identity(context, method, self.check_allowlist)
            ),
        )


HEALTH_METHOD_PREFIX = "/grpc.health.v1."


def require_tls_transport(context: grpc.aio.ServicerContext) -> None:
    security = context.auth_context().get("transport_security_type") or []
    if b"ssl" not in security:
        raise Unauthenticated(
            "only grpc.health.v1 answers on the plaintext health-probe port; use the TLS port for everything else"
        )


class ProbePortInterceptor(HandlerWrapper):
    """With TLS on, a plaintext health-probe port (QUIRE_HEALTH_PROBE_PORT) lets
    Kubernetes' native gRPC probes, which cannot speak TLS, reach
    grpc.health.v1. Every other call that arrives without TLS (so through that
    port) is refused, whatever credentials it carries."""

    def __init__(self) -> None:
        self._handlers = HandlerCache()

    def wrap(
        self, handler: grpc.RpcMethodHandler | None, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if handler is None or method.startswith(HEALTH_METHOD_PREFIX):
            return handler
        return self._handlers.get(method, handler, lambda: guard_handler(handler, require_tls_transport))
