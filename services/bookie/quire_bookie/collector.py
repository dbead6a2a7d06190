"""Garbage collection: delete the data of ledgers whose metadata is gone.

A ledger is deleted only when the registry says it is gone twice, with a gap
between the two looks; any other answer (the registry unreachable, a
timeout) counts as "still there", so a registry hiccup deletes nothing.

The first look compares the bookie's ledgers with the registry's listing of
every ledger id (thousands per call, keys only), as BookKeeper's scan-and-
compare collector does; a listing that fails part-way finds nothing gone.
The ledgers it finds absent are then asked about one by one after the gap.
Asking about every ledger one by one, as the first look did before, cost the
registry and etcd most of a core for minutes every pass at 100,000 ledgers
(docs/decisions.md). The bookie's ledgers are taken before the listing: a
ledger has metadata before any of its entries reach a bookie, so one the
bookie holds and the listing lacks was deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from quire_api.ids import LedgerId
from quire_bookie.bookie import Bookie
from quire_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# True only when the metadata store positively says the ledger does not exist.
MetadataGone = Callable[[LedgerId], Awaitable[bool]]
# Every ledger that has metadata, a page at a time; raises when a page cannot be read.
ExistingLedgers = Callable[[], AsyncIterator[list[LedgerId]]]


class LedgerCollector:
    def __init__(
        self,
        bookie: Bookie,
        existing_ledgers: ExistingLedgers,
        metadata_gone: MetadataGone,
        *,
        interval_seconds: float,
        recheck_seconds: float,
    ) -> None:
        self._bookie = bookie
        self._existing_ledgers = existing_ledgers
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

    async def _unlisted(self) -> list[LedgerId]:
        """The bookie's ledgers that the registry's listing lacks (none when
        the listing fails)."""
        held = set(await asyncio.to_thread(self._bookie.ledger_ids))  # a scan of the store: off the loop
        try:
            async for page in self._existing_ledgers():
                held.difference_update(page)
        except Exception as exc:  # unknown is never gone
            log.warning("garbage collection: cannot list the ledgers that exist: %s", exc)
            return []
        return sorted(held, key=lambda ledger_id: ledger_id.value)

    async def collect_once(self) -> list[LedgerId]:
        """One pass; returns the ledgers deleted."""
        candidates = await self._unlisted()
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
