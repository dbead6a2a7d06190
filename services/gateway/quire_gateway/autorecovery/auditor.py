"""The auditor: one per cluster, elected; finds copies that are gone,
missing or damaged, and restores them.

Every gateway runs the auditor's loops, but only the holder of the
"auditor" role (roles.py, a lease through the registry) acts; a standby
takes over when the holder's lease lapses, within its TTL.

Every `interval_seconds` it lists the registered bookies, and reads every
ledger's metadata (a *full round*, a listing page at a time) only when one is
due: when the registered bookies changed, when the last round left a missing
bookie, when the metadata watch may have missed a change since the last full
round, and otherwise once an hour (QUIET_ROUNDS_BETWEEN_FULL_ROUNDS_FOLLOWED
intervals at the default of 30 s). In between, the ledgers that the watch
reports marked (ledger_changes.py) are repaired each interval, read one by
one: a quiet cluster's audit costs per marked ledger, not per ledger held. A
gateway without the watch (its metadata cache off) reads every ledger every
tenth interval, and every interval while the last round left something to
repair.
A bookie referenced by a ledger but not registered is *missing*; once it has
been missing for `lost_bookie_delay_seconds` (so a rolling restart causes no
re-replication storm) it is *lost*. For each CLOSED ledger with a segment on
a lost bookie it asks placement for a replacement, copies the entries the
lost bookie held in that segment from surviving replicas (digest checked) to
the replacement with recovery adds, then compare-and-swaps the metadata to
name the replacement.

Entries a registered bookie may lack or hold damaged are marked in the
metadata (`quire.under-replicated/<bookie>`): by a writer that left a failed
bookie out (delayed ensemble change) or replaced it (the entries confirmed
without it), by a reader that found a damaged copy, and by the scrub
(scrub.py). They are copied back to that bookie from the other replicas,
then the marker is removed. Of an open ledger only entries known to be
confirmed are copied (every segment but the last, and the last up to the
LAC its bookies report), and a marker still covering later entries stays;
the writer is never involved. A marked bookie that stays away is lost like
any other and replaced (closed ledgers).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from quire_api.errors import NotFound, QuireError, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_api.replication import (
    LostReplica,
    count_held,
    entries_held,
    lost_replicas,
    marked_replicas,
    marker_after_repair,
    markers,
    repairable_replicas,
    set_marker,
)
from quire_common.bookie_resolver import BookieDirectory
from quire_common.entry import Digester, verified_entry
from quire_common.ledger_secrets import ledger_digester, ledger_master_key
from quire_gateway.autorecovery.ledger_changes import LedgerChanges
from quire_gateway.autorecovery.scrub import SCRUB_GROUP_LEDGERS, PassSchedule, Scrubber, ScrubSettings, ScrubStats
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.metadata_store import MetadataStore
from quire_gateway.metadata_updates import update_metadata
from quire_gateway.read.bookie_lac import read_last_add_confirmed
from quire_gateway.roles import RoleHolder
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2

log = logging.getLogger(__name__)
COPY_BATCH_ENTRIES = 100


ROLE = "auditor"
# How long the auditor waits for a bookie's LAC answer (open ledgers).
FIRST_SCRUB_DELAY_SECONDS = 60.0
LAC_TIMEOUT_SECONDS = 2.0
# While the bookies stay as they were and the last round found nothing to
# repair, only every tenth interval reads every ledger (docs/decisions.md)...
QUIET_ROUNDS_BETWEEN_FULL_ROUNDS = 9
# ...and while the metadata watch reports every marker, only every 120th (an
# hour at the default interval): a safety net, and when the cluster's ledger
# counts are refreshed.
QUIET_ROUNDS_BETWEEN_FULL_ROUNDS_FOLLOWED = 119
# Ledgers' metadata per listing call: what a scrub pass holds at a time.
LISTING_PAGE = 500


@dataclass(frozen=True)
class AuditorSettings:
    interval_seconds: float = 30.0  # 0: no auditor
    lost_bookie_delay_seconds: float = 60.0
    lease_seconds: int = 10  # of the auditor role: a standby takes over within this
    scrub: ScrubSettings = field(default_factory=ScrubSettings)


# The cluster's state as one audit round saw it: what the metrics report as
# cluster-level gauges (one process reports them: the auditor role's holder).
_LEDGER_STATES = {
    common_pb2.LEDGER_STATE_OPEN: "open",
    common_pb2.LEDGER_STATE_IN_RECOVERY: "in_recovery",
    common_pb2.LEDGER_STATE_CLOSED: "closed",
}


@dataclass
class ClusterFigures:
    bookies_writable: int = 0
    bookies_read_only: int = 0
    bookies_missing: int = 0  # named by a ledger, not registered
    ledgers: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_LEDGER_STATES.values(), 0))
    under_replicated_ledgers: int = 0
    # Entries of known extent on a missing bookie or marked: an open
    # ledger's last segment counts only once its end is known.
    under_replicated_entries: int = 0
    # The largest ensemble of any ledger: fewer writable bookies than this and
    # a ledger's ensemble change can find no replacement.
    largest_ensemble: int = 0

    def flat(self) -> dict[str, float]:
        return {
            "bookies_writable": self.bookies_writable,
            "bookies_read_only": self.bookies_read_only,
            "bookies_missing": self.bookies_missing,
            **{f"ledgers_{state}": count for state, count in self.ledgers.items()},
            "under_replicated_ledgers": self.under_replicated_ledgers,
            "under_replicated_entries": self.under_replicated_entries,
            "largest_ensemble": self.largest_ensemble,
        }


def under_replicated_entries(metadata: common_pb2.LedgerMetadata, replicas: list[LostReplica]) -> int:
    total = 0
    for replica in replicas:
        ensemble_size = len(metadata.ensembles[replica.segment].bookie_ids)
        total += count_held(
            ensemble_size, metadata.write_quorum_size, replica.position, replica.first_entry_id, replica.last_entry_id
        )
    return total


@dataclass
class AuditState:
    missing_since: dict[str, float] = field(default_factory=dict)
    # None until this holder's first round: no cluster figures to report yet.
    cluster: ClusterFigures | None = None
    under_replicated_segments: int = 0
    rereplicated_segments: int = 0
    repaired_segments: int = 0  # marked replicas copied back
    repaired_entries: int = 0
    scrub: ScrubStats = field(default_factory=ScrubStats)

    def figures(self) -> dict[str, float]:
        """What /status, /metrics and the role's published record show."""
        scrub = self.scrub
        return {
            "under_replicated_segments": self.under_replicated_segments,
            "rereplicated_segments": self.rereplicated_segments,
            "repaired_segments": self.repaired_segments,
            "repaired_entries": self.repaired_entries,
            "scrub_passes": scrub.passes,
            "scrub_ledgers": scrub.ledgers,
            "scrub_entries_checked": scrub.entries_checked,
            "scrub_entries_sampled": scrub.entries_sampled,
            "scrub_missing": scrub.missing,
            "scrub_damaged": scrub.damaged,
            "scrub_flagged": scrub.flagged,
            "scrub_lag_seconds": round(scrub.lag_seconds(), 1),
            "scrub_last_pass_seconds": round(scrub.last_pass_seconds, 1),
            **(self.cluster.flat() if self.cluster is not None else {}),
        }


