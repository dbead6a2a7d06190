"""How the scrub packs its questions into bookies' CheckEntries calls, and how the scrub and
the audit pace themselves."""

import pytest

from quire_api.errors import Unavailable
from quire_api.ids import LedgerId
from quire_api.replication import entries_held
from quire_gateway.autorecovery import scrub
from quire_gateway.autorecovery.scrub import (
    CHECK_CHUNK_ENTRIES,
    PassSchedule,
    Scrubber,
    ScrubSettings,
    _Batch,
    _Row,
    _rows,
    held_per_position,
)
from quire_gateway.cluster_calls import ClusterCalls
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.common.v1 import common_pb2


def ledger(ensembles: list[tuple[int, list[str]]], last: int) -> common_pb2.LedgerMetadata:
    metadata = common_pb2.LedgerMetadata(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, last_entry_id=last)
    for first, bookies in ensembles:
        metadata.ensembles.add(first_entry_id=first, bookie_ids=bookies)
    return metadata


def asked_of(metadata: common_pb2.LedgerMetadata, registered: set[str], confirmed: int, verify: range) -> set:
    """Each row as the bookie expands it: (bookie, ids looked for, ids verified)."""
    found = set()
    for bookie, row in _rows(metadata, registered, confirmed, verify):
        held = entries_held(3, 2, row.position, row.first, row.last)
        verified = [e for e in held if row.verifies(e)]
        assert (row.held, row.verified) == (len(held), len(verified))
        found.add((bookie, tuple(e for e in held if not row.verifies(e)), tuple(verified)))
    return found


def test_each_bookie_is_asked_for_what_its_write_sets_give_it_the_sample_verified_on_it():
    metadata = ledger([(0, ["a", "b", "c"]), (6, ["a", "b", "d"])], last=8)
    assert asked_of(metadata, {"a", "b", "c", "d"}, confirmed=8, verify=range(2, 4)) == {
        ("a", (0, 5), (2, 3)),  # entry e goes to positions e, e+1 (mod 3)
        ("b", (0, 1, 4), (3,)),
        ("c", (1, 4, 5), (2,)),
        ("a", (6, 8), ()),
        ("b", (6, 7), ()),
        ("d", (7, 8), ()),
    }


def test_unregistered_bookies_and_entries_past_the_confirmed_one_are_not_asked():
    metadata = ledger([(0, ["a", "b", "c"])], last=-1)
    assert asked_of(metadata, {"a", "b"}, confirmed=1, verify=range(0)) == {("a", (0,), ()), ("b", (0, 1), ())}


def test_a_long_segment_is_asked_a_window_at_a_time():
    metadata = ledger([(0, ["a", "b", "c"])], last=2 * CHECK_CHUNK_ENTRIES + 9)
    windows = [(row.first, row.last) for bookie, row in _rows(metadata, {"a"}, 2 * CHECK_CHUNK_ENTRIES + 9, range(0))]
    assert windows == [
        (0, CHECK_CHUNK_ENTRIES - 1),
        (CHECK_CHUNK_ENTRIES, 2 * CHECK_CHUNK_ENTRIES - 1),
        (2 * CHECK_CHUNK_ENTRIES, 2 * CHECK_CHUNK_ENTRIES + 9),
    ]


def test_held_per_position_counts_what_the_striping_rule_lists():
    for ensemble_size in range(1, 6):
        for write_quorum in range(1, ensemble_size + 1):
            for first in range(0, 7):
                for last in range(first - 2, first + 13):
                    assert held_per_position(ensemble_size, write_quorum, first, last) == [
                        len(entries_held(ensemble_size, write_quorum, position, first, last))
                        for position in range(ensemble_size)
                    ]


