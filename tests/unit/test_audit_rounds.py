"""The auditor's rounds: a full round reads the listing a page at a time and
acts as it goes; between full rounds, the ledgers the metadata watch reports
marked are repaired one by one, and a gap in the watch calls for a full round."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from quire_api.errors import NotFound
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_api.replication import add_marker
from quire_gateway.autorecovery import auditor as auditor_module
from quire_gateway.autorecovery.auditor import (
    QUIET_ROUNDS_BETWEEN_FULL_ROUNDS_FOLLOWED,
    Auditor,
    AuditorSettings,
)
from quire_gateway.autorecovery.ledger_changes import LedgerChanges
from quire_gateway.metadata_store import ChangeKind, MetadataChange
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2

BOOKIES = [registry_pb2.BookieRecord(bookie_id=f"b{n}:3181") for n in range(3)]


class Feed:
    """The metadata watch as the cache follows it."""

    def __init__(self) -> None:
        self.epoch = 1
        self.followers: list[Callable[[MetadataChange], None]] = []

    def follow(self, follower: Callable[[MetadataChange], None]) -> None:
        self.followers.append(follower)

    def put(self, metadata: common_pb2.LedgerMetadata) -> None:
        change = MetadataChange(ChangeKind.PUT, 10, ledger_of(metadata), metadata)
        for follower in self.followers:
            follower(change)

    def delete(self, ledger_id: LedgerId) -> None:
        for follower in self.followers:
            follower(MetadataChange(ChangeKind.DELETED, 11, ledger_id))


def ledger_of(metadata: common_pb2.LedgerMetadata) -> LedgerId:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def closed_ledger(number: int, bookies: list[str], marked: str | None = None) -> common_pb2.LedgerMetadata:
    metadata = common_pb2.LedgerMetadata(
        ledger_id=ledger_id_to_proto(LedgerId(0, number)),
        ensemble_size=3,
        write_quorum_size=3,
        ack_quorum_size=2,
        state=common_pb2.LEDGER_STATE_CLOSED,
        last_entry_id=9,
    )
    metadata.ensembles.add(first_entry_id=0, bookie_ids=bookies)
    if marked is not None:
        add_marker(metadata, marked, 0, 9)
    return metadata


class Listing:
    """The registry's ledgers, listed `page` at a time, and read one by one."""

    def __init__(self, ledgers: list[common_pb2.LedgerMetadata], page: int) -> None:
        self.ledgers = {ledger_of(m): m for m in ledgers}
        self.page = page
        self.pages_listed = 0
        self.limits: set[int] = set()  # page sizes asked for
        self.reads: list[LedgerId] = []

    async def list_ledger_metadata(
        self, scope: int, limit: int, token: str, *, all_scopes: bool
    ) -> tuple[list[common_pb2.LedgerMetadata], str]:
        start = int(token or 0)
        ordered = sorted(self.ledgers.values(), key=lambda m: m.ledger_id.ledger_id)
        self.pages_listed += 1
        self.limits.add(limit)
        end = start + min(limit, self.page)
        return ordered[start:end], (str(end) if end < len(ordered) else "")

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        self.reads.append(ledger_id)
        if ledger_id not in self.ledgers:
            raise NotFound(f"ledger {ledger_id}")
        return self.ledgers[ledger_id], 1


def auditor_with(listing: Listing, feed: Feed | None, repaired: list[LedgerId]) -> Auditor:
    changes = LedgerChanges(feed) if feed is not None else None
    auditor = Auditor(listing, listing, None, AuditorSettings(), changes=changes)  # type: ignore[arg-type]

    async def repair(metadata: common_pb2.LedgerMetadata, registered: set[str]) -> int:
        repaired.append(ledger_of(metadata))
        return 1

    auditor._repair_marked = repair  # type: ignore[method-assign]
    return auditor


def test_the_watch_keeps_the_marked_ledgers_and_the_largest_ensemble():
    feed = Feed()
    changes = LedgerChanges(feed)
    assert not changes.complete()  # no full round yet
    changes.full_round_starts()
    assert changes.complete()
    feed.put(closed_ledger(1, ["b0:3181", "b1:3181", "b2:3181"], marked="b1:3181"))
    feed.put(closed_ledger(2, ["b0:3181", "b1:3181", "b2:3181"], marked="b2:3181"))
    assert changes.ledgers == {LedgerId(0, 1), LedgerId(0, 2)}
    assert changes.largest_ensemble == 3
    feed.put(closed_ledger(1, ["b0:3181", "b1:3181", "b2:3181"]))  # repaired: the marker went
    feed.delete(LedgerId(0, 2))
    assert changes.ledgers == set()
    feed.epoch += 1  # the watch began again from now: changes may have been missed
    assert not changes.complete()


