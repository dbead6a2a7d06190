"""Which ledger segments are under-replicated: pure functions shared by the
gateway's auditor and `quire recovery status`.

A segment is one ensemble of a ledger (entries from its first entry id up to
the next ensemble's first, or the ledger's end). It is under-replicated when
one of its bookies is not registered (writable or read-only), or is being
decommissioned, or when the writer left a failed bookie out without an
ensemble change (delayed ensemble change): then the metadata carries a marker
`quire.under-replicated/<bookie>` = the first entry the bookie may lack.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from quire.common.v1 import common_pb2

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


def markers(metadata: common_pb2.LedgerMetadata) -> dict[str, int]:
    """bookie -> first entry it may lack, from the ledger's delayed-change
    markers. A marker whose value does not parse counts from entry 0."""
    found = {}
    for key, value in metadata.custom_metadata.items():
        if key.startswith(UNDER_REPLICATED_PREFIX):
            try:
                found[key[len(UNDER_REPLICATED_PREFIX) :]] = max(0, int(value))
            except ValueError:
                found[key[len(UNDER_REPLICATED_PREFIX) :]] = 0
    return found


def marked_replicas(metadata: common_pb2.LedgerMetadata) -> list[LostReplica]:
    """Every (segment, bookie) that may lack entries after a delayed ensemble
    change: the segments naming a marked bookie, from the marker's entry on.
    An open ledger's last segment has no known end yet (last_entry_id -1)."""
    found = []
    for bookie_id, first in markers(metadata).items():
        for replica in lost_replicas(metadata, {bookie_id}):
            start = max(first, replica.first_entry_id)
            still_written = (
                metadata.state != common_pb2.LEDGER_STATE_CLOSED and replica.segment == len(metadata.ensembles) - 1
            )
            if start <= replica.last_entry_id or still_written:
                found.append(LostReplica(replica.segment, replica.position, bookie_id, start, replica.last_entry_id))
    return found
