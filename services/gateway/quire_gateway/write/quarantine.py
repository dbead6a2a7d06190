"""Bookies this gateway saw fail writes lately, and choosing bookies around them.

Like BookKeeper's bookie quarantine: a bookie replaced after a failed write is
avoided by new ensembles and by replacements, in every ledger this gateway
writes, while other bookies are left. The registry may still list it (it can
reach the bookie when this gateway cannot), so without this every new ledger
naming it would pay one add deadline before replacing it. A bookie leaves
quarantine after `seconds`, or at once when it registers again (the process
that failed is gone) or stores entries for this gateway again (an ensemble
still naming it, or one that had to take it back). No grpc here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from quire_api.errors import Reason, Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


class Quarantine:
    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        # Quarantined bookies and until when. Public for a plain lookup on every answer a writer
        # gets (`lift` only when the bookie is in it); changed only here.
        self.until: dict[str, float] = {}

    def add(self, bookie_id: str) -> None:
        if self.seconds > 0:
            if bookie_id not in self.members():
                log.info("bookie %s quarantined for %.0f s: new ensembles avoid it", bookie_id, self.seconds)
            self.until[bookie_id] = self._clock() + self.seconds

    def lift(self, bookie_id: str, why: str) -> None:
        if self.until.pop(bookie_id, None) is not None:
            log.info("bookie %s out of quarantine: %s", bookie_id, why)

    def members(self) -> set[str]:
        now = self._clock()
        self.until = {b: until for b, until in self.until.items() if until > now}
        return set(self.until)


async def choose_avoiding(
    avoid: Iterable[str], choose: Callable[[list[str]], Awaitable[T]], what: str, must_exclude: Iterable[str] = ()
) -> T:
    """`choose(exclude)` with `avoid` excluded as well as `must_exclude`, and
    once more with only `must_exclude` when that leaves too few bookies:
    a bookie that failed before beats failing the writer."""
    required = set(must_exclude)
    avoided = set(avoid) - required
    try:
        return await choose(sorted(required | avoided))
    except Unavailable as exc:
        if not avoided or exc.reason != Reason.NOT_ENOUGH_BOOKIES:
            raise
    log.info("%s: only bookies that failed before are left (%s); taking them again", what, ", ".join(sorted(avoided)))
    return await choose(sorted(required))
