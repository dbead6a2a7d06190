"""Helpers for the client streams the gateway receives (AppendEntries, PutBlob),
whose first message says where the rest goes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")


async def first_and_rest(stream: AsyncIterator[T]) -> tuple[T | None, AsyncIterator[T]]:
    """The stream's first message (None when the client sent none) and the stream after it."""
    rest = aiter(stream)
    return await anext(rest, None), rest


async def chained(first: T, rest: AsyncIterator[T]) -> AsyncIterator[T]:
    """The whole stream again: `first`, then `rest`."""
    yield first
    async for message in rest:
        yield message
