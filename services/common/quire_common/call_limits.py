"""What one connection, one call and one caller may hold at a server that
faces clients (the gateway): streams per connection, keepalive and idle
connections, how long a call may wait for its request messages, and how many
calls one authenticated caller may have open. No grpc here: the server
options are plain (name, value) pairs.

Unauthenticated callers hold nothing: the gateway refuses them from the
call's headers, before any request message is read (quire_common.security's
guard_handler), so these bounds are about callers that did authenticate, and
about connections that have not made a call yet.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from quire_api.errors import DeadlineExceeded, ResourceExhausted

T = TypeVar("T")

# gRPC refuses a call whose headers exceed grpc.max_metadata_size with
# RESOURCE_EXHAUSTED before any Quire code runs (16 KiB by default, and calls
# between its soft and hard limits fail at random). Raised so that a bearer
# token up to this size reaches the authentication check and is refused there
# as UNAUTHENTICATED; larger headers are still grpc's RESOURCE_EXHAUSTED.
MAX_METADATA_BYTES = 64 * 1024


@dataclass(frozen=True)
class RequestIdle:
    """How long a call may wait for its request messages; 0 waits for ever."""

    first_message_seconds: float = 0.0
    between_messages_seconds: float = 0.0

    async def limit(
        self, requests: AsyncIterable[T], check: Callable[[T], None] | None = None, check_every: bool = False
    ) -> AsyncIterator[T]:
        """`requests`, ended with DeadlineExceeded when the first message (or,
        on a stream, the next one) does not arrive in time. `check`, which
        raises to refuse a message, runs on the first message, or on every
        one with `check_every`. Bounds and checks share this one generator:
        each generator a stream passes through costs every message a
        resumption."""
        iterator = aiter(requests)
        seconds, which = self.first_message_seconds, _FIRST
        while True:  # the first message, then each next one while they have a bound
            try:
                request = await _within(anext(iterator), seconds, which)
            except StopAsyncIteration:
                return
            if check is not None:
                check(request)
            yield request
            if not check_every:
                check = None
            seconds, which = self.between_messages_seconds, _NEXT
            if not seconds:
                break
        # No bound between messages (the default): the stream's own iteration, nothing timed.
        async for request in iterator:
            if check is not None:
                check(request)
            yield request

    async def first_message(self, read: Callable[[], Awaitable[T]]) -> T:
        """`await read()`, a call's one request message read without a
        request iterator (quire_common.security), ended with DeadlineExceeded
        when it does not arrive within first_message_seconds."""
        return await _within(read(), self.first_message_seconds, _FIRST)


_FIRST = ("its first request message", "QUIRE_GATEWAY_REQUEST_IDLE_SECONDS")
_NEXT = ("the stream's next request message", "QUIRE_GATEWAY_STREAM_IDLE_SECONDS")


async def _within(message: Awaitable[T], seconds: float, which: tuple[str, str]) -> T:
    """`await message`, DeadlineExceeded after `seconds` (0: no bound)."""
    # Without a bound (the stream idle bound is off by default) nothing is watched at all.
    if not seconds:
        return await message
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("a request message is awaited outside a task")
    watch = _idle_watch()
    watch.start(task, seconds)
    try:
        return await message
    except asyncio.CancelledError:
        if not watch.expired(task):
            raise
        what, setting = which
        raise DeadlineExceeded(
            f"the call sent no more than its headers: {what} did not arrive within {seconds:g} s ({setting})"
        ) from None
    finally:
        watch.stop(task)


class _IdleWatch:
    """The tasks of one event loop waiting for a request message, each with
    its deadline; one timer, at the earliest deadline, cancels those past
    theirs. A timer per wait (asyncio.timeout; wait_for would also start a
    task) cost each unary call and each stream's first message 4.5-5.4 us in
    a loop, the dict entries 0.04 (docs/decisions.md, "One idle watch per
    event loop"). The deadline is met within the loop's lateness, as a
    timer's is."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # Per waiting task: its deadline (loop time) and how many cancellations it had
        # pending when it began to wait (one of those is not this watch's to turn into
        # DeadlineExceeded).
        self._waiting: dict[asyncio.Task[Any], tuple[float, int]] = {}
        self._expired: dict[asyncio.Task[Any], int] = {}
        self._timer: asyncio.TimerHandle | None = None

    def start(self, task: asyncio.Task[Any], seconds: float) -> None:
        deadline = self.loop.time() + seconds
        self._waiting[task] = (deadline, task.cancelling())
        timer = self._timer
        if timer is None or deadline < timer.when():
            self._arm(deadline)

    def stop(self, task: asyncio.Task[Any]) -> None:
        self._waiting.pop(task, None)
        self._expired.pop(task, None)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        """Whether the CancelledError `task` met is this watch's, taking it back
        (the task is no longer being cancelled); False when the task was
        cancelled for another reason too, which goes on."""
        cancelling = self._expired.pop(task, None)
        return cancelling is not None and task.uncancel() <= cancelling

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_at(deadline, self._cancel_overdue)

    def _cancel_overdue(self) -> None:
        self._timer = None
        now = self.loop.time()
        overdue = [(task, cancelling) for task, (deadline, cancelling) in self._waiting.items() if deadline <= now]
        for task, cancelling in overdue:
            del self._waiting[task]
            self._expired[task] = cancelling
            task.cancel()
        if self._waiting:
            self._arm(min(deadline for deadline, _ in self._waiting.values()))


# One watch per event loop; the last one used is kept at hand (a process has one loop).
_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _IdleWatch] = weakref.WeakKeyDictionary()
_last_watch: _IdleWatch | None = None


