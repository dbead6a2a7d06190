"""How long to pause between attempts: one policy for every retry loop of
the services and the Python client.

The ceiling doubles from `first_seconds` up to `longest_seconds`, and each
pause is drawn at random below it ("full jitter"), so processes that failed
together (every gateway when the registry restarts) do not come back in step.
A policy may bound the attempts, the time spent, or both; `pauses()` then
ends, and the caller gives up with its own error.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    first_seconds: float
    longest_seconds: float
    # Pauses handed out at most (None: no bound).
    attempts: int | None = None
    # Seconds from pauses() past which no pause may end (None: no bound).
    within_seconds: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.first_seconds <= self.longest_seconds:
            raise ValueError(f"backoff needs 0 < first ({self.first_seconds}) <= longest ({self.longest_seconds})")
        if self.attempts is not None and self.attempts < 0:
            raise ValueError(f"backoff attempts must be >= 0, not {self.attempts}")
        if self.within_seconds is not None and self.within_seconds < 0:
            raise ValueError(f"backoff time bound must be >= 0, not {self.within_seconds}")

    def ceiling(self, attempt: int) -> float:
        """The longest pause after failed attempt `attempt` (1: the first)."""
        doublings = min(max(attempt - 1, 0), 64)  # past 64 the cap has long been reached
        return min(self.first_seconds * 2**doublings, self.longest_seconds)

    def pause(self, attempt: int, draw: Callable[[float, float], float] = random.uniform) -> float:
        """The pause after failed attempt `attempt`: at random in (0, ceiling]."""
        ceiling = self.ceiling(attempt)
        # Never quite zero: a loop that pauses must not spin.
        return max(draw(0.0, ceiling), ceiling / 100)

    def pauses(
        self,
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[float, float], float] = random.uniform,
    ) -> Iterator[float]:
        """The pauses to take, one per failed attempt, until a bound is
        reached; the time bound counts from this call. Start afresh after a
        success."""
        deadline = None if self.within_seconds is None else clock() + self.within_seconds
        return self._pauses(deadline, clock, draw)

    def _pauses(
        self, deadline: float | None, clock: Callable[[], float], draw: Callable[[float, float], float]
    ) -> Iterator[float]:
        attempt = 0
        while self.attempts is None or attempt < self.attempts:
            attempt += 1
            pause = self.pause(attempt, draw)
            if deadline is not None and clock() + pause > deadline:
                return
            yield pause
