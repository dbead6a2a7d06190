"""The gateway's authentication and authorization interceptor: who is
calling (bearer token or client certificate, quire_common.auth) and whether
its roles allow this RPC on this scope (quire_gateway.policy)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from quire_common.auth import AuthSettings, Principal
from quire_common.security import guard_handler, peer_common_name
from quire_gateway.policy import required_permission

_PUBLIC_PREFIXES = ("/quire.gateway.",)


class GatewayAuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings

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