async def test_a_full_round_acts_a_page_at_a_time_and_counts_what_it_saw(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(auditor_module, "LISTING_PAGE", 2)
    ledgers = [closed_ledger(n, ["b0:3181", "b1:3181", "b2:3181"]) for n in range(5)]
    ledgers[3] = closed_ledger(3, ["b0:3181", "b1:3181", "b2:3181"], marked="b1:3181")
    ledgers.append(closed_ledger(5, ["b0:3181", "b1:3181", "gone:3181"]))
    listing = Listing(ledgers, page=100)
    feed = Feed()
    repaired: list[LedgerId] = []
    auditor = auditor_with(listing, feed, repaired)
    await auditor.audit_once(BOOKIES)
    assert listing.pages_listed == 3 and listing.limits == {2}  # six ledgers, two a page
    assert repaired == [LedgerId(0, 3)]
    assert auditor.changes is not None and auditor.changes.ledgers == {LedgerId(0, 3)}
    assert auditor.changes.complete()
    assert set(auditor.state.missing_since) == {"gone:3181"}
    cluster = auditor.state.cluster
    assert cluster is not None
    assert cluster.ledgers["closed"] == 6
    assert cluster.bookies_missing == 1
    assert cluster.under_replicated_ledgers == 2  # the marked one and the one on the missing bookie


async def test_between_full_rounds_only_the_marked_ledgers_are_read_and_repaired():
    ledgers = [closed_ledger(n, ["b0:3181", "b1:3181", "b2:3181"]) for n in range(4)]
    listing = Listing(ledgers, page=100)
    feed = Feed()
    repaired: list[LedgerId] = []
    auditor = auditor_with(listing, feed, repaired)
    assert auditor._round_due(BOOKIES)
    await auditor.audit_once(BOOKIES)
    assert repaired == []
    # A writer marks ledger 2; ledger 3 is reported marked, but its record no longer is by the time
    # the auditor reads it; ledger 7 was deleted since.
    marked_two = closed_ledger(2, ["b0:3181", "b1:3181", "b2:3181"], marked="b0:3181")
    listing.ledgers[LedgerId(0, 2)] = marked_two
    feed.put(marked_two)
    feed.put(closed_ledger(3, ["b0:3181", "b1:3181", "b2:3181"], marked="b0:3181"))
    feed.put(closed_ledger(7, ["b0:3181", "b1:3181", "b2:3181"], marked="b0:3181"))
    assert not auditor._round_due(BOOKIES)  # no full round: the watch told us what changed
    listed = listing.pages_listed
    await auditor.repair_marked_ledgers(BOOKIES)
    assert listing.pages_listed == listed
    assert sorted(listing.reads, key=lambda ledger: ledger.value) == [LedgerId(0, 2), LedgerId(0, 3), LedgerId(0, 7)]
    assert repaired == [LedgerId(0, 2)]
    assert auditor.changes is not None and auditor.changes.ledgers == {LedgerId(0, 2)}  # gone once the watch says so
    assert auditor.state.cluster is not None and auditor.state.cluster.under_replicated_ledgers == 1
    wide = closed_ledger(8, ["b0:3181", "b1:3181", "b2:3181"])
    wide.ensemble_size = 5  # as if: a ledger created with a larger ensemble than any before
    feed.put(wide)
    auditor._raise_largest_ensemble()
    assert auditor.state.cluster.largest_ensemble == 5


def test_a_followed_cluster_reads_every_ledger_only_when_the_watch_may_have_missed_a_change():
    feed = Feed()
    auditor = auditor_with(Listing([], page=100), feed, [])
    assert auditor._round_due(BOOKIES)  # the first round
    assert auditor.changes is not None
    auditor.changes.full_round_starts()
    auditor.state.cluster = auditor_module.ClusterFigures(under_replicated_ledgers=3)  # markers, followed
    due = [auditor._round_due(BOOKIES) for _ in range(QUIET_ROUNDS_BETWEEN_FULL_ROUNDS_FOLLOWED + 1)]
    assert due == [False] * QUIET_ROUNDS_BETWEEN_FULL_ROUNDS_FOLLOWED + [True]  # the safety net
    auditor.changes.full_round_starts()
    assert not auditor._round_due(BOOKIES)
    feed.epoch += 1  # a gap in the watch
    assert auditor._round_due(BOOKIES)
    auditor.changes.full_round_starts()
    assert not auditor._round_due(BOOKIES)
    assert auditor._round_due(BOOKIES[:2])  # a bookie went away


def test_without_the_watch_a_marker_calls_for_a_full_round_every_interval():
    auditor = auditor_with(Listing([], page=100), None, [])
    assert auditor._round_due(BOOKIES)
    auditor.state.cluster = auditor_module.ClusterFigures(under_replicated_ledgers=1)
    assert all(auditor._round_due(BOOKIES) for _ in range(3))
