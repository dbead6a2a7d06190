"""What the auditor learns from the ledger metadata watch between full
rounds: the ledgers that may carry repair markers, so that it repairs a
marker a writer, reader or scrub sets within an interval without reading
every ledger's metadata, and the largest ensemble of a ledger written since
(what the cluster's `largest_ensemble` figure needs).

Every gateway's metadata cache already receives every ledger's changes
(metadata_cache.py); a PUT with markers adds its ledger here, a PUT without
them or a DELETED takes it out. A full round of the auditor adds the marked
ledgers it reads (one whose repair failed stays until it succeeds). The set
may hold a ledger that is no longer marked (a listing read before the change
that dropped the marker): whoever uses it reads the ledger's current record
and calls `settled` when it carries none.

The set is only complete while the watch has delivered every change since the
auditor's last full round: an epoch of the feed (a stretch with no gap). A new
epoch means markers may have been set unseen, and the next round reads every
ledger again. Domain code: no grpc here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from quire_api.ids import LedgerId
from quire_api.replication import markers
from quire_gateway.metadata_store import ChangeKind, MetadataChange


class ChangeFeed(Protocol):
    """The ledger metadata watch as the cache follows it."""

    epoch: int  # changes since the start of an epoch were all delivered

    def follow(self, follower: Callable[[MetadataChange], None]) -> None: ...


class LedgerChanges:
    def __init__(self, feed: ChangeFeed) -> None:
        self._feed = feed
        self.ledgers: set[LedgerId] = set()  # may carry markers
        self.largest_ensemble = 0  # of any ledger the watch reported since the last full round started
        self._complete_since: int | None = None  # the feed's epoch at the last full round's start
        feed.follow(self.apply)

    def apply(self, change: MetadataChange) -> None:
        if change.ledger_id is None:
            return
        metadata = change.metadata
        if change.kind is ChangeKind.PUT and metadata is not None:
            self.largest_ensemble = max(self.largest_ensemble, metadata.ensemble_size)
        if change.kind is ChangeKind.PUT and metadata is not None and markers(metadata):
            self.ledgers.add(change.ledger_id)
        else:  # unmarked, deleted, or no longer parses (the full round reports it)
            self.ledgers.discard(change.ledger_id)

    def full_round_starts(self) -> None:
        """A full round is about to list every ledger: what it finds marked,
        with every change the feed delivers from now on, makes the set whole."""
        self._complete_since = self._feed.epoch
        self.largest_ensemble = 0

    def found(self, ledger_id: LedgerId) -> None:
        """A full round read this ledger with markers."""
        self.ledgers.add(ledger_id)

    def settled(self, ledger_id: LedgerId) -> None:
        """This ledger's current record carries no marker (or it is gone)."""
        self.ledgers.discard(ledger_id)

    def complete(self) -> bool:
        """Whether no marker can have been set unseen since the last full round."""
        return self._complete_since is not None and self._complete_since == self._feed.epoch

    def forget(self) -> None:
        """This gateway no longer holds the auditor role: the next holder starts with a full round."""
        self.ledgers.clear()
        self.largest_ensemble = 0
        self._complete_since = None
