"""The scrub: the active auditor's steady check that every bookie holds what
the ledgers assign to it, and that copies still read back intact.

One pass visits every ledger, a group of ledgers at a time. Each bookie gets
one CheckEntries call for as many of the group's ledgers as fit in one (up
to 65,536 entry ids): which of the entries the ledgers' write sets give it
are missing (a key scan), and which of this pass's rolling sample it stores
damaged, verified on the bookie itself (header ids and CRC digests), so no
entry data crosses the network and a small ledger costs a few numbers in a
shared call rather than calls of its own. The question is packed (stripes:
per ledger segment its range, its stripe of the ensemble and the range to
verify, in columns), and so is the answer (the copies found missing or
damaged), so that neither side builds a message per ledger. HMAC digests
need the ledger's key, which bookies do not hold: the sample of an HMAC
ledger is read back here and checked with `verified_entry`. Entries are checked up to those
known to be confirmed: a closed ledger's end, or an open ledger's LAC as its
bookies report it (the writer is never involved). The sample moves on each
pass, so in time every entry is read. What is missing or damaged is marked
in the ledger's metadata (the same markers readers and writers set) and the
auditor copies it back from a good replica.

Pace: a pass spreads its checks over its period
(`QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS`, an hour by default) rather than
running in a burst, and entries checked and bytes re-read are spent from two
budgets per second, so a scrub never takes more than its share of the
bookies; a pass the budgets make longer than its period runs back to back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from quire_api.errors import DataLoss, QuireError
from quire_api.ids import LedgerId
from quire_common.entry import verified_entry
from quire_common.ledger_secrets import ledger_digester
from quire_gateway import metrics
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.metadata_store import MetadataStore
from quire_gateway.quorum_rules import replicas_of
from quire_gateway.repairs import mark_for_repair
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.common.v1 import common_pb2

log = logging.getLogger(__name__)

CHECK_CHUNK_ENTRIES = 65_536  # a bookie's limit of entry ids spanned per CheckEntries call
# Ledgers scrubbed together: their checks share each bookie's calls, and the
# metadata of a group is all that is held while its answers come back.
SCRUB_GROUP_LEDGERS = 1_000


@dataclass(frozen=True)
class ScrubSettings:
    entries_per_second: float = 2000.0  # 0: no scrub
    bytes_per_second: float = 8 * 1024 * 1024
    sample_entries: int = 16  # per ledger per pass, each read from every replica
    pass_interval_seconds: float = 3600.0  # a pass's period: its checks are spread over it


@dataclass
class ScrubStats:
    passes: int = 0
    ledgers: int = 0
    entries_checked: int = 0  # replica copies asked about
    entries_sampled: int = 0  # replica copies read back and verified (on the bookie or here)
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


class PassSchedule:
    """Spreads a pass's checks over its period instead of spending the
    budgets in a burst and then idling: the checks of ledger i of n wait
    until 9/10 of the way through the period that i/n of it has gone (the
    last tenth is room for a pass the budgets slow down).

    n is what the previous pass counted. A cluster that grew since then
    holds more: the ledgers past n are due at nine tenths of the period
    and go at the budgets' pace from there. (Paced by i/n alone, the pass
    after an empty cluster's first, with n = 1, waited nine tenths of a
    period per ledger: the scrub of a cluster filled after it started
    stalled for good.)"""

    SHARE = 0.9

    def __init__(self, period_seconds: float, ledgers: int) -> None:
        self.started = time.monotonic()
        self.period = period_seconds
        self.ledgers = max(ledgers, 1)

    async def wait_turn(self, ledgers_done: int) -> None:
        due = self.started + self.SHARE * self.period * min(ledgers_done / self.ledgers, 1.0)
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class Scrubber:
    def __init__(
        self,
        remote: ClusterCalls,
        metadata_store: MetadataStore,
        settings: ScrubSettings,
        stats: ScrubStats | None = None,
    ) -> None:
        self.remote = remote
        self.metadata_store = metadata_store  # where missing copies are marked for repair
        self.settings = settings
        self.stats = stats or ScrubStats()
        self._entries = Pace(settings.entries_per_second)
        self._bytes = Pace(settings.bytes_per_second)
        self._sample_from: dict[tuple[int, int], int] = {}  # ledger -> next entry of its rolling sample

    async def scrub_ledgers(
        self, ledgers: list[tuple[common_pb2.LedgerMetadata, int]], registered: set[str]
    ) -> dict[LedgerId, dict[str, tuple[int, int]]]:
        """Check each ledger up to its confirmed entry (given beside it) and
        mark what is missing or damaged for repair. Returns what it flagged,
        per ledger and bookie."""
        flagged: dict[LedgerId, dict[str, tuple[int, int]]] = {}

        def flag(ledger_id: LedgerId, bookie: str, first: int, last: int) -> None:
            found = flagged.setdefault(ledger_id, {})
            low, high = found.get(bookie, (first, last))
            found[bookie] = (min(low, first), max(high, last))

        batches: dict[str, _Batch] = {}
        read_here: list[tuple[common_pb2.LedgerMetadata, LedgerId, range]] = []
        for metadata, confirmed in ledgers:
            scope_id, ledger = metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id
            sample = self._next_sample((scope_id, ledger), confirmed)
            if metadata.digest_type == common_pb2.DIGEST_TYPE_HMAC:
                read_here.append((metadata, LedgerId(scope_id, ledger), sample))
                sample = range(0)
            for bookie, row in _rows(metadata, registered, confirmed, sample):
                batch = batches.get(bookie)
                if batch is None:
                    batch = batches[bookie] = _Batch()
                elif not batch.takes(row):
                    await self._check(bookie, batches.pop(bookie), flag)
                    batch = batches[bookie] = _Batch()
                batch.add(row)
        await asyncio.gather(*(self._check(bookie, batch, flag) for bookie, batch in batches.items()))
        for metadata, ledger_id, sample in read_here:
            await self._read_sample(metadata, ledger_id, registered, sample, flag)
        for ledger_id, found in flagged.items():
            try:
                self.stats.flagged += await mark_for_repair(self.metadata_store, ledger_id, found)
            except QuireError as exc:
                log.warning("scrub: ledger %s: marking %s for repair failed: %s", ledger_id, found, exc)
                continue
            log.warning("scrub: ledger %s: copies flagged for repair: %s", ledger_id, found)
        self.stats.ledgers += len(ledgers)
        return flagged

    def _next_sample(self, key: tuple[int, int], confirmed: int) -> range:
        """This pass's share of the rolling sample of ledger `key` (scope, ledger)."""
        if self.settings.sample_entries <= 0:
            return range(0)
        first = self._sample_from.get(key, 0)
        if first > confirmed:
            first = 0
        last = min(confirmed, first + self.settings.sample_entries - 1)
        self._sample_from[key] = last + 1
        return range(first, last + 1)

    async def _check(self, bookie: str, batch: _Batch, flag: Flag) -> None:
        """One CheckEntries call: what of `batch` the bookie lacks or holds damaged."""
        await self._entries.spend(batch.copies)
        try:
            found = await self.remote.check_entries(bookie, batch.stripes())
        except QuireError as exc:
            log.info("scrub: %d ledger segments on bookie %s skipped this pass: %s", len(batch.rows), bookie, exc)
            return
        await self._bytes.spend(found.bytes_verified)
        self.stats.entries_checked += batch.copies
        self.stats.entries_sampled += sum(row.verified for row in batch.rows)
        bad: dict[int, tuple[int, int]] = {}  # row -> the lowest and highest entry found missing or damaged
        for row, entry_id in zip(found.missing_rows, found.missing_entry_ids, strict=True):
            if batch.rows[row].verifies(entry_id):
                self.stats.entries_sampled -= 1  # asked to verify, but not there
            low, high = bad.get(row, (entry_id, entry_id))
            bad[row] = (min(low, entry_id), max(high, entry_id))
        for row, entry_id in zip(found.damaged_rows, found.damaged_entry_ids, strict=True):
            low, high = bad.get(row, (entry_id, entry_id))
            bad[row] = (min(low, entry_id), max(high, entry_id))
        self.stats.missing += len(found.missing_entry_ids)
        self.stats.damaged += len(found.damaged_entry_ids)
        if found.damaged_entry_ids:
            metrics.digest_mismatches.add(len(found.damaged_entry_ids), {"bookie_id": bookie})
        for row, (low, high) in bad.items():
            ledger_id = LedgerId(batch.rows[row].scope_id, batch.rows[row].ledger_id)
            flag(ledger_id, bookie, low, high)

    async def _read_sample(
        self,
        metadata: common_pb2.LedgerMetadata,
        ledger_id: LedgerId,
        registered: set[str],
        sample: range,
        flag: Flag,
    ) -> None:
        """Read this pass's sample of an HMAC ledger from every replica and
        verify each copy here, where the ledger's key is."""
        digester = ledger_digester(metadata)
        by_bookie: dict[str, list[int]] = {}
        for entry_id in sample:
            for bookie in replicas_of(metadata, entry_id):
                if bookie in registered:
                    by_bookie.setdefault(bookie, []).append(entry_id)
        for bookie, entry_ids in sorted(by_bookie.items()):
            await self._entries.spend(len(entry_ids))
            try:
                copies, missing = await self.remote.read_entries(bookie, ledger_id, entry_ids)
            except DataLoss:
                self.stats.damaged += len(entry_ids)
                flag(ledger_id, bookie, entry_ids[0], entry_ids[-1])
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
                    flag(ledger_id, bookie, entry_id, entry_id)
            for entry_id in missing:  # counted by the existence check already
                flag(ledger_id, bookie, entry_id, entry_id)

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


