"""Method handlers wrapped by a server interceptor, built once, and
interceptors that only wrap handlers, run without a coroutine per call.

grpc.aio asks every interceptor for a method's handler on every call, and an
interceptor that wraps the handler (error mapping, authentication, identity
checks) built its closures and a new method handler each time: about 40 us of
every unary call at 16 one-entry writers (py-spy, docs/decisions.md). The
wrapping depends only on the method (and, for some interceptors, on a header
such as the relay mark) and on the inner handler, so it is kept per key.

Even so, grpc.aio runs each interceptor as a coroutine for every call, behind
a coroutine of its own per interceptor. Quire's interceptors do nothing per
call but look their wrapped handler up, so they are `HandlerWrapper`s: the
server (quire_common.server.create_server) composes them into its generic
handlers, where a call's handler is looked up without a coroutine; each is
still an interceptor wherever one is asked for.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence

import grpc

# More keys than any service has methods (times the header variants): past it
# the cache starts again rather than grow, should an inner interceptor ever
# hand out a new handler per call.
_MAX_ENTRIES = 1024


class HandlerCache:
    def __init__(self) -> None:
        self._built: dict[tuple[Hashable, int], tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def get(
        self, key: Hashable, handler: grpc.RpcMethodHandler, build: Callable[[], grpc.RpcMethodHandler]
    ) -> grpc.RpcMethodHandler:
        """The wrapped handler for `key` around `handler`, built by `build` the
        first time (and again if the inner handler is another object)."""
        slot = (key, id(handler))
        entry = self._built.get(slot)
        if entry is not None and entry[0] is handler:
            return entry[1]
        wrapped = build()
        if len(self._built) >= _MAX_ENTRIES:
            self._built.clear()
        self._built[slot] = (handler, wrapped)  # the inner handler kept alive, so its id stays its own
        return wrapped


class HandlerWrapper(grpc.aio.ServerInterceptor):
    """A server interceptor whose whole work is `wrap`: a method's handler
    (None when the server has none) and the call's details in, the handler
    to serve the call with out."""

    @abc.abstractmethod
    def wrap(
        self, handler: grpc.RpcMethodHandler | None, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None: ...

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        return self.wrap(await continuation(handler_call_details), handler_call_details)  # type: ignore[return-value]


class WrappedGenericHandler(grpc.GenericRpcHandler):
    """`inner`'s handlers, each wrapped by `wrappers` as interceptors listed in
    that order would wrap them (the first outermost)."""

    def __init__(self, inner: grpc.GenericRpcHandler, wrappers: Sequence[HandlerWrapper]) -> None:
        self._inner = inner
        self._innermost_first = tuple(reversed(wrappers))

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None  # another generic handler's method: asked of each in turn
        for wrapper in self._innermost_first:
            handler = wrapper.wrap(handler, handler_call_details)
        return handler


def wrap_generic_handlers(server: grpc.aio.Server, wrappers: Sequence[HandlerWrapper]) -> None:
    """Make every generic handler added to `server` from now on serve its
    methods wrapped by `wrappers` (the first outermost)."""
    if not wrappers:
        return
    add = server.add_generic_rpc_handlers

    def add_wrapped(generic_rpc_handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        add(tuple(WrappedGenericHandler(handler, wrappers) for handler in generic_rpc_handlers))

    server.add_generic_rpc_handlers = add_wrapped  # type: ignore[method-assign]
