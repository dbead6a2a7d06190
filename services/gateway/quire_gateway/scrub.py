"""The scrub: the active auditor's steady check that every bookie holds what
the ledgers assign to it, and that copies still read back intact.

One pass visits every ledger. For each segment and each of its bookies it
asks the bookie which of the entries the segment's write sets give it are
missing (FindMissingEntries: a key scan, no data moves), up to the entries
known to be confirmed: a closed ledger's end, or an open ledger's LAC as its
bookies report it (the writer is never involved). Then it re-reads a rolling
sample of each ledger's entries from every replica, checking digests; the
sample moves on each pass, so in time every entry is read. What is missing
or damaged is marked in the ledger's metadata (the same markers readers and
writers set) and the auditor copies it back from a good replica.

Pace: entries checked and bytes re-read are spent from two budgets per
second, so a scrub never takes more than its share of the bookies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from quire.common.v1 import common_pb2
from quire_api.errors import DataLoss, QuireError
from quire_api.ids import LedgerId
from quire_api.replication import entries_held, segment_end
from quire_common.entry import verified_entry
from quire_common.ledger_secrets import ledger_digester
from quire_gateway import metrics
from quire_gateway.quorum_rules import replicas_of
from quire_gateway.remote import Remote
from quire_gateway.repairs import mark_for_repair

log = logging.getLogger(__name__)

CHECK_CHUNK_ENTRIES = 65_536  # a bookie's limit per FindMissingEntries call


@dataclass(frozen=True)
class ScrubSettings:
    entries_per_second: float = 2000.0  # 0: no scrub
    bytes_per_second: float = 8 * 1024 * 1024
    sample_entries: int = 16  # per ledger per pass, each read from every replica
    pass_interval_seconds: float = 60.0  # from the start of one pass to the next


@dataclass
class ScrubStats:
    passes: int = 0
    ledgers: int = 0
    entries_checked: int = 0  # replica copies asked about
    entries_sampled: int = 0  # replica copies read back and digest-checked
    missing: int = 0
    damaged: int = 0
    flagged: int = 0  # markers set or widened
    pass_started: float | None = None
    last_pass_started: float | None = None  # of the last completed pass
    last_pass_seconds: float = 0.0
    _since: float = field(default_factory=time.monotonic)

    def lag_seconds(self) -> float:
        """How old the oldest check may be: since the start of the last
        completed pass (or since scrubbing began, before the first)."""
        return time.monotonic() - (self.last_pass_started or self._since)


class Pace:
    """A budget of `rate` per second that may go into debt: taking more than
    is there waits until the debt is paid, so the average holds."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._tokens = rate
        self._at = time.monotonic()

    async def spend(self, amount: float) -> None:
        now = time.monotonic()
        self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate) - amount
        self._at = now
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)


