"""Request messages that do not decode.

grpc answers INTERNAL when a request deserializer raises, and the handler
never runs. Servers decode tolerantly instead (quire_common.server's error
mapping): a message that does not decode is handed on as a `Malformed`, and
whoever takes the message (the handler, or the guard that reads a unary
call's message, quire_common.security) refuses it as INVALID_ARGUMENT.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from quire_api.errors import InvalidArgument


class Malformed:
    """Stands for a request message that did not decode."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """`deserializer`, answering a Malformed instead of raising."""
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # protobuf's DecodeError, or anything a bad message provokes
            return Malformed(exc)

    return deserialize


def checked(request: Any) -> Any:
    """`request`, or InvalidArgument if it did not decode."""
    if isinstance(request, Malformed):
        raise InvalidArgument(f"malformed request message: {request.error}")
    return request


async def checked_stream(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """`requests`, ended with InvalidArgument at the first that did not decode."""
    async for request in requests:
        yield checked(request)
