"""Deleted ledgers' space given back off the writer thread.

A delete hides a ledger's entries at once (a synced range delete, written in
queue order by the bookie's writer); giving their space back takes a memtable
flush and a compaction of each deleted range, which ran on the writer thread
and held every add queued behind the delete for as long: after 400,000 1 KiB
entries were written and their 16 ledgers deleted, one writer's adds waited
up to 180 ms (docs/decisions.md, "A delete's compaction runs beside the
writer"). RocksDB's flush and compaction release the interpreter, so one
thread of their own runs them while the writer goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from quire_api.ids import LedgerId
from quire_common.thread_names import name_native_thread

log = logging.getLogger(__name__)


class SpaceReclaimer:
    """Runs `reclaim` on the ledgers handed to it, on a thread of its own
    (started by the first delete), one call for everything queued
    meanwhile. `close` finishes what is queued first: a bookie that stops
    leaves no deleted ledger's files behind unless it is killed."""

    def __init__(self, reclaim: Callable[[list[LedgerId]], None]) -> None:
        self._reclaim = reclaim
        self._queued: list[LedgerId] = []
        self._busy = False
        self._closing = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, ledger_ids: list[LedgerId]) -> None:
        with self._changed:
            if self._closing:
                raise RuntimeError("the space reclaimer is closed")
            self._queued.extend(ledger_ids)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="space-reclaim", daemon=True)
                self._thread.start()
                name_native_thread(self._thread, self._thread.name)
            self._changed.notify_all()

    def wait_until_idle(self, timeout_seconds: float) -> bool:
        """Whether everything handed over so far was reclaimed within `timeout_seconds`."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._queued and not self._busy, timeout_seconds)

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queued or self._closing)
                if not self._queued:
                    return  # closing, and nothing left
                ledger_ids, self._queued = self._queued, []
                self._busy = True
            try:
                self._reclaim(ledger_ids)
            except Exception:  # the space stays taken until RocksDB compacts there itself
                log.exception("giving back the space of %d deleted ledgers failed", len(ledger_ids))
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