class Auditor:
    def __init__(
        self,
        remote: ClusterCalls,
        metadata_store: MetadataStore,
        bookies: BookieDirectory,
        settings: AuditorSettings,
        role: RoleHolder | None = None,
        changes: LedgerChanges | None = None,
    ) -> None:
        """Without `role` this auditor always acts (tests, a single gateway);
        without `changes` (no metadata watch) it finds markers only in full rounds."""
        self.remote = remote
        self.changes = changes
        self.metadata_store = metadata_store  # the ledgers' records it checks and changes
        self.bookies = bookies
        self.settings = settings
        self.state = AuditState()
        self.role = role
        if role is not None:
            role.published = lambda: {k: str(v) for k, v in self.state.figures().items()}
        self.scrubber = Scrubber(remote, metadata_store, settings.scrub, self.state.scrub)
        self._settled_lac: dict[tuple[int, int], int] = {}  # open ledger -> its LAC at the previous pass
        self._ledgers_last_pass: int | None = None  # how many ledgers the last scrub pass went through
        self._registered_at_last_round: frozenset[tuple[str, bool]] = frozenset()
        self._quiet_rounds = 0  # intervals since the last full round, while nothing called for one

    def active(self) -> bool:
        return self.role is None or self.role.holds()

    async def _wait_until_active(self) -> None:
        if self.role is not None and not self.role.holds():
            self.scrubber.forget()
            self._settled_lac.clear()
            self.state.missing_since.clear()  # the clock starts again for a new holder
            self.state.cluster = None  # another gateway reports the cluster now
            self._registered_at_last_round = frozenset()
            if self.changes is not None:
                self.changes.forget()
            await self.role.wait_until_held()

    async def run(self) -> None:
        """Campaign for the role (when there is one), audit every interval
        and scrub, while holding it."""
        loops = [self._audit_loop()]
        if self.role is not None:
            loops.append(self.role.run())
        if self.settings.scrub.entries_per_second > 0:
            loops.append(self._scrub_loop())
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.role is not None:
                await self.role.resign()

    async def _audit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.interval_seconds)
            await self._wait_until_active()
            try:
                records = await self.bookies.records(registry_pb2.BOOKIE_STATE_ALL)
                if self._round_due(records):
                    await self.audit_once(records)
                elif self.changes is not None and self.changes.ledgers:
                    await self.repair_marked_ledgers(records)
                self._raise_largest_ensemble()
            except QuireError as exc:
                log.warning("audit round failed: %s", exc)

    async def _scrub_loop(self) -> None:
        period = self.settings.scrub.pass_interval_seconds
        # A gateway that has just started (or taken over) lets the cluster
        # settle before its first pass, but does not wait a whole period.
        await asyncio.sleep(min(period, FIRST_SCRUB_DELAY_SECONDS))
        started = time.monotonic() - period  # the first pass is due at once
        while True:
            await asyncio.sleep(max(1.0, period - (time.monotonic() - started)))
            await self._wait_until_active()
            started = time.monotonic()
            try:
                await self.scrub_pass()
            except QuireError as exc:
                log.warning("scrub pass failed: %s", exc)

    def _raise_largest_ensemble(self) -> None:
        """A ledger created since the last full round with a larger ensemble than
        any before counts at once (the fewest writable bookies a cluster needs)."""
        cluster = self.state.cluster
        if self.changes is not None and cluster is not None:
            cluster.largest_ensemble = max(cluster.largest_ensemble, self.changes.largest_ensemble)

    async def scrub_pass(self) -> bool:
        """Scrub every ledger once, a group at a time, and repair what it
        flags; False when the role was lost half-way."""
        registered = {r.bookie_id for r in await self.bookies.records(registry_pb2.BOOKIE_STATE_ALL)}
        seen: set[tuple[int, int]] = set()
        group: list[tuple[common_pb2.LedgerMetadata, int]] = []
        self.scrubber.start_pass()
        # The listing is read a page at a time as the pass goes (spread over the period, an hour by
        # default), so the pass holds a page of metadata, not every ledger's; the pace is set by the
        # count the previous pass saw (the first pass counts first).
        if self._ledgers_last_pass is None:
            self._ledgers_last_pass = await self._count_ledgers()
        schedule = PassSchedule(self.settings.scrub.pass_interval_seconds, self._ledgers_last_pass)
        index = 0
        async for metadata in self._each_ledger():
            index += 1
            if not self.active():
                return False
            if metadata.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
                continue  # the recovery closes it; the next pass checks it
            key = (metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
            seen.add(key)
            try:
                confirmed = await self._confirmed(metadata)
            except QuireError as exc:
                log.warning("scrub: ledger %s: %s", _ledger(metadata), exc)
                continue
            if metadata.state != common_pb2.LEDGER_STATE_CLOSED:
                # An open ledger is checked up to the LAC the previous pass
                # saw: an entry confirmed by A bookies may still be on its
                # way to the other W-A, and must not count as missing.
                confirmed, self._settled_lac[key] = self._settled_lac.get(key, -1), confirmed
            if confirmed >= 0:
                group.append((metadata, confirmed))
            if len(group) >= SCRUB_GROUP_LEDGERS:
                await self._scrub_group(group, registered)
                group = []
                await schedule.wait_turn(index)
        if group and self.active():
            await self._scrub_group(group, registered)
        self._ledgers_last_pass = index
        self.scrubber.end_pass(seen)
        self._settled_lac = {k: v for k, v in self._settled_lac.items() if k in seen}
        return True

    async def _scrub_group(self, group: list[tuple[common_pb2.LedgerMetadata, int]], registered: set[str]) -> None:
        flagged = await self.scrubber.scrub_ledgers(group, registered)
        if not flagged:
            return
        for metadata, _ in group:
            if _ledger(metadata) not in flagged:
                continue
            try:
                await self._repair_marked(metadata, registered)
            except QuireError as exc:
                log.warning("scrub: repairing ledger %s: %s", _ledger(metadata), exc)

    async def _confirmed(self, metadata: common_pb2.LedgerMetadata) -> int:
        """The highest entry known to be confirmed: a closed ledger's end, or
        an open ledger's LAC as the bookies of its last ensemble report it
        (every entry before the last ensemble's first is confirmed too)."""
        if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
            return int(metadata.last_entry_id)
        lac = await read_last_add_confirmed(self.remote, _ledger(metadata), metadata, LAC_TIMEOUT_SECONDS)
        return max(lac, int(metadata.ensembles[-1].first_entry_id) - 1)

    async def _pages(self) -> AsyncIterator[list[common_pb2.LedgerMetadata]]:
        """Every ledger's metadata, a listing page at a time."""
        token = ""
        while True:
            page, token = await self.remote.list_ledger_metadata(0, LISTING_PAGE, token, all_scopes=True)
            yield page
            if not token:
                return

    async def _each_ledger(self) -> AsyncIterator[common_pb2.LedgerMetadata]:
        async for page in self._pages():
            for metadata in page:
                yield metadata

    async def _count_ledgers(self) -> int:
        return sum([len(page) async for page in self._pages()])

    def _round_due(self, records: list[registry_pb2.BookieRecord]) -> bool:
        """Whether this interval's round must read every ledger's metadata,
        whose cost grows with the ledgers held: when the registered bookies
        changed, when the last round left a missing bookie to wait for, when
        markers may have been set unseen (no watch, or a gap in it since the
        last full round), and otherwise every QUIET_ROUNDS_BETWEEN_FULL_ROUNDS
        intervals (QUIET_ROUNDS_BETWEEN_FULL_ROUNDS_FOLLOWED while the watch
        reports every marker). Without the watch, a marker left by the last
        round calls for the next one too."""
        registered = frozenset((r.bookie_id, r.read_only) for r in records)
        followed = self.changes is not None and self.changes.complete()
        quiet = (
            registered == self._registered_at_last_round
            and not self.state.missing_since
            and self.state.cluster is not None
            and (followed or self.state.cluster.under_replicated_ledgers == 0)
        )
        between = QUIET_ROUNDS_BETWEEN_FULL_ROUNDS_FOLLOWED if followed else QUIET_ROUNDS_BETWEEN_FULL_ROUNDS
        if quiet and self._quiet_rounds < between:
            self._quiet_rounds += 1
            return False
        self._quiet_rounds = 0
        self._registered_at_last_round = registered
        return True

    async def audit_once(self, records: list[registry_pb2.BookieRecord] | None = None) -> int:
        """One full round, through every ledger a listing page at a time;
        returns how many segments it re-replicated. A ledger's missing
        bookies are those it names that are not registered, so each page is
        acted on as it comes: the round holds a page of metadata, not every
        ledger's."""
        if records is None:
            records = await self.bookies.records(registry_pb2.BOOKIE_STATE_ALL)
        registered = {r.bookie_id for r in records}
        if self.changes is not None:
            self.changes.full_round_starts()
        now = time.monotonic()
        missing_since = dict[str, float]()
        cluster = ClusterFigures(
            bookies_writable=sum(1 for r in records if not r.read_only),
            bookies_read_only=sum(1 for r in records if r.read_only),
        )
        under = 0
        repaired = 0
        async for metadata in self._each_ledger():
            named = {b for e in metadata.ensembles for b in e.bookie_ids}
            missing = named - registered
            for bookie in missing:
                missing_since.setdefault(bookie, self.state.missing_since.get(bookie, now))
            lost = {b for b in missing if now - missing_since[b] >= self.settings.lost_bookie_delay_seconds}
            replicas = lost_replicas(metadata, missing)
            marked = [r for r in marked_replicas(metadata) if r.bookie_id not in missing]  # else counted above
            under += len(replicas) + len(marked)
            state = _LEDGER_STATES.get(metadata.state)
            if state is not None:
                cluster.ledgers[state] += 1
            cluster.largest_ensemble = max(cluster.largest_ensemble, metadata.ensemble_size)
            if replicas or marked:
                cluster.under_replicated_ledgers += 1
                cluster.under_replicated_entries += under_replicated_entries(metadata, replicas + marked)
            if self.changes is not None and markers(metadata):
                self.changes.found(_ledger(metadata))
            if metadata.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
                continue
            try:
                for replica in replicas:
                    if replica.bookie_id in lost and metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                        repaired += int(await self._rereplicate(metadata, replica, registered))
                        break  # the metadata changed: the next round sees its new version
                else:
                    if markers(metadata):
                        repaired += await self._repair_marked(metadata, registered)
            except QuireError as exc:
                log.warning("repairing ledger %s: %s", _ledger(metadata), exc)
        cluster.bookies_missing = len(missing_since)
        self.state.missing_since = missing_since
        # Figures as found at the start of the round: what this round repaired
        # shows in the next one (the segments count keeps its older meaning).
        self.state.under_replicated_segments = under - repaired
        self.state.rereplicated_segments += repaired
        self.state.cluster = cluster
        return repaired

    async def repair_marked_ledgers(self, records: list[registry_pb2.BookieRecord]) -> int:
        """Between full rounds: repair the ledgers the watch reports marked,
        each read as it is now, and count them in the cluster's figures.
        Returns how many segments it repaired."""
        assert self.changes is not None
        registered = {r.bookie_id for r in records}
        under = 0
        entries = 0
        ledgers = 0
        repaired = 0
        for ledger_id in sorted(self.changes.ledgers, key=lambda ledger: ledger.value):
            try:
                metadata, _ = await self.metadata_store.get_ledger_metadata(ledger_id)
            except NotFound:
                self.changes.settled(ledger_id)
                continue
            except QuireError as exc:
                log.warning("repairing ledger %s: %s", ledger_id, exc)
                continue
            marked = marked_replicas(metadata)
            if not marked:
                self.changes.settled(ledger_id)
                continue
            under += len(marked)
            ledgers += 1
            entries += under_replicated_entries(metadata, marked)
            if metadata.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
                continue
            try:
                repaired += await self._repair_marked(metadata, registered)
            except QuireError as exc:
                log.warning("repairing ledger %s: %s", ledger_id, exc)
        self.state.under_replicated_segments = under - repaired
        if self.state.cluster is not None:
            self.state.cluster.under_replicated_ledgers = ledgers
            self.state.cluster.under_replicated_entries = entries
        return repaired

    async def _rereplicate(
        self, metadata: common_pb2.LedgerMetadata, replica: LostReplica, registered: set[str]
    ) -> bool:
        ledger_id = _ledger(metadata)
        current, version = await self.metadata_store.get_ledger_metadata(ledger_id)
        ensemble = list(current.ensembles[replica.segment].bookie_ids)
        if ensemble[replica.position] != replica.bookie_id:
            return False  # someone else repaired it
        every_bookie = sorted({b for e in current.ensembles for b in e.bookie_ids} | {replica.bookie_id})
        replacement = await self.remote.replace_bookie(current, ensemble, replica.bookie_id, every_bookie)
        wanted = entries_held(
            current.ensemble_size, current.write_quorum_size, replica.position, replica.first_entry_id,
            replica.last_entry_id,
        )  # fmt: skip
        survivors = [b for b in ensemble if b != replica.bookie_id and b in registered]
        await self._copy(current, wanted, survivors, replacement)

        def name_replacement(latest: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
            # A closed ledger's segment does not change: only another repair moves the lost bookie.
            segment = latest.ensembles[replica.segment].bookie_ids
            if segment[replica.position] != replica.bookie_id:
                return None
            segment[replica.position] = replacement
            return latest

        if not (await update_metadata(self.metadata_store, ledger_id, name_replacement, (current, version))).changed:
            return False  # someone else repaired it meanwhile
        log.info(
            "ledger %s segment %d: %d entries copied from lost bookie %s's replicas to %s",
            ledger_id, replica.segment, len(wanted), replica.bookie_id, replacement,
        )  # fmt: skip
        return True

    async def _repair_marked(self, metadata: common_pb2.LedgerMetadata, registered: set[str]) -> int:
        """Copy what each registered marked bookie may lack (up to the last
        confirmed entry) back to it from the other replicas, then drop its
        marker, or narrow it to what an open ledger has not confirmed yet.
        Markers of bookies the ledger no longer names go too. Returns how
        many segments it repaired."""
        ledger_id = _ledger(metadata)
        current, version = await self.metadata_store.get_ledger_metadata(ledger_id)
        if current.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
            return 0
        confirmed = await self._confirmed(current)
        replicas = repairable_replicas(current, confirmed)
        named = {b for e in current.ensembles for b in e.bookie_ids}
        done: set[str] = set()
        repaired = 0
        for bookie in sorted(markers(current)):
            if bookie in named and bookie not in registered:
                continue  # back later, or lost and replaced
            for replica in (r for r in replicas if r.bookie_id == bookie):
                ensemble = current.ensembles[replica.segment].bookie_ids
                wanted = entries_held(
                    current.ensemble_size, current.write_quorum_size, replica.position, replica.first_entry_id,
                    replica.last_entry_id,
                )  # fmt: skip
                # The marker's range is coarse: some of its entries may be good
                # on this bookie and damaged elsewhere, so its own copy is the
                # source of last resort (written back unchanged).
                sources = [*(b for b in ensemble if b != bookie and b in registered), bookie]
                await self._copy(current, wanted, sources, bookie)
                repaired += 1
                self.state.repaired_entries += len(wanted)
                log.info(
                    "ledger %s segment %d: %d entries bookie %s lacked or held damaged copied back to it",
                    ledger_id, replica.segment, len(wanted), bookie,
                )  # fmt: skip
            done.add(bookie)
        repaired_markers = markers(current)
        kept = {bookie: marker_after_repair(current, bookie, confirmed) for bookie in done}

        def drop_repaired(latest: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
            # Only a marker as it was repaired goes: one widened meanwhile covers entries not copied.
            if latest.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
                return None
            before = common_pb2.LedgerMetadata()
            before.CopyFrom(latest)
            now = markers(latest)
            for bookie, marker in kept.items():
                if now.get(bookie) == repaired_markers.get(bookie):
                    set_marker(latest, bookie, marker)
            return latest if latest != before else None

        await update_metadata(self.metadata_store, ledger_id, drop_repaired, (current, version))
        self.state.repaired_segments += repaired
        return repaired

    async def _copy(
        self, metadata: common_pb2.LedgerMetadata, wanted: list[int], sources: list[str], target: str
    ) -> None:
        """Copy entries `wanted` from digest-checked replicas on `sources` to
        `target` with recovery adds, in batches."""
        ledger_id = _ledger(metadata)
        digester = ledger_digester(metadata)
        for start in range(0, len(wanted), COPY_BATCH_ENTRIES):
            batch = wanted[start : start + COPY_BATCH_ENTRIES]
            copies = await self._read_good(ledger_id, batch, sources, digester)
            await self.remote.add_entries(
                target, ledger_id, ledger_master_key(metadata), sorted(copies.items()), recovery=True
            )

    async def _read_good(
        self, ledger_id: LedgerId, entry_ids: list[int], survivors: list[str], digester: Digester
    ) -> dict[int, bytes]:
        """A digest-checked copy of each entry from some surviving replica."""
        good: dict[int, bytes] = {}
        for bookie in survivors:
            wanted = [e for e in entry_ids if e not in good]
            if not wanted:
                break
            try:
                found, _ = await self.remote.read_entries(bookie, ledger_id, wanted)
            except QuireError:
                continue
            for entry_id, data in found.items():
                try:
                    verified_entry(data, digester, ledger_id, entry_id)
                except QuireError:
                    continue
                good[entry_id] = data
        absent = [e for e in entry_ids if e not in good]
        if absent:
            raise Unavailable(
                f"ledger {ledger_id}: no surviving replica has a good copy of entry {absent[0]}",
                Reason.BOOKIE_UNAVAILABLE,
            )
        return good


def _ledger(metadata: common_pb2.LedgerMetadata) -> LedgerId:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
