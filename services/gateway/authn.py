"""The gateway's authentication and authorization interceptor: who is
calling (bearer token or client certificate, quire_common.auth) and whether
its roles allow this RPC on this scope (quire_gateway.policy).

A write relayed by another gateway (it carries peers.FORWARDED_BY) is
accepted only from the gateway service identity: the relaying gateway
authenticated and authorized the client already, so the caller's roles are
not checked again here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from quire_api.errors import PermissionDenied, Reason, Unauthenticated
from quire_common.auth import AuthSettings, Principal
from quire_common.security import SERVICE_IDENTITY_PREFIX, guard_handler, peer_common_name
from quire_gateway.peers import FORWARDED_BY
from quire_gateway.policy import required_permission

_PUBLIC_PREFIXES = ("/quire.gateway.",)
GATEWAY_IDENTITY = SERVICE_IDENTITY_PREFIX + "gateway"


def require_gateway_identity(context: grpc.aio.ServicerContext, method: str) -> None:
    name = peer_common_name(context)
    if name is None:
        raise Unauthenticated(f"{method} relayed without a certificate; only {GATEWAY_IDENTITY!r} may relay writes")
    if name != GATEWAY_IDENTITY:
        raise PermissionDenied(
            f"{method} relayed by {name!r}: only {GATEWAY_IDENTITY!r} may relay writes to a ledger's owner",
            Reason.SERVICE_IDENTITY_REQUIRED,
        )


class GatewayAuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, settings: AuthSettings, tls_enabled: bool = True) -> None:
        self.settings = settings
        self.tls_enabled = tls_enabled

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(_PUBLIC_PREFIXES):
            return handler  # health and reflection stay open
        name = method.rsplit("/", 1)[-1]
        relayed = any(key == FORWARDED_BY for key, _ in handler_call_details.invocation_metadata or ())
        if relayed and self.tls_enabled:  # without TLS there is no identity: the caller is checked as any other
            return guard_handler(handler, lambda context: require_gateway_identity(context, name))
        if not self.settings.enabled:
            return handler

        def authenticate(context: grpc.aio.ServicerContext) -> Principal:
            metadata = dict(context.invocation_metadata() or ())
            authorization = metadata.get("authorization")
            return self.settings.authenticate(
                authorization if isinstance(authorization, str) else None, peer_common_name(context)
            )

        def authorize(principal: Principal, request: Any) -> None:
            permission, scope = required_permission(name, request)
            principal.require(permission, scope, name)

        return guard_handler(handler, authenticate, authorize)
