"""Which ledger segments are under-replicated: pure functions shared by the
gateway (its auditor and admin API) and QuireAdmin's break-glass route.

A segment is one ensemble of a ledger (entries from its first entry id up to
the next ensemble's first, or the ledger's end). It is under-replicated when
one of its bookies is not registered (writable or read-only), or is being
decommissioned, or when the writer left a failed bookie out without an
ensemble change (delayed ensemble change), or when a reader found its copy of
some entries damaged (digest mismatch, I/O error): then the metadata carries
a marker `quire.under-replicated/<bookie>` = "first" (from that entry to the
end) or "first-last", the entries to copy back to that bookie.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from quire_proto.admin.v1 import admin_pb2
from quire_proto.common.v1 import common_pb2

# Custom metadata key prefix of a delayed ensemble change's marker.
UNDER_REPLICATED_PREFIX = "quire.under-replicated/"


@dataclass(frozen=True)
class LostReplica:
    segment: int  # index into metadata.ensembles
    position: int  # the bookie's position in that ensemble
    bookie_id: str
    first_entry_id: int
    last_entry_id: int  # -1 below first_entry_id: the segment holds no entry


def segment_end(metadata: common_pb2.LedgerMetadata, segment: int) -> int:
    ensembles = metadata.ensembles
    if segment + 1 < len(ensembles):
        return int(ensembles[segment + 1].first_entry_id) - 1
    return int(metadata.last_entry_id)


def lost_replicas(metadata: common_pb2.LedgerMetadata, lost: Collection[str]) -> list[LostReplica]:
    """Every (segment, bookie) of the ledger whose bookie is in `lost`."""
    found = []
    for index, ensemble in enumerate(metadata.ensembles):
        for position, bookie_id in enumerate(ensemble.bookie_ids):
            if bookie_id in lost:
                found.append(
                    LostReplica(index, position, bookie_id, int(ensemble.first_entry_id), segment_end(metadata, index))
                )
    return found


def entries_held(ensemble_size: int, write_quorum: int, position: int, first: int, last: int) -> list[int]:
    """Entry ids of [first, last] whose write set includes `position`
    (entry e goes to positions (e + i) mod E for i < W)."""
    return [e for e in range(first, last + 1) if (position - e) % ensemble_size < write_quorum]


def count_held(ensemble_size: int, write_quorum: int, position: int, first: int, last: int) -> int:
    """len(entries_held(...)) without listing them: a ledger may hold millions."""
    if last < first:
        return 0
    cycles, rest = divmod(last - first + 1, ensemble_size)
    return cycles * write_quorum + sum(
        1 for e in range(first, first + rest) if (position - e) % ensemble_size < write_quorum
    )


def markers(metadata: common_pb2.LedgerMetadata) -> dict[str, tuple[int, int | None]]:
    """bookie -> (first, last) entries it may lack or hold damaged, from the
    ledger's markers; last is None for "to the end". A value that does not
    parse counts as the whole ledger."""
    found: dict[str, tuple[int, int | None]] = {}
    for key, value in metadata.custom_metadata.items():
        if key.startswith(UNDER_REPLICATED_PREFIX):
            found[key[len(UNDER_REPLICATED_PREFIX) :]] = _parse_marker(value)
    return found


def _parse_marker(value: str) -> tuple[int, int | None]:
    first, _, last = value.partition("-")
    try:
        return max(0, int(first)), (int(last) if last else None)
    except ValueError:
        return 0, None


def add_marker(metadata: common_pb2.LedgerMetadata, bookie_id: str, first: int, last: int | None) -> bool:
    """Mark entries first..last (None: to the end) of `bookie_id` for repair,
    merged with its marker if it has one (the marker covers both). Returns
    whether the metadata changed."""
    key = UNDER_REPLICATED_PREFIX + bookie_id
    if key in metadata.custom_metadata:
        old_first, old_last = _parse_marker(metadata.custom_metadata[key])
        first = min(first, old_first)
        last = None if last is None or old_last is None else max(last, old_last)
    value = str(first) if last is None else f"{first}-{last}"
    if metadata.custom_metadata.get(key) == value:
        return False
    metadata.custom_metadata[key] = value
    return True


def marked_replicas(metadata: common_pb2.LedgerMetadata) -> list[LostReplica]:
    """Every (segment, bookie) with marked entries: those a bookie may lack
    after a delayed ensemble change, or whose copy a reader found damaged.
    An open ledger's last segment has no known end yet (last_entry_id -1)."""
    found = []
    for bookie_id, (first, last) in sorted(markers(metadata).items()):
        for replica in lost_replicas(metadata, {bookie_id}):
            start = max(first, replica.first_entry_id)
            end = replica.last_entry_id if last is None else min(last, replica.last_entry_id)
            still_written = (
                metadata.state != common_pb2.LEDGER_STATE_CLOSED and replica.segment == len(metadata.ensembles) - 1
            )
            if start <= end or (still_written and (last is None or start <= last)):
                found.append(LostReplica(replica.segment, replica.position, bookie_id, start, end))
    return found


