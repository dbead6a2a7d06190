"""Which ledger segments are under-replicated: pure functions shared by the
gateway's auditor and `quire recovery status`.

A segment is one ensemble of a ledger (entries from its first entry id up to
the next ensemble's first, or the ledger's end). It is under-replicated when
one of its bookies is not registered (writable or read-only), or is being
decommissioned.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from quire.common.v1 import common_pb2


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