def _idle_watch() -> _IdleWatch:
    global _last_watch
    loop = asyncio.get_running_loop()
    watch = _last_watch
    if watch is None or watch.loop is not loop:
        watch = _watches.get(loop)
        if watch is None:
            watch = _watches[loop] = _IdleWatch(loop)
        _last_watch = watch
    return watch


NO_IDLE_LIMIT = RequestIdle()


class CallsPerCaller:
    """Open calls per authenticated caller, so that one identity cannot hold
    every slot of the server; 0 means no limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: Counter[str] = Counter()

    def admit(self, caller: str) -> None:
        """Count a call of `caller`; ResourceExhausted (OVERLOADED, retryable) at the limit."""
        if self.limit and self._open[caller] >= self.limit:
            raise ResourceExhausted(
                f"{caller!r} already has {self._open[caller]} calls open at this gateway, its limit "
                "(QUIRE_GATEWAY_MAX_CALLS_PER_CALLER); let some finish first"
            )
        self._open[caller] += 1

    def release(self, caller: str) -> None:
        self._open[caller] -= 1
        if self._open[caller] <= 0:
            del self._open[caller]

    def open_calls(self, caller: str) -> int:
        return self._open[caller]


@dataclass(frozen=True)
class ConnectionLimits:
    """HTTP/2 limits of a client-facing listener. 0 leaves grpc's default
    (no limit) for the stream count and idle connections."""

    max_streams_per_connection: int = 0
    keepalive_seconds: float = 0.0
    keepalive_timeout_seconds: float = 20.0
    max_connection_idle_seconds: float = 0.0
    max_metadata_bytes: int = MAX_METADATA_BYTES

    def server_options(self) -> list[tuple[str, Any]]:
        options: list[tuple[str, Any]] = [
            ("grpc.max_metadata_size", self.max_metadata_bytes),
            ("grpc.absolute_max_metadata_size", self.max_metadata_bytes),
        ]
        if self.max_streams_per_connection:
            options.append(("grpc.max_concurrent_streams", self.max_streams_per_connection))
        if self.keepalive_seconds:
            # The server pings a connection quiet for this long and closes it
            # when no answer comes: a peer that vanished frees its calls.
            options += [
                ("grpc.keepalive_time_ms", int(self.keepalive_seconds * 1000)),
                ("grpc.keepalive_timeout_ms", int(self.keepalive_timeout_seconds * 1000)),
                ("grpc.keepalive_permit_without_calls", 1),
            ]
        if self.max_connection_idle_seconds:
            options.append(("grpc.max_connection_idle_ms", int(self.max_connection_idle_seconds * 1000)))
        return options