def repairable_replicas(metadata: common_pb2.LedgerMetadata, confirmed: int) -> list[LostReplica]:
    """The marked replicas clipped to entries known to be confirmed (ids up
    to `confirmed`): what can be copied back now without touching a writer.
    Of an open ledger that is every segment but the last (an ensemble change
    starts at LAC+1) and the last one up to its LAC."""
    found = []
    open_last = len(metadata.ensembles) - 1 if metadata.state != common_pb2.LEDGER_STATE_CLOSED else -1
    for bookie_id, (first, last) in sorted(markers(metadata).items()):
        for replica in lost_replicas(metadata, {bookie_id}):
            segment_last = confirmed if replica.segment == open_last else replica.last_entry_id
            start = max(first, replica.first_entry_id)
            end = min(segment_last, confirmed, segment_last if last is None else last)
            if start <= end:
                found.append(LostReplica(replica.segment, replica.position, bookie_id, start, end))
    return found


def marker_after_repair(
    metadata: common_pb2.LedgerMetadata, bookie_id: str, confirmed: int
) -> tuple[int, int | None] | None:
    """What is left of `bookie_id`'s marker once its repairable replicas up
    to `confirmed` are copied back: None when nothing (a closed ledger, a
    marker ending at or below `confirmed`, or a bookie the ledger no longer
    names in its open last segment), else the entries past `confirmed` it
    still covers."""
    first, last = markers(metadata)[bookie_id]
    still_written = metadata.state != common_pb2.LEDGER_STATE_CLOSED and bookie_id in metadata.ensembles[-1].bookie_ids
    if not still_written or (last is not None and last <= confirmed):
        return None  # every segment naming it is closed, and was copied back up to its end
    return max(first, confirmed + 1), last


def set_marker(metadata: common_pb2.LedgerMetadata, bookie_id: str, kept: tuple[int, int | None] | None) -> None:
    """Replace (or with None remove) `bookie_id`'s marker."""
    key = UNDER_REPLICATED_PREFIX + bookie_id
    if kept is None:
        metadata.custom_metadata.pop(key, None)
    else:
        first, last = kept
        metadata.custom_metadata[key] = str(first) if last is None else f"{first}-{last}"


@dataclass(frozen=True)
class RepairQueue:
    """Every segment waiting for repair, as one pass over the ledgers found it."""

    segments: list[admin_pb2.UnderReplicatedSegment]
    ledgers: int  # ledgers with at least one of them
    missing_bookie_ids: list[str]  # named by a ledger, not registered
    largest_ensemble: int  # of any ledger


def repair_queue(ledgers: Sequence[common_pb2.LedgerMetadata], registered: set[str]) -> RepairQueue:
    """The segments with a replica on a bookie that is not registered
    ("missing") or with entries flagged for repair ("flagged"): the rules of
    quire_api.replication, which the auditor repairs by."""
    segments: list[admin_pb2.UnderReplicatedSegment] = []
    affected = 0
    all_missing: set[str] = set()
    largest = 0
    for metadata in ledgers:
        largest = max(largest, int(metadata.ensemble_size))
        missing = {b for e in metadata.ensembles for b in e.bookie_ids} - registered
        all_missing |= missing
        found = [(r, "missing") for r in lost_replicas(metadata, missing)]
        found += [(r, "flagged") for r in marked_replicas(metadata) if r.bookie_id not in missing]
        affected += bool(found)
        segments.extend(
            admin_pb2.UnderReplicatedSegment(
                ledger_id=metadata.ledger_id,
                state=metadata.state,
                segment=replica.segment,
                first_entry_id=replica.first_entry_id,
                last_entry_id=replica.last_entry_id,
                bookie_id=replica.bookie_id,
                why=why,
            )
            for replica, why in found
        )
    return RepairQueue(segments, affected, sorted(all_missing), largest)
