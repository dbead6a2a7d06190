"""Background tasks: stopping one the same way everywhere."""

from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(task: asyncio.Task[object] | None) -> None:
    """Cancel a background task and wait until it has finished unwinding, so
    nothing it holds (a channel, a file) is used after the caller closes it."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
