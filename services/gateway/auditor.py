"""The auditor: finds ledgers with replicas on lost bookies and re-replicates them.

Every `interval_seconds` it lists the registered bookies and every ledger.
A bookie referenced by a ledger but not registered is *missing*; once it has
been missing for `lost_bookie_delay_seconds` (so a rolling restart causes no
re-replication storm) it is *lost*. For each CLOSED ledger with a segment on
a lost bookie it asks placement for a replacement, copies the entries the
lost bookie held in that segment from surviving replicas (digest checked) to
the replacement with recovery adds, then compare-and-swaps the metadata to
name the replacement.

A closed ledger whose writer left a failed bookie out without an ensemble
change (its metadata carries `quire.under-replicated/<bookie>` markers) is
repaired in place once that bookie is registered again: the entries it may
lack are copied to it from the other replicas, then the marker is removed.
A marked bookie that stays away is lost like any other and replaced.

The rule for open ledgers: they are left alone (counted as under-replicated)
until they are closed, as BookKeeper only re-replicates fragments a writer
can no longer change; the writer's own ensemble change covers its last segment.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from quire.common.v1 import common_pb2
from quire.registry.v1 import registry_pb2
from quire_common.bookies import BookieDirectory
from quire_common.entry import Digester, DigestType, master_key, unpack_entry
from quire_common.errors import QuireError, Reason, Unavailable
from quire_common.ids import LedgerId
from quire_common.replication import (
    UNDER_REPLICATED_PREFIX,
    LostReplica,
    entries_held,
    lost_replicas,
    marked_replicas,
    markers,
)
from quire_gateway import metrics
from quire_gateway.remote import Remote

log = logging.getLogger(__name__)
COPY_BATCH_ENTRIES = 100


@dataclass(frozen=True)
class AuditorSettings:
    interval_seconds: float = 30.0  # 0: no auditor
    lost_bookie_delay_seconds: float = 60.0


@dataclass
class AuditState:
    missing_since: dict[str, float] = field(default_factory=dict)
    under_replicated_segments: int = 0
    rereplicated_segments: int = 0


class Auditor:
    def __init__(self, remote: Remote, bookies: BookieDirectory, settings: AuditorSettings) -> None:
        self.remote = remote
        self.bookies = bookies
        self.settings = settings
        self.state = AuditState()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.interval_seconds)
            try:
                await self.audit_once()
            except QuireError as exc:
                log.warning("audit round failed: %s", exc)

    async def _ledgers(self) -> list[common_pb2.LedgerMetadata]:
        ledgers: list[common_pb2.LedgerMetadata] = []
        token = ""
        while True:
            page, token = await self.remote.list_ledger_metadata(0, 500, token, all_scopes=True)
            ledgers.extend(page)
            if not token:
                return ledgers

    async def audit_once(self) -> int:
        """One round; returns how many segments it re-replicated."""
        registered = {r.bookie_id for r in await self.bookies.records(registry_pb2.BOOKIE_STATE_ALL)}
        ledgers = await self._ledgers()
        referenced = {b for m in ledgers for e in m.ensembles for b in e.bookie_ids}
        now = time.monotonic()
        missing = referenced - registered
        self.state.missing_since = {b: self.state.missing_since.get(b, now) for b in missing}
        lost = {
            b for b, since in self.state.missing_since.items() if now - since >= self.settings.lost_bookie_delay_seconds
        }
        under = 0
        repaired = 0
        for metadata in ledgers:
            replicas = lost_replicas(metadata, missing)
            marked = [r for r in marked_replicas(metadata) if r.bookie_id not in missing]  # else counted above
            under += len(replicas) + len(marked)
            if metadata.state != common_pb2.LEDGER_STATE_CLOSED:
                continue
            try:
                for replica in replicas:
                    if replica.bookie_id in lost:
                        repaired += int(await self._rereplicate(metadata, replica, registered))
                        break  # the metadata changed: the next round sees its new version
                else:
                    if markers(metadata):
                        repaired += await self._repair_marked(metadata, registered)
            except QuireError as exc:
                log.warning("repairing ledger %s: %s", _ledger(metadata), exc)
        self.state.under_replicated_segments = under - repaired
        self.state.rereplicated_segments += repaired
        metrics.under_replicated_segments_now = self.state.under_replicated_segments
        return repaired

    async def _rereplicate(
        self, metadata: common_pb2.LedgerMetadata, replica: LostReplica, registered: set[str]
    ) -> bool:
        ledger_id = _ledger(metadata)
        current, version = await self.remote.get_ledger_metadata(ledger_id)
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
        updated = common_pb2.LedgerMetadata()
        updated.CopyFrom(current)
        del updated.ensembles[replica.segment].bookie_ids[:]
        updated.ensembles[replica.segment].bookie_ids.extend(
            replacement if b == replica.bookie_id else b for b in ensemble
        )
        await self.remote.update_ledger_metadata(ledger_id, updated, version)
        log.info(
            "ledger %s segment %d: %d entries copied from lost bookie %s's replicas to %s",
            ledger_id, replica.segment, len(wanted), replica.bookie_id, replacement,
        )  # fmt: skip
        return True

    async def _repair_marked(self, metadata: common_pb2.LedgerMetadata, registered: set[str]) -> int:
        """Copy what each registered marked bookie may lack back to it, then
        drop its marker, and the markers of bookies the ledger no longer
        names (replaced meanwhile). Returns how many segments it repaired."""
        ledger_id = _ledger(metadata)
        current, version = await self.remote.get_ledger_metadata(ledger_id)
        replicas = marked_replicas(current)
        done = {bookie for bookie in markers(current) if not any(r.bookie_id == bookie for r in replicas)}
        repaired = 0
        for bookie in sorted({r.bookie_id for r in replicas} & registered):
            for replica in (r for r in replicas if r.bookie_id == bookie):
                ensemble = current.ensembles[replica.segment].bookie_ids
                wanted = entries_held(
                    current.ensemble_size, current.write_quorum_size, replica.position, replica.first_entry_id,
                    replica.last_entry_id,
                )  # fmt: skip
                survivors = [b for b in ensemble if b != bookie and b in registered]
                await self._copy(current, wanted, survivors, bookie)
                repaired += 1
                log.info(
                    "ledger %s segment %d: %d entries bookie %s may have missed copied back to it",
                    ledger_id, replica.segment, len(wanted), bookie,
                )  # fmt: skip
            done.add(bookie)
        if not done:
            return 0
        updated = common_pb2.LedgerMetadata()
        updated.CopyFrom(current)
        for bookie in done:
            del updated.custom_metadata[UNDER_REPLICATED_PREFIX + bookie]
        await self.remote.update_ledger_metadata(ledger_id, updated, version)
        return repaired

    async def _copy(
        self, metadata: common_pb2.LedgerMetadata, wanted: list[int], sources: list[str], target: str
    ) -> None:
        """Copy entries `wanted` from digest-checked replicas on `sources` to
        `target` with recovery adds, in batches."""
        ledger_id = _ledger(metadata)
        digester = Digester(metadata.digest_type or DigestType.CRC32C, metadata.password)
        for start in range(0, len(wanted), COPY_BATCH_ENTRIES):
            batch = wanted[start : start + COPY_BATCH_ENTRIES]
            copies = await self._read_good(ledger_id, batch, sources, digester)
            await self.remote.add_entries(
                target, ledger_id, master_key(metadata.password), sorted(copies.items()), recovery=True
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
                    unpack_entry(data, digester)
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
