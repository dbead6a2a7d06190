"""Interceptors composed into a server's generic handlers
(quire_common.handler_cache): the same wrapping, in the same order, as
grpc.aio would give them as interceptors."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from quire_common.handler_cache import HandlerWrapper, WrappedGenericHandler


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class _Tagging(HandlerWrapper):
    """Wraps a handler in one that adds its tag to the answer."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def wrap(self, handler: Any, handler_call_details: grpc.HandlerCallDetails) -> Any:
        if handler is None:
            return None
        inner = handler.unary_unary

        def tagged(request: str, context: Any) -> str:
            return f"{self.tag}({inner(request, context)})"

        return grpc.unary_unary_rpc_method_handler(tagged)


def _handlers(method: str) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler("t.S", {method: grpc.unary_unary_rpc_method_handler(lambda r, c: r)})


def test_the_first_wrapper_listed_is_outermost_as_an_interceptor_would_be():
    wrapped = WrappedGenericHandler(_handlers("M"), [_Tagging("outer"), _Tagging("inner")])
    handler = wrapped.service(_Details("/t.S/M"))
    assert handler is not None
    assert handler.unary_unary("x", None) == "outer(inner(x))"

    async def as_interceptors() -> str:
        async def continuation(details: grpc.HandlerCallDetails) -> Any:
            return await _Tagging("inner").intercept_service(lambda d: _found(d), details)

        async def _found(details: grpc.HandlerCallDetails) -> Any:
            return _handlers("M").service(details)

        chained = await _Tagging("outer").intercept_service(continuation, _Details("/t.S/M"))
        return chained.unary_unary("x", None)

    assert asyncio.run(as_interceptors()) == "outer(inner(x))"


def test_a_method_the_generic_handler_lacks_is_none_for_the_next_one():
    wrapped = WrappedGenericHandler(_handlers("M"), [_Tagging("outer")])
    assert wrapped.service(_Details("/t.S/Other")) is None