Flag = Callable[[LedgerId, str, int, int], None]


class _Row(NamedTuple):
    """One row of a bookie's CheckEntries stripes: the entries first..last
    of a segment of a ledger that position `position` of its ensemble holds
    (`held` of them), those in verify_first..verify_last (`verified` of
    them) to be verified on the bookie."""

    scope_id: int
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    position: int
    first: int
    last: int
    held: int
    verify_first: int
    verify_last: int
    verified: int

    def verifies(self, entry_id: int) -> bool:
        return self.verify_first <= entry_id <= self.verify_last


class _Batch:
    """One bookie's next CheckEntries call: rows of many ledgers whose
    ranges span at most CHECK_CHUNK_ENTRIES entry ids in all (the bookie's
    bound; a row is at most one window)."""

    def __init__(self) -> None:
        self.rows: list[_Row] = []
        self.span = 0  # entry ids the rows' ranges cover
        self.copies = 0  # of them, held by the bookie: the copies asked about

    def takes(self, row: _Row) -> bool:
        return not self.rows or self.span + row.last - row.first + 1 <= CHECK_CHUNK_ENTRIES

    def add(self, row: _Row) -> None:
        self.rows.append(row)
        self.span += row.last - row.first + 1
        self.copies += row.held

    def stripes(self) -> bookie_pb2.EntryStripes:
        rows = self.rows
        return bookie_pb2.EntryStripes(
            scope_ids=[row.scope_id for row in rows],
            ledger_ids=[row.ledger_id for row in rows],
            first_entry_ids=[row.first for row in rows],
            last_entry_ids=[row.last for row in rows],
            ensemble_sizes=[row.ensemble_size for row in rows],
            write_quorums=[row.write_quorum for row in rows],
            positions=[row.position for row in rows],
            verify_first_ids=[row.verify_first for row in rows],
            verify_last_ids=[row.verify_last for row in rows],
        )


