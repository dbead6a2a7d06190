"""Keeps the weight map: every writable bookie's disk figures (GetBookieInfo)
and its load factor (published by the telemetry stage), refreshed on a timer
and on membership changes. No grpc here: the figures come through the
`BookieInfoSource` and `LoadFactorSource` protocols.

Rules (BP-2): every writable bookie is polled every `info_interval_seconds`;
a bookie that joins is polled at once; one that leaves is dropped at once; one
whose info cannot be read is dropped from the map and retried every
`info_retry_interval_seconds`. A load factor older than
`load_factor_max_age_seconds` counts as 1.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from quire_placement.weights import BookieWeight, capped_weights, draw_weights, natural_weights, weight_table

log = logging.getLogger(__name__)


class BookieInfoSource(Protocol):
    async def disk(self, bookie_id: str, timeout_seconds: float) -> tuple[int, int]:
        """(free bytes, total bytes) of one bookie."""
        ...


class LoadFactorSource(Protocol):
    async def load_factors(self) -> dict[str, tuple[float, float]]:
        """bookie id -> (factor, unix time it was computed)."""
        ...


@dataclass(frozen=True)
class WeightSettings:
    enabled: bool = False
    info_interval_seconds: float = 60.0
    info_retry_interval_seconds: float = 10.0
    info_timeout_seconds: float = 5.0
    max_weight_multiple: float = 3.0
    load_factor_max_age_seconds: float = 900.0


@dataclass(frozen=True)
class DiskSample:
    free_bytes: int
    total_bytes: int
    read_at: float  # unix time


class WeightTracker:
    def __init__(
        self,
        settings: WeightSettings,
        info: BookieInfoSource,
        loads: LoadFactorSource | None = None,
        *,
        clock: Callable[[], float] = time.time,
        on_poll_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self._info = info
        self._loads = loads
        self._clock = clock
        self._on_poll_failure = on_poll_failure
        self.disk: dict[str, DiskSample] = {}
        self.load: dict[str, tuple[float, float]] = {}
        self._retry_at: dict[str, float] = {}
        self._members: set[str] = set()
        self._next_full_poll = 0.0
        self._wakeup = asyncio.Event()

    # -- membership -----------------------------------------------------------

    def membership(self, writable: Iterable[str]) -> set[str]:
        """Record the writable bookies now; drop those gone at once; return
        the ones not known yet (to be polled at once)."""
        current = set(writable)
        for gone in self._members - current:
            self.disk.pop(gone, None)
            self._retry_at.pop(gone, None)
        joined = current - self._members
        self._members = current
        if joined:
            self._wakeup.set()
        return joined

    # -- polling --------------------------------------------------------------

    def due(self) -> list[str]:
        """Bookies to poll now: everyone at the full interval, newcomers and
        failed ones whose retry time has come."""
        now = self._clock()
        if now >= self._next_full_poll:
            return sorted(self._members)
        return sorted(b for b in self._members if b not in self.disk and self._retry_at.get(b, 0.0) <= now)

    async def poll(self, bookie_ids: Iterable[str]) -> None:
        ids = list(bookie_ids)
        if not ids:
            return
        now = self._clock()
        if set(ids) >= self._members:
            self._next_full_poll = now + self.settings.info_interval_seconds
        results = await asyncio.gather(
            *(self._info.disk(b, self.settings.info_timeout_seconds) for b in ids), return_exceptions=True
        )
        for bookie_id, result in zip(ids, results, strict=True):
            if bookie_id not in self._members:
                continue  # left while we asked
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                self.disk.pop(bookie_id, None)
                self._retry_at[bookie_id] = now + self.settings.info_retry_interval_seconds
                log.warning("reading the info of bookie %s failed: %s", bookie_id, result)
                if self._on_poll_failure is not None:
                    self._on_poll_failure(bookie_id)
                continue
            free, total = result
            self.disk[bookie_id] = DiskSample(free, total, self._clock())
            self._retry_at.pop(bookie_id, None)
        if self._loads is not None:
            try:
                self.load = await self._loads.load_factors()
            except Exception as exc:  # keep the last known factors
                log.warning("reading load factors failed: %s", exc)

    def next_wait_seconds(self) -> float:
        now = self._clock()
        times = [self._next_full_poll, *(t for b, t in self._retry_at.items() if b in self._members)]
        return max(0.05, min(times) - now) if times else self.settings.info_interval_seconds

    async def run(self, writable: Callable[[], object]) -> None:
        """Poll forever. `writable` is an async callable giving the writable
        bookie ids (the membership is refreshed before every round)."""
        while True:
            # Cleared before the round reads the membership, so a join that
            # lands during the round wakes the next one instead of being lost.
            self._wakeup.clear()
            try:
                self.membership(await writable())  # type: ignore[misc]
                await self.poll(self.due())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("weight polling round failed: %s", exc)
            try:
                async with asyncio.timeout(self.next_wait_seconds()):
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    def wake(self) -> None:
        self._wakeup.set()

    # -- weights --------------------------------------------------------------

    def load_factors(self) -> dict[str, float]:
        """Fresh factors in (0, 1]; stale or absent ones are left out (1)."""
        now = self._clock()
        return {
            bookie: min(max(factor, 0.0), 1.0)
            for bookie, (factor, computed_at) in self.load.items()
            if now - computed_at <= self.settings.load_factor_max_age_seconds and factor > 0
        }

    def draw_weights(self) -> Mapping[str, float]:
        """Weights for the draws, over the writable bookies whose info is
        known. Empty (uniform draws) when disk weights are off, unless load
        factors are published."""
        factors = self.load_factors()
        if not self.settings.enabled:
            return {b: factors.get(b, 1.0) for b in self._members} if factors else {}
        known = {b: s.free_bytes for b, s in self.disk.items() if b in self._members}
        capped = capped_weights(natural_weights(known), self.settings.max_weight_multiple)
        return draw_weights(capped, factors)

    def unknown(self) -> list[str]:
        """Writable bookies whose info has not been read (or failed)."""
        return sorted(self._members - self.disk.keys())

    def table(self) -> list[tuple[BookieWeight, DiskSample]]:
        samples = {b: s for b, s in self.disk.items() if b in self._members}
        rows = weight_table(
            {b: (s.free_bytes, s.total_bytes) for b, s in samples.items()},
            self.settings.max_weight_multiple,
            self.load_factors(),
        )
        return [(row, samples[row.bookie_id]) for row in rows]
