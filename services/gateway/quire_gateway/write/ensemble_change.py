"""Ensemble change: the rules for replacing, or leaving out, a failed bookie.

A write handle (handle.py) drives the change; this module decides:

- `replaceable`: whether a bookie's error calls for a change at all;
- `can_leave_out`: with `delay_ensemble_change`, whether every write set keeps
  A live members without the failed bookie, so writing can carry on without it;
- `record_new_ensemble`: the metadata edit, a new ensemble from LAC+1 (or the
  last one rewritten when it holds no confirmed entry), with the confirmed
  entries the failed bookie never acknowledged marked for the auditor;
- `reassign`: which pending entries go to which replacement.

Pure: no I/O, so the rules are tested without bookies (docs/architecture.md,
"An append, step by step", step 5).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol

from quire_api.errors import FailedPrecondition, QuireError, Reason, ResourceExhausted, Unavailable
from quire_api.replication import add_marker
from quire_proto.common.v1 import common_pb2


def replaceable(error: QuireError) -> bool:
    """Whether a bookie's failure to store entries calls for an ensemble
    change: it is unreachable or timed out, or it refuses adds because it is
    read-only or its disk is full. A fence or a wrong master key is an answer
    about the ledger, not a broken bookie: replacing the bookie would not help
    and must not happen."""
    if isinstance(error, Unavailable):
        return True  # unreachable, timed out, or its storage failed
    if isinstance(error, FailedPrecondition):
        return error.reason == Reason.BOOKIE_READ_ONLY
    if isinstance(error, ResourceExhausted):
        return error.reason == Reason.DISK_FULL
    return False


def can_leave_out(stripes: Iterable[Sequence[str]], left_out: Collection[str], ack_quorum: int) -> bool:
    """Whether every write set (stripe) keeps A members outside `left_out`."""
    return all(sum(b not in left_out for b in stripe) >= ack_quorum for stripe in stripes)


def with_replacements(ensemble: Sequence[str], replacements: Mapping[str, str]) -> list[str]:
    """`ensemble` with each replaced bookie swapped for its replacement, in place."""
    return [replacements.get(b, b) for b in ensemble]


def record_new_ensemble(
    metadata: common_pb2.LedgerMetadata,
    first_entry_id: int,
    ensemble: Sequence[str],
    unacked: tuple[str, int, int] | None,
) -> None:
    """Edit `metadata` so that `ensemble` writes from `first_entry_id` on, and
    mark `unacked` (bookie, first, last) for repair when that range holds entries."""
    if unacked is not None and unacked[1] <= unacked[2]:
        add_marker(metadata, *unacked)
    if metadata.ensembles[-1].first_entry_id == first_entry_id:
        # No entry was confirmed in the last ensemble: replace it rather than stack an empty one.
        del metadata.ensembles[-1].bookie_ids[:]
        metadata.ensembles[-1].bookie_ids.extend(ensemble)
    else:
        metadata.ensembles.append(common_pb2.Ensemble(first_entry_id=first_entry_id, bookie_ids=ensemble))


class PendingEntry(Protocol):
    """What `reassign` needs of an entry still waiting for its ack quorum."""

    write_set: list[str]
    acks: set[str]
    packed: bytes


def reassign(
    pending: Mapping[int, PendingEntry],
    replacements: Mapping[str, str],
    stripes: Sequence[list[str]],
) -> dict[str, list[tuple[int, bytes]]]:
    """Move the pending entries off the replaced bookies: each affected entry
    takes its write set in the new ensemble (`stripes`) and forgets the
    replaced bookies' acks. Returns, per replacement, the (entry id, packed
    entry) pairs to resend to it, in entry order."""
    resend: dict[str, list[tuple[int, bytes]]] = {}
    for entry_id in sorted(pending):
        entry = pending[entry_id]
        if not any(bookie in entry.write_set for bookie in replacements):
            continue
        entry.write_set = stripes[entry_id % len(stripes)]
        for bookie, replacement in replacements.items():
            entry.acks.discard(bookie)
            if replacement in entry.write_set:
                resend.setdefault(replacement, []).append((entry_id, entry.packed))
    return resend
