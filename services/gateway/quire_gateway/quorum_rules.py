"""The quorum rules of the client protocol (docs/architecture.md,
"An append, step by step" and "A recovery open"), as pure
functions: striping, which ensemble covers an entry, the coverage rule and
the "missing" rule of recovery. Everything else in the gateway asks these."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from quire_proto.common.v1 import common_pb2


def write_set(entry_id: int, ensemble: Sequence[str], write_quorum: int) -> list[str]:
    """The bookies that store entry `entry_id`: members (e + i) mod E for i in 0..W-1."""
    size = len(ensemble)
    return [ensemble[(entry_id + i) % size] for i in range(write_quorum)]


def ensemble_of(metadata: common_pb2.LedgerMetadata, entry_id: int) -> list[str]:
    """The ensemble covering `entry_id`: the last one starting at or before it."""
    ensemble = metadata.ensembles[0]
    for candidate in metadata.ensembles:
        if candidate.first_entry_id <= entry_id:
            ensemble = candidate
    return list(ensemble.bookie_ids)


def replicas_of(metadata: common_pb2.LedgerMetadata, entry_id: int) -> list[str]:
    """The write set of `entry_id` in the ensemble covering it."""
    return write_set(entry_id, ensemble_of(metadata, entry_id), metadata.write_quorum_size)


def covered(ensemble_size: int, write_quorum: int, ack_quorum: int, answered: Collection[int]) -> bool:
    """The coverage rule: the bookies (by position) that answered cover the
    ensemble when every window of W consecutive positions has fewer than A
    positions that did not answer. Then no entry can have been acknowledged
    by A bookies none of which answered, so the highest LAC among the answers
    is at least every LAC a writer could have reached, and (after fencing) no
    write set can still gather A acknowledgements from unfenced bookies."""
    for start in range(ensemble_size):
        unknown = sum(1 for i in range(write_quorum) if (start + i) % ensemble_size not in answered)
        if unknown >= ack_quorum:
            return False
    return True


def entry_missing(write_quorum: int, ack_quorum: int, not_found: int) -> bool:
    """An entry is missing once W-A+1 bookies of its write set say they do not
    have it: then at most A-1 can have it, so it was never acknowledged."""
    return not_found >= write_quorum - ack_quorum + 1
