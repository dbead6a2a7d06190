"""Helpers for the client streams the gateway receives (AppendEntries, PutBlob,
ReadEntryStream), whose first message says where the rest goes, or whose
every message is a request of its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def first_and_rest(stream: AsyncIterator[T]) -> tuple[T | None, AsyncIterator[T]]:
    """The stream's first message (None when the client sent none) and the stream after it."""
    rest = aiter(stream)
    return await anext(rest, None), rest


async def chained(first: T, rest: AsyncIterator[T]) -> AsyncIterator[T]:
    """The whole stream again: `first`, then `rest`."""
    yield first
    async for message in rest:
        yield message


@dataclass(frozen=True)
class _End:
    """The request stream ended: cleanly (error None) or with this error."""

    error: BaseException | None


async def answered_in_order(
    requests: AsyncIterator[T],
    answer: Callable[[T], Awaitable[R]],
    window: int,
    answer_at_once: Callable[[T], R | None] | None = None,
) -> AsyncIterator[R]:
    """`answer(request)` for every request, up to `window` of them at once
    (the window full, no more requests are read: flow control holds the
    client back), yielded in request order. `answer` reports a request's own
    failure in what it returns; an exception it raises ends the stream.

    The requests are read in a task of their own, so a client that waits for
    each answer before sending its next request is answered at once. When the
    client ends its side, the answers still due are yielded, then the stream
    ends. When reading the requests fails (a message the authorization guard
    refuses, one that does not decode, a stream idle too long), the answers to
    the requests before it are yielded first, then that error is raised.
    Nothing is left running once the caller stops.

    `answer_at_once(request)`, when given, is tried first: a request it
    answers (not None) takes no task of its own, which is most of what a
    request answered from memory costs; the answer keeps its place in order."""
    if window < 1:
        raise ValueError(f"window {window} must be at least 1")
    slots = asyncio.Semaphore(window)
    loop = asyncio.get_running_loop()
    due: asyncio.Queue[asyncio.Future[R] | _End] = asyncio.Queue()

    async def take() -> None:
        error: BaseException | None = None
        try:
            async for request in requests:
                await slots.acquire()
                ready = answer_at_once(request) if answer_at_once is not None else None
                if ready is None:
                    due.put_nowait(asyncio.ensure_future(answer(request)))
                else:
                    answered: asyncio.Future[R] = loop.create_future()
                    answered.set_result(ready)
                    due.put_nowait(answered)
        except BaseException as exc:
            error = exc
            if not isinstance(exc, Exception):
                raise  # cancelled: the call is going away
        finally:
            due.put_nowait(_End(error))

    reader = asyncio.create_task(take())
    current: asyncio.Future[R] | None = None
    try:
        while True:
            item = await due.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            current = item
            result = await current
            current = None
            yield result
            del result  # an entry can be megabytes: hold none while waiting for the next
            slots.release()
    finally:
        reader.cancel()
        if current is not None:
            current.cancel()
        while not due.empty():
            left = due.get_nowait()
            if not isinstance(left, _End):
                left.cancel()
