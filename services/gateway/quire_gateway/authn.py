"""The gateway's authentication and authorization interceptor: who is
calling (bearer token or client certificate, quire_common.auth) and whether
its roles allow this RPC on this scope (quire_gateway.permissions).

A write relayed by another gateway (it carries peers.FORWARDED_BY) is
accepted only from the gateway service identity: the relaying gateway
authenticated and authorized the client already, so the caller's roles are
not checked again here.

A client certificate counts only when the client CA issued it and it carries
no service name (quire_common.security.peer_client_name); any other
certificate is refused, a bearer token beside it or not: a service identity
holds no roles here.

Who the caller is is decided from the call's headers and certificate alone,
before grpc reads the request message (guard_handler): a caller without valid
credentials is refused without its message being taken in. What the caller
may do depends on the message (its scope) and is checked on it: on the first
message of a stream, or on every message of the streams whose messages each
name their own ledger (permissions.EVERY_MESSAGE_AUTHORIZED: ReadEntryStream),
where a refused message ends the stream PERMISSION_DENIED."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from quire_api.errors import PermissionDenied, Reason, Unauthenticated
from quire_common.allowlist import GATEWAY, SERVICE_IDENTITY_PREFIX
from quire_common.auth import AuthSettings, Principal
from quire_common.call_limits import NO_IDLE_LIMIT, CallsPerCaller, RequestIdle
from quire_common.handler_cache import HandlerCache, HandlerWrapper
from quire_common.security import PeerIdentity, guard_handler, peer_client_name, peer_identity
from quire_gateway.ownership.peers import FORWARDED_BY
from quire_gateway.permissions import EVERY_MESSAGE_AUTHORIZED, required_permission

# Every service a client may call: guarded here. Health and reflection are not.
_PUBLIC_PREFIXES = ("/quire.gateway.", "/quire.admin.")
GATEWAY_IDENTITY = SERVICE_IDENTITY_PREFIX + GATEWAY


def require_gateway_identity(context: grpc.aio.ServicerContext, method: str) -> None:
    """A relayed write comes from the gateway's service identity: issued by
    the service CA, never by the client CA, whatever name it carries."""
    identity = peer_identity(context)
    if identity is None:
        raise Unauthenticated(f"{method} relayed without a certificate; only {GATEWAY_IDENTITY!r} may relay writes")
    if identity.service != GATEWAY:
        why = f" ({identity.why_not_service})" if identity.service is None else ""
        raise PermissionDenied(
            f"{method} relayed by {identity.describe()}{why}: only {GATEWAY_IDENTITY!r} may relay writes to a "
            "ledger's owner",
            Reason.SERVICE_IDENTITY_REQUIRED,
        )


class GatewayAuthInterceptor(HandlerWrapper):
    def __init__(
        self,
        settings: AuthSettings,
        tls_enabled: bool = True,
        *,
        idle: RequestIdle = NO_IDLE_LIMIT,
        calls_per_caller: CallsPerCaller | None = None,
        check_before_read: bool = True,
        roles_by_common_name_only: bool = False,
    ) -> None:
        """`roles_by_common_name_only` maps any certificate's common name to
        roles, whichever CA issued it: the positive control of the client
        identity check, for tests only."""
        self.settings = settings
        self.tls_enabled = tls_enabled
        self.idle = idle
        self.calls = calls_per_caller or CallsPerCaller(0)
        self.check_before_read = check_before_read
        self.client_name = common_name_only if roles_by_common_name_only else peer_client_name
        self._handlers = HandlerCache()

    def wrap(
        self, handler: grpc.RpcMethodHandler | None, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if handler is None or not method.startswith(_PUBLIC_PREFIXES):
            return handler  # health and reflection stay open
        relayed = any(key == FORWARDED_BY for key, _ in handler_call_details.invocation_metadata or ())
        return self._handlers.get((method, relayed), handler, lambda: self._guarded(handler, method, relayed))

    def _guarded(self, handler: grpc.RpcMethodHandler, method: str, relayed: bool) -> grpc.RpcMethodHandler:
        """`handler` behind the checks its method and the relay mark call for."""
        name = method.rsplit("/", 1)[-1]
        if relayed and self.tls_enabled:  # without TLS there is no identity: the caller is checked as any other
            return self._guard(handler, lambda context: require_gateway_identity(context, name))
        if not self.settings.enabled:
            return self._guard(handler, lambda context: None)  # no credentials asked, but the idle bounds hold

        def authenticate(context: grpc.aio.ServicerContext) -> Principal:
            metadata = dict(context.invocation_metadata() or ())
            authorization = metadata.get("authorization")
            principal = self.settings.authenticate(
                authorization if isinstance(authorization, str) else None, self.client_name(context)
            )
            caller = f"{principal.via}:{principal.subject}"
            self.calls.admit(caller)
            context.add_done_callback(lambda _: self.calls.release(caller))
            return principal

        def authorize(principal: Principal, request: Any) -> None:
            permission, scope = required_permission(name, request)
            principal.require(permission, scope, name)

        return self._guard(handler, authenticate, authorize, every_request=name in EVERY_MESSAGE_AUTHORIZED)

    def _guard(
        self,
        handler: grpc.RpcMethodHandler,
        check: Callable[[grpc.aio.ServicerContext], Any],
        check_request: Callable[[Any, Any], None] | None = None,
        every_request: bool = False,
    ) -> grpc.RpcMethodHandler:
        return guard_handler(
            handler,
            check,
            check_request,
            idle=self.idle,
            check_before_read=self.check_before_read,
            check_every_request=every_request,
        )


def common_name_only(context: grpc.aio.ServicerContext) -> str | None:
    """The unsafe way, kept as a positive control: any certificate's common
    name, whoever issued it."""
    identity: PeerIdentity | None = peer_identity(context)
    return identity.common_name if identity is not None else None
