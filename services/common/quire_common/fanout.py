"""Ask every replica at once and stop listening once the answers suffice:
the one fan-out behind fencing, LAC reads, recovery reads and recovery adds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from quire_api.errors import QuireError
from quire_common.tasks import let_finish

K = TypeVar("K")
T = TypeVar("T")


async def ask_all(
    calls: Mapping[K, Awaitable[T]],
    take: Callable[[K, T | None, QuireError | None], None],
    enough: Callable[[], bool],
    *,
    cancel_rest: bool,
) -> bool:
    """Start every call of `calls` at once and hand each outcome to `take`
    (key, answer, None) or (key, None, error) as it arrives; after each batch
    of arrivals ask `enough`. True once it says so, False when every call
    ended first. An exception that is not a QuireError (a bug) or one `take`
    raises ends the fan-out at once.

    The calls still out at the end are cancelled with `cancel_rest`, else left
    to end by their own deadlines (a fence must reach as many bookies as it
    can; see tasks.let_finish for why gRPC reads are not cancelled)."""
    keys: dict[asyncio.Future[T], K] = {asyncio.ensure_future(call): key for key, call in calls.items()}
    outstanding: set[asyncio.Future[T]] = set(keys)
    try:
        while outstanding:
            done, outstanding = await asyncio.wait(outstanding, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = task.exception()
                if error is None:
                    take(keys[task], task.result(), None)
                elif isinstance(error, QuireError):
                    take(keys[task], None, error)
                else:
                    raise error
            if enough():
                return True
        return False
    finally:
        if cancel_rest:
            for task in outstanding:
                task.cancel()
        let_finish(outstanding)  # their outcomes (cancelled included) stay out of the log
