"""The explicit-LAC policy (BookKeeper's explicit LAC), for every ledger written here.

Readers elsewhere learn a ledger's LAC from its bookies, which know it from
entry headers: the entries of a burst carry the LAC as it was when they were
sent, so the last of them would stay unreadable there until the next entry.
Once a ledger's writes pause (nothing pending, no new submit for
`seconds`), its LAC is written to its ensemble's bookies. Best effort: a
bookie that misses it learns it from the next entry.

One timer for all the ledgers gone quiet, not a task, a timer and a gather of
calls per ledger: with 16 writers spreading one-entry adds over 1,000 open
ledgers every add is followed by a pause, and that machinery cost the gateway
more than the add itself (docs/decisions.md). The timer fires on boundaries a
quarter of the pause apart, so the ledgers that fall due within one quarter
leave together: the writes to each bookie then share one call
(lac_batches.py), where ledgers due a few milliseconds apart paid a call and
a bookie's writer thread round each. No grpc here.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Protocol

from quire_api.ids import LedgerId

log = logging.getLogger(__name__)

# Queues an explicit LAC write to one bookie: (bookie, ledger, master key, LAC) -> the bookie's
# LAC of the ledger then, or the QuireError why not.
SubmitLac = Callable[[str, LedgerId, bytes, int], "asyncio.Future[int]"]


class QuietLedger(Protocol):
    """What the policy needs of a write handle."""

    ledger_id: LedgerId
    master_key: bytes
    ensemble: list[str]

    @property
    def submits(self) -> int: ...

    def lac_to_publish(self, submits_when_quiet: int) -> int | None: ...

    def lac_published(self, lac: int) -> None: ...


class ExplicitLacs:
    def __init__(self, seconds: float, submit: SubmitLac) -> None:
        self.seconds = seconds  # 0: never
        self._granularity = seconds / 4  # ledgers due within one such step leave together
        self._submit = submit
        # Ledgers gone quiet, in the order their LAC falls due: (its submits then, when due).
        self._quiet: dict[QuietLedger, tuple[int, float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        # Asked for once: asking for the running loop makes a system call (getpid) in this Python.
        self._loop: asyncio.AbstractEventLoop | None = None

    def quiet(self, ledger: QuietLedger) -> None:
        """`ledger` has nothing pending and a LAC its bookies may not know:
        publish it after `seconds` unless it is written to meanwhile."""
        if self.seconds <= 0:
            return
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        due = loop.time() + self.seconds
        self._quiet.pop(ledger, None)  # to the end: the dict stays in the order of due times
        self._quiet[ledger] = (ledger.submits, due)
        if self._timer is None:
            self._timer = loop.call_at(self._boundary(due), self._publish_due)

    def _boundary(self, due: float) -> float:
        """The first timer boundary at or after `due`."""
        return math.ceil(due / self._granularity) * self._granularity

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._quiet.clear()

    def _publish_due(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._quiet:
            ledger, (submits, due) = next(iter(self._quiet.items()))
            if due > now:
                self._timer = loop.call_at(self._boundary(due), self._publish_due)
                break
            del self._quiet[ledger]
            lac = ledger.lac_to_publish(submits)
            if lac is not None:  # still quiet: not written to, closed or failed meanwhile
                writes = [self._submit(bookie, ledger.ledger_id, ledger.master_key, lac) for bookie in ledger.ensemble]
                _Publication(ledger, lac, writes)


class _Publication:
    """One ledger's LAC on its way to its bookies: published once any of them has it."""

    __slots__ = ("_lac", "_ledger", "_left", "_written")

    def __init__(self, ledger: QuietLedger, lac: int, writes: list[asyncio.Future[int]]) -> None:
        self._ledger = ledger
        self._lac = lac
        self._left = len(writes)
        self._written = False
        for write in writes:
            write.add_done_callback(self._answered)

    def _answered(self, write: asyncio.Future[int]) -> None:
        error = write.exception() if not write.cancelled() else None
        if write.cancelled() or error is not None:
            log.debug("ledger %s: explicit LAC %d not written: %s", self._ledger.ledger_id, self._lac, error)
        else:
            self._written = True
        self._left -= 1
        if not self._left and self._written:
            self._ledger.lac_published(self._lac)
