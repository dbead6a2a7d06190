"""Flagging copies for repair: the one compare-and-swap loop that adds
`quire.under-replicated/<bookie>` markers to a ledger's metadata, shared by
readers that find a damaged copy and by the auditor's scrub."""

from __future__ import annotations

from quire.common.v1 import common_pb2
from quire_api.errors import Aborted
from quire_api.ids import LedgerId
from quire_api.replication import add_marker
from quire_gateway.remote import Remote

# Conflicts with writers, recoveries and other flaggers before giving up.
CAS_ATTEMPTS = 10


async def mark_for_repair(remote: Remote, ledger_id: LedgerId, flagged: dict[str, tuple[int, int]]) -> int:
    """Mark entries first..last of each bookie in `flagged` for repair;
    returns how many markers changed (0: all were marked already). Raises
    Aborted when the metadata kept changing underneath, and whatever reading
    or writing the metadata raised."""
    for _ in range(CAS_ATTEMPTS):
        current, version = await remote.get_ledger_metadata(ledger_id)
        updated = common_pb2.LedgerMetadata()
        updated.CopyFrom(current)
        changed = sum(add_marker(updated, bookie, first, last) for bookie, (first, last) in flagged.items())
        if not changed:
            return 0
        try:
            await remote.update_ledger_metadata(ledger_id, updated, version)
        except Aborted:
            continue
        return changed
    raise Aborted(f"ledger {ledger_id}: its metadata kept changing while copies were flagged for repair")
