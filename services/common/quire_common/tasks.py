"""Background tasks: stopping one the same way everywhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(task: asyncio.Task[object] | None) -> None:
    """Cancel a background task and wait until it has finished unwinding, so
    nothing it holds (a channel, a file) is used after the caller closes it."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def let_finish(calls: Iterable[asyncio.Future[Any]]) -> None:
    """Stop waiting for calls whose answers nobody needs any more, without
    cancelling them: each is a gRPC call that ends by its own deadline.
    grpcio's asyncio calls leak the native buffers of a response that is on
    its way when the call is cancelled (grpc/grpc#43360), so a gateway that
    cancelled the slower replicas' reads grew by about half a megabyte with
    every ledger it recovered. Their failures are kept out of the log."""
    for call in calls:
        call.add_done_callback(_retrieve)


def _retrieve(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()