def _rows(
    metadata: common_pb2.LedgerMetadata, registered: set[str], confirmed: int, verify: range
) -> list[tuple[str, _Row]]:
    """What to ask each registered bookie of the ledger's segments, up to
    entry `confirmed`: the entries its write sets give it, a window of ids
    at a time (so that a row fits in one call), those in `verify` to be
    verified on the bookie. A missing bookie is the auditor's lost-bookie
    case, not the scrub's. Runs for every ledger on every pass: a list, and
    one count per window for all positions."""
    scope_id, ledger_id = metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id
    size, quorum = metadata.ensemble_size, metadata.write_quorum_size
    ensembles = metadata.ensembles
    last_segment = len(ensembles) - 1
    rows = []
    for segment, ensemble in enumerate(ensembles):
        first = ensemble.first_entry_id
        # The last segment ends at `confirmed`; the others where the next begins.
        end = confirmed if segment == last_segment else min(ensembles[segment + 1].first_entry_id - 1, confirmed)
        for start in range(first, end + 1, CHECK_CHUNK_ENTRIES):
            last = min(end, start + CHECK_CHUNK_ENTRIES - 1)
            held = held_per_position(size, quorum, start, last)
            verify_first, verify_last = max(start, verify.start), min(last, verify.stop - 1)
            if (verify_first, verify_last) == (start, last):
                verified = held
            else:
                verified = held_per_position(size, quorum, verify_first, verify_last)
            for position, bookie in enumerate(ensemble.bookie_ids):
                if held[position] and bookie in registered:
                    row = _Row(
                        scope_id,
                        ledger_id,
                        size,
                        quorum,
                        position,
                        start,
                        last,
                        held[position],
                        verify_first,
                        verify_last,
                        verified[position],
                    )
                    rows.append((bookie, row))
    return rows


def held_per_position(ensemble_size: int, write_quorum: int, first: int, last: int) -> list[int]:
    """How many of the entries first..last each position of an ensemble
    holds (entry e goes to positions (e + k) mod E for k < W): count_held
    for every position at once."""
    if last < first:
        return [0] * ensemble_size
    cycles, rest = divmod(last - first + 1, ensemble_size)
    held = [cycles * write_quorum] * ensemble_size
    for entry_id in range(first, first + rest):
        for copy in range(write_quorum):
            held[(entry_id + copy) % ensemble_size] += 1
    return held
