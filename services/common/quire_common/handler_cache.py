"""Method handlers wrapped by a server interceptor, built once.

grpc.aio asks every interceptor for a method's handler on every call, and an
interceptor that wraps the handler (error mapping, authentication, identity
checks) built its closures and a new method handler each time: about 40 us of
every unary call at 16 one-entry writers (py-spy, docs/decisions.md). The
wrapping depends only on the method (and, for some interceptors, on a header
such as the relay mark) and on the inner handler, so it is kept per key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

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
