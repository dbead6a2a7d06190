"""Changing a ledger's metadata: the one read-modify-compare-and-swap loop.

Writers (ensemble changes, close), recoveries (fence, replace, close), the
auditor and readers flagging damaged copies all change the same record; the
registry takes a change only against the version it was computed from. Each
caller says what it wants as a pure update function of the current metadata,
and on a conflict the loop re-reads the record and asks the function again,
with a short backoff and a bound, so a record that keeps changing ends in
ABORTED rather than a loop for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from quire_api.backoff import Backoff
from quire_api.errors import Aborted
from quire_api.ids import LedgerId
from quire_gateway.metadata_store import MetadataStore
from quire_proto.common.v1 import common_pb2

# Compare-and-swaps tried before giving up on a record that keeps changing.
CAS_ATTEMPTS = 10
# A conflict means someone else just wrote: a short pause lets a burst of writers spread out.
_CONFLICT_BACKOFF = Backoff(first_seconds=0.005, longest_seconds=0.5, attempts=CAS_ATTEMPTS - 1)

# Gets its own copy of the current metadata; returns the metadata to store
# (that copy, changed), or None for "nothing to change"; or raises a domain
# error (the ledger was closed, fenced), which ends the update.
Update = Callable[[common_pb2.LedgerMetadata], common_pb2.LedgerMetadata | None]


@dataclass(frozen=True)
class Updated:
    metadata: common_pb2.LedgerMetadata  # as stored now, as far as this update knows
    version: int
    changed: bool  # False: the update function found nothing to change


async def update_metadata(
    store: MetadataStore,
    ledger_id: LedgerId,
    update: Update,
    known: tuple[common_pb2.LedgerMetadata, int] | None = None,
) -> Updated:
    """Apply `update` to the ledger's metadata by compare-and-swap, starting
    from `known` (metadata, version) if given, else from a fresh read.
    Raises Aborted after CAS_ATTEMPTS conflicts, and whatever `update` or the
    store raise."""
    metadata, version = known if known is not None else await store.get_ledger_metadata(ledger_id)
    pauses = _CONFLICT_BACKOFF.pauses()
    while True:
        proposal = common_pb2.LedgerMetadata()
        proposal.CopyFrom(metadata)
        updated = update(proposal)
        if updated is None:
            return Updated(metadata, version, changed=False)
        try:
            return Updated(updated, await store.update_ledger_metadata(ledger_id, updated, version), changed=True)
        except Aborted:
            pause = next(pauses, None)
            if pause is None:
                raise Aborted(
                    f"ledger {ledger_id}: its metadata kept changing ({CAS_ATTEMPTS} conflicting updates); try again"
                ) from None
        await asyncio.sleep(pause)
        metadata, version = await store.get_ledger_metadata(ledger_id)
