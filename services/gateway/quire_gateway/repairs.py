"""Flagging copies for repair: adding `quire.under-replicated/<bookie>`
markers to a ledger's metadata, shared by readers that find a damaged copy
and by the auditor's scrub."""

from __future__ import annotations

from quire_api.ids import LedgerId
from quire_api.replication import add_marker
from quire_gateway.metadata_store import MetadataStore
from quire_gateway.metadata_updates import update_metadata
from quire_proto.common.v1 import common_pb2


async def mark_for_repair(store: MetadataStore, ledger_id: LedgerId, flagged: dict[str, tuple[int, int]]) -> int:
    """Mark entries first..last of each bookie in `flagged` for repair;
    returns how many markers changed (0: all were marked already). Raises
    Aborted when the metadata kept changing underneath, and whatever reading
    or writing the metadata raised."""
    changed = 0

    def flag(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
        nonlocal changed
        changed = sum(add_marker(metadata, bookie, first, last) for bookie, (first, last) in flagged.items())
        return metadata if changed else None

    result = await update_metadata(store, ledger_id, flag)
    return changed if result.changed else 0