class Scrubber:
    def __init__(self, remote: Remote, settings: ScrubSettings, stats: ScrubStats | None = None) -> None:
        self.remote = remote
        self.settings = settings
        self.stats = stats or ScrubStats()
        self._entries = Pace(settings.entries_per_second)
        self._bytes = Pace(settings.bytes_per_second)
        self._sample_from: dict[tuple[int, int], int] = {}  # ledger -> next entry of its rolling sample

    async def scrub_ledger(
        self, metadata: common_pb2.LedgerMetadata, registered: set[str], confirmed: int
    ) -> dict[str, tuple[int, int]]:
        """Check one ledger up to entry `confirmed`; mark what is missing or
        damaged for repair. Returns what it flagged, per bookie."""
        ledger_id = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
        found: dict[str, tuple[int, int]] = {}

        def flag(bookie: str, first: int, last: int) -> None:
            low, high = found.get(bookie, (first, last))
            found[bookie] = (min(low, first), max(high, last))

        for segment, ensemble in enumerate(metadata.ensembles):
            first = int(ensemble.first_entry_id)
            open_end = segment == len(metadata.ensembles) - 1  # the last segment ends at `confirmed`
            end = confirmed if open_end else min(segment_end(metadata, segment), confirmed)
            for position, bookie in enumerate(ensemble.bookie_ids):
                if bookie not in registered:
                    continue  # a missing bookie is the auditor's lost-bookie case
                # A window of ids at a time: a big segment never becomes one list.
                for start in range(first, end + 1, CHECK_CHUNK_ENTRIES):
                    last = min(end, start + CHECK_CHUNK_ENTRIES - 1)
                    chunk = entries_held(metadata.ensemble_size, metadata.write_quorum_size, position, start, last)
                    if not chunk:
                        continue
                    await self._entries.spend(len(chunk))
                    try:
                        missing = await self.remote.find_missing_entries(bookie, ledger_id, chunk)
                    except DataLoss:  # its storage cannot read that range back
                        self.stats.damaged += len(chunk)
                        flag(bookie, chunk[0], chunk[-1])
                        continue
                    except QuireError as exc:
                        log.info("scrub: ledger %s on bookie %s skipped this pass: %s", ledger_id, bookie, exc)
                        break
                    self.stats.entries_checked += len(chunk)
                    if missing:
                        self.stats.missing += len(missing)
                        flag(bookie, min(missing), max(missing))
        await self._sample(metadata, ledger_id, registered, confirmed, flag)
        if found:
            self.stats.flagged += await mark_for_repair(self.remote, ledger_id, found)
            log.warning("scrub: ledger %s: copies flagged for repair: %s", ledger_id, found)
        self.stats.ledgers += 1
        return found

    async def _sample(
        self,
        metadata: common_pb2.LedgerMetadata,
        ledger_id: LedgerId,
        registered: set[str],
        confirmed: int,
        flag: Callable[[str, int, int], None],
    ) -> None:
        """Read this pass's share of the rolling sample from every replica
        and check each copy's digest."""
        if self.settings.sample_entries <= 0:
            return
        key = (ledger_id.scope_id, ledger_id.ledger_id)
        first = self._sample_from.get(key, 0)
        if first > confirmed:
            first = 0
        last = min(confirmed, first + self.settings.sample_entries - 1)
        self._sample_from[key] = last + 1
        digester = ledger_digester(metadata)
        by_bookie: dict[str, list[int]] = {}
        for entry_id in range(first, last + 1):
            for bookie in replicas_of(metadata, entry_id):
                if bookie in registered:
                    by_bookie.setdefault(bookie, []).append(entry_id)
        for bookie, entry_ids in sorted(by_bookie.items()):
            await self._entries.spend(len(entry_ids))
            try:
                copies, missing = await self.remote.read_entries(bookie, ledger_id, entry_ids)
            except DataLoss:
                self.stats.damaged += len(entry_ids)
                flag(bookie, entry_ids[0], entry_ids[-1])
                continue
            except QuireError as exc:
                log.info("scrub: sampling ledger %s on bookie %s skipped: %s", ledger_id, bookie, exc)
                continue
            await self._bytes.spend(sum(len(data) for data in copies.values()))
            for entry_id, data in copies.items():
                self.stats.entries_sampled += 1
                try:
                    verified_entry(data, digester, ledger_id, entry_id)
                except QuireError:
                    self.stats.damaged += 1
                    metrics.digest_mismatches.add(1, {"bookie_id": bookie})
                    flag(bookie, entry_id, entry_id)
            for entry_id in missing:  # counted by the existence check already
                flag(bookie, entry_id, entry_id)

    def start_pass(self) -> None:
        self.stats.pass_started = time.monotonic()

    def end_pass(self, ledgers_seen: set[tuple[int, int]]) -> None:
        started = self.stats.pass_started or time.monotonic()
        self.stats.passes += 1
        self.stats.last_pass_started = started
        self.stats.last_pass_seconds = time.monotonic() - started
        self.stats.pass_started = None
        # Sample positions of ledgers deleted meanwhile go.
        self._sample_from = {k: v for k, v in self._sample_from.items() if k in ledgers_seen}

    def forget(self) -> None:
        """This gateway no longer holds the role: the next holder starts afresh."""
        self.stats.pass_started = None
        self._sample_from.clear()