def row(span: int) -> _Row:
    return _Row(1, 2, 3, 2, 0, 0, span - 1, 2 * span // 3, 0, -1, 0)


def test_a_batch_takes_rows_spanning_at_most_a_calls_worth_of_ids():
    batch = _Batch()
    assert batch.takes(row(CHECK_CHUNK_ENTRIES - 1))
    batch.add(row(CHECK_CHUNK_ENTRIES - 1))
    assert batch.takes(row(1))
    assert not batch.takes(row(2))  # one id too many
    assert _Batch().takes(row(CHECK_CHUNK_ENTRIES))  # a whole window alone
    assert batch.copies == 2 * (CHECK_CHUNK_ENTRIES - 1) // 3
    stripes = batch.stripes()
    assert (list(stripes.scope_ids), list(stripes.verify_last_ids), list(stripes.write_quorums)) == ([1], [-1], [2])


@pytest.fixture
def asked(monkeypatch) -> list[float]:
    """The delays the scrub's schedule sleeps, recorded instead of slept."""
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(scrub.asyncio, "sleep", sleep)
    return delays


async def test_a_pass_spreads_its_groups_over_nine_tenths_of_its_period(asked):
    schedule = PassSchedule(period_seconds=100.0, ledgers=4_000)
    await schedule.wait_turn(1_000)
    await schedule.wait_turn(4_000)
    assert [round(delay) for delay in asked] == [22, 90]  # 0.9 x 100 s x 1/4, then the whole 90 s
    schedule.started -= 1_000  # a pass the budgets made late does not wait
    await schedule.wait_turn(2_000)
    assert len(asked) == 2


async def test_ledgers_beyond_the_last_count_are_not_paced_past_the_period(asked):
    """The pass after an empty cluster's first expects one ledger; a cluster
    filled since holds thousands, and they are checked within the period
    (paced by i/n alone, the thousandth would have waited 900 periods)."""
    schedule = PassSchedule(period_seconds=100.0, ledgers=0)
    await schedule.wait_turn(1_000)
    await schedule.wait_turn(5_000)
    assert asked and max(asked) <= 90.0, asked


def test_a_quiet_cluster_reads_every_ledger_only_every_tenth_interval():
    from quire_gateway.autorecovery.auditor import (
        QUIET_ROUNDS_BETWEEN_FULL_ROUNDS,
        Auditor,
        AuditorSettings,
        ClusterFigures,
    )
    from quire_proto.registry.v1 import registry_pb2

    auditor = Auditor(None, None, None, AuditorSettings())  # type: ignore[arg-type]
    bookies = [registry_pb2.BookieRecord(bookie_id=f"b{n}:3181") for n in range(3)]
    assert auditor._round_due(bookies)  # the first round
    auditor.state.cluster = ClusterFigures()  # what that round found: nothing to repair
    due = [auditor._round_due(bookies) for _ in range(2 * (QUIET_ROUNDS_BETWEEN_FULL_ROUNDS + 1))]
    assert due == ([False] * QUIET_ROUNDS_BETWEEN_FULL_ROUNDS + [True]) * 2
    assert auditor._round_due(bookies[:2])  # a bookie went away
    assert auditor._round_due([*bookies[:2], registry_pb2.BookieRecord(bookie_id="b2:3181", read_only=True)])
    auditor.state.missing_since = {"b9:3181": 0.0}  # waiting for a missing bookie: every interval
    assert all(auditor._round_due(bookies[:2]) for _ in range(3))
    auditor.state.missing_since = {}
    auditor.state.cluster = ClusterFigures(under_replicated_ledgers=1)  # a marker to repair
    assert all(auditor._round_due(bookies[:2]) for _ in range(3))


class StripedBookies:
    """Bookies as CheckEntries by stripes answers them, for copies listed
    lost or damaged, and the metadata store the scrub marks."""

    def __init__(self, ledgers: list[common_pb2.LedgerMetadata], lost: set, damaged: set) -> None:
        self.metadata = {(m.ledger_id.scope_id, m.ledger_id.ledger_id): m for m in ledgers}
        self.lost, self.damaged = lost, damaged

    async def check_entries(self, bookie: str, stripes: bookie_pb2.EntryStripes) -> bookie_pb2.CheckEntriesResponse:
        response = bookie_pb2.CheckEntriesResponse(rows_checked=len(stripes.scope_ids))
        for row, (_scope, ledger, first, last, size, quorum, position, verify_first, verify_last) in enumerate(
            zip(*(getattr(stripes, name) for name in STRIPE_COLUMNS), strict=True)
        ):
            for entry_id in entries_held(size, quorum, position, first, last):
                copy = (bookie, ledger, entry_id)
                if copy in self.lost:
                    response.missing_rows.append(row)
                    response.missing_entry_ids.append(entry_id)
                elif copy in self.damaged and verify_first <= entry_id <= verify_last:
                    response.damaged_rows.append(row)
                    response.damaged_entry_ids.append(entry_id)
        return response

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        metadata = common_pb2.LedgerMetadata()
        metadata.CopyFrom(self.metadata[(ledger_id.scope_id, ledger_id.ledger_id)])
        return metadata, 1

    async def update_ledger_metadata(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, version: int):
        self.metadata[(ledger_id.scope_id, ledger_id.ledger_id)] = metadata
        return 2


STRIPE_COLUMNS = (
    "scope_ids",
    "ledger_ids",
    "first_entry_ids",
    "last_entry_ids",
    "ensemble_sizes",
    "write_quorums",
    "positions",
    "verify_first_ids",
    "verify_last_ids",
)


async def test_what_bookies_report_by_row_is_flagged_on_its_ledger_and_bookie():
    ledgers = []
    for number, (last, bookies) in enumerate([(0, ["a", "b", "c"]), (0, ["b", "c", "a"]), (20, ["c", "a", "b"])]):
        metadata = ledger([(0, bookies)], last=last)
        metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id = 7, number
        ledgers.append(metadata)
    # Ledger 1's entry 0 went missing on c (its second copy); ledger 2 lost entries 4 and 19 on
    # a, and its copy of entry 2 on c is damaged (within the first pass's sample, 0..15).
    lost = {("c", 1, 0), ("a", 2, 4), ("a", 2, 19)}
    bookies = StripedBookies(ledgers, lost, damaged={("c", 2, 2)})
    settings = ScrubSettings(entries_per_second=1e9, bytes_per_second=1e9)
    scrubber = Scrubber(bookies, bookies, settings)  # type: ignore[arg-type]
    flagged = await scrubber.scrub_ledgers([(m, int(m.last_entry_id)) for m in ledgers], {"a", "b", "c"})
    assert flagged == {LedgerId(7, 1): {"c": (0, 0)}, LedgerId(7, 2): {"a": (4, 19), "c": (2, 2)}}
    assert bookies.metadata[(7, 2)].custom_metadata["quire.under-replicated/a"] == "4-19"
    stats = scrubber.stats
    assert (stats.entries_checked, stats.missing, stats.damaged) == (2 + 2 + 42, 3, 1)
    # Sampled: both copies of each one-entry ledger, entries 0..15 of ledger 2 (32 copies); less
    # the copies missing among them (ledger 1's on c, ledger 2's entry 4 on a).
    assert stats.entries_sampled == 2 + 2 + 32 - 2


async def checked_with(answer: bookie_pb2.CheckEntriesResponse) -> bookie_pb2.CheckEntriesResponse:
    """ClusterCalls.check_entries of two rows, the bookie answering `answer`."""

    async def call(bookie_id: str, method: str, request: bookie_pb2.CheckEntriesRequest, what: str):
        assert method == "CheckEntries" and len(request.stripes.scope_ids) == 2
        return answer

    remote = ClusterCalls.__new__(ClusterCalls)  # only the answer's checks are under test, not the transport
    remote._bookie_call = call  # type: ignore[method-assign]
    return await remote.check_entries("b", bookie_pb2.EntryStripes(scope_ids=[1, 1], ledger_ids=[1, 2]))


async def test_an_answer_that_does_not_cover_the_rows_asked_is_not_taken_for_all_present():
    """A bookie of an earlier release ignores `stripes` and answers no rows:
    that must not read as "nothing missing"."""
    refused = [
        bookie_pb2.CheckEntriesResponse(),  # knows nothing of stripes
        bookie_pb2.CheckEntriesResponse(rows_checked=2, missing_rows=[2], missing_entry_ids=[0]),  # a row not asked
        bookie_pb2.CheckEntriesResponse(rows_checked=2, missing_rows=[0, 1], missing_entry_ids=[0]),
    ]
    for answer in refused:
        with pytest.raises(Unavailable):
            await checked_with(answer)
    answer = bookie_pb2.CheckEntriesResponse(rows_checked=2, missing_rows=[1], missing_entry_ids=[0])
    assert list((await checked_with(answer)).missing_rows) == [1]
