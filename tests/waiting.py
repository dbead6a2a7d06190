"""Waiting for an event in tests: generous deadlines, never a speed bound.

A busy two-core CI machine can make a repair that takes one second here take
twenty there. A test waits for what it expects with a deadline long enough to
mean "it is not going to happen", asserts the outcome, and records how long it
took as a figure rather than judging it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Long enough that only a missing event, never a slow machine, runs it out.
EVENT_DEADLINE_SECONDS = 180.0


def wait_until(
    what: str,
    condition: Callable[[], T | None],
    *,
    deadline_seconds: float = EVENT_DEADLINE_SECONDS,
    poll_seconds: float = 0.1,
) -> T:
    """Poll `condition` until it returns something truthy, and return that.

    Fails the test naming `what` if the deadline passes first.
    """
    started = time.monotonic()
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() - started > deadline_seconds:
            raise AssertionError(f"{what}: not seen within {deadline_seconds:.0f} s")
        time.sleep(poll_seconds)
