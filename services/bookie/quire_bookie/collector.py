"""Garbage collection: delete the data of ledgers whose metadata is gone.

A ledger is deleted only when the registry says NOT_FOUND for it twice, with
a gap between the two looks; any other answer (the registry unreachable, a
timeout) counts as "still there", so a registry hiccup deletes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from quire_api.ids import LedgerId
from quire_bookie.bookie import Bookie
from quire_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# True only when the metadata store positively says the ledger does not exist.
MetadataGone = Callable[[LedgerId], Awaitable[bool]]


class LedgerCollector:
    def __init__(
        self, bookie: Bookie, metadata_gone: MetadataGone, *, interval_seconds: float, recheck_seconds: float
    ) -> None:
        self._bookie = bookie
        self._metadata_gone = metadata_gone
        self._interval = interval_seconds
        self._recheck = recheck_seconds
        self._task: asyncio.Task[None] | None = None

    async def _gone(self, ledger_ids: list[LedgerId]) -> list[LedgerId]:
        gone = []
        for ledger_id in ledger_ids:
            try:
                if await self._metadata_gone(ledger_id):
                    gone.append(ledger_id)
            except Exception as exc:  # unknown is never gone
                log.warning("garbage collection: cannot tell whether ledger %s exists: %s", ledger_id, exc)
        return gone

    async def collect_once(self) -> list[LedgerId]:
        """One pass; returns the ledgers deleted."""
        candidates = await self._gone(self._bookie.ledger_ids())
        if not candidates:
            return []
        await asyncio.sleep(self._recheck)
        confirmed = await self._gone(candidates)
        for ledger_id in confirmed:
            await self._bookie.delete_ledger(ledger_id)
        if confirmed:
            log.info("garbage collection deleted %d ledgers whose metadata is gone", len(confirmed))
        return confirmed

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ledger-gc")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.collect_once()
            except Exception as exc:
                log.error("garbage collection pass failed", exc_info=exc)
