"""How the scrub packs its questions into bookies' CheckEntries calls, and how the scrub and
the audit pace themselves."""

from quire.common.v1 import common_pb2
from quire_api.ids import LedgerId
from quire_gateway.autorecovery import scrub
from quire_gateway.autorecovery.scrub import CHECK_CHUNK_ENTRIES, PassSchedule, _Asked, _Batch, _questions


def ledger(ensembles: list[tuple[int, list[str]]], last: int) -> common_pb2.LedgerMetadata:
    metadata = common_pb2.LedgerMetadata(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, last_entry_id=last)
    for first, bookies in ensembles:
        metadata.ensembles.add(first_entry_id=first, bookie_ids=bookies)
    return metadata


def test_each_bookie_is_asked_for_what_its_write_sets_give_it_the_sample_verified_on_it():
    metadata = ledger([(0, ["a", "b", "c"]), (6, ["a", "b", "d"])], last=8)
    asked = list(_questions(metadata, LedgerId(1, 2), {"a", "b", "c", "d"}, confirmed=8, verify=range(2, 4)))
    by_bookie = {(bookie, tuple(a.entry_ids), tuple(a.verify_entry_ids)) for bookie, a in asked}
    assert by_bookie == {
        ("a", (0, 5), (2, 3)),  # entry e goes to positions e, e+1 (mod 3)
        ("b", (0, 1, 4), (3,)),
        ("c", (1, 4, 5), (2,)),
        ("a", (6, 8), ()),
        ("b", (6, 7), ()),
        ("d", (7, 8), ()),
    }


def test_unregistered_bookies_and_entries_past_the_confirmed_one_are_not_asked():
    metadata = ledger([(0, ["a", "b", "c"])], last=-1)
    asked = list(_questions(metadata, LedgerId(1, 2), {"a", "b"}, confirmed=1, verify=range(0)))
    assert {(bookie, tuple(a.entry_ids)) for bookie, a in asked} == {("a", (0,)), ("b", (0, 1))}


def test_a_batch_takes_each_ledger_once_and_at_most_a_calls_worth_of_ids():
    batch = _Batch()
    big = _Asked(LedgerId(1, 1), list(range(CHECK_CHUNK_ENTRIES - 1)), [])
    assert batch.takes(big)
    batch.add(big)
    assert batch.takes(_Asked(LedgerId(1, 2), [0], []))
    assert not batch.takes(_Asked(LedgerId(1, 2), [0], [1]))  # one id too many
    assert not batch.takes(_Asked(LedgerId(1, 1), [0], []))  # that ledger is in it already
    assert _Batch().takes(_Asked(LedgerId(1, 3), list(range(CHECK_CHUNK_ENTRIES + 5)), []))  # alone, whatever its size


async def test_a_pass_spreads_its_groups_over_nine_tenths_of_its_period(monkeypatch):
    asked: list[float] = []

    async def sleep(delay: float) -> None:
        asked.append(delay)

    monkeypatch.setattr(scrub.asyncio, "sleep", sleep)
    schedule = PassSchedule(period_seconds=100.0, ledgers=4_000)
    await schedule.wait_turn(1_000)
    await schedule.wait_turn(4_000)
    assert [round(delay) for delay in asked] == [22, 90]  # 0.9 x 100 s x 1/4, then the whole 90 s
    schedule.started -= 1_000  # a pass the budgets made late does not wait
    await schedule.wait_turn(2_000)
    assert len(asked) == 2


def test_a_quiet_cluster_reads_every_ledger_only_every_tenth_interval():
    from quire.registry.v1 import registry_pb2
    from quire_gateway.autorecovery.auditor import (
        QUIET_ROUNDS_BETWEEN_FULL_ROUNDS,
        Auditor,
        AuditorSettings,
        ClusterFigures,
    )

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
