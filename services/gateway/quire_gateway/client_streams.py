"""Helpers for the client streams the gateway receives (AppendEntries, PutBlob,
ReadEntryStream), whose first message says where the rest goes, or whose
every message is a request of its own."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

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


class _Due(Generic[R]):
    """The answers due, in request order, between the side reading the requests
    and the side yielding the answers, at most `window` of them. The two sides
    wake each other with plain futures: an asyncio.Queue and a Semaphore cost
    each request a dozen Python calls more (docs/decisions.md)."""

    def __init__(self, window: int) -> None:
        self._loop = asyncio.get_running_loop()
        # Per request: the task answering it, or None and its answer; _End last.
        self.items: deque[tuple[asyncio.Future[R] | None, R | None] | _End] = deque()
        self._window = window
        self._open = 0  # requests taken whose answers are not yielded yet
        self._room: asyncio.Future[None] | None = None  # the reader, waiting for room in the window
        self._arrival: asyncio.Future[None] | None = None  # the yielding side, waiting for an answer

    async def make_room(self) -> None:
        """Wait until one more request may be taken (the window not full), and take it."""
        while self._open >= self._window:
            self._room = self._loop.create_future()
            await self._room
        self._open += 1

    def add(self, item: tuple[asyncio.Future[R] | None, R | None] | _End) -> None:
        self.items.append(item)
        arrival, self._arrival = self._arrival, None
        if arrival is not None and not arrival.done():
            arrival.set_result(None)

    async def next(self) -> tuple[asyncio.Future[R] | None, R | None] | _End:
        while not self.items:
            self._arrival = self._loop.create_future()
            await self._arrival
        return self.items.popleft()

    def answered(self) -> None:
        """One answer was yielded: its place in the window is free."""
        self._open -= 1
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)

    def cancel_left(self) -> None:
        for left in self.items:
            if not isinstance(left, _End) and left[0] is not None:
                left[0].cancel()


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
    due: _Due[R] = _Due(window)

    async def take() -> None:
        error: BaseException | None = None
        try:
            async for request in requests:
                await due.make_room()
                ready = answer_at_once(request) if answer_at_once is not None else None
                due.add((asyncio.ensure_future(answer(request)), None) if ready is None else (None, ready))
        except BaseException as exc:
            error = exc
            if not isinstance(exc, Exception):
                raise  # cancelled: the call is going away
        finally:
            due.add(_End(error))

    reader = asyncio.create_task(take())
    current: asyncio.Future[R] | None = None
    try:
        while True:
            item = await due.next()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            current, ready = item
            if current is None:
                result = cast(R, ready)  # answered at once
            else:
                result = await current
                current = None
            yield result
            del result  # an entry can be megabytes: hold none while waiting for the next
            due.answered()
    finally:
        reader.cancel()
        if current is not None:
            current.cancel()
        due.cancel_left()
