"""The write handle against a fake ClusterCalls: ensemble change, its metadata
conflicts, and fencing (which must never look like a failed bookie)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest

from quire_api.errors import FailedPrecondition, Reason, ResourceExhausted, Unavailable
from quire_api.ids import LedgerId
from quire_gateway.ledgers import CreateSpec, LedgerOperations
from quire_gateway.quorum_rules import replicas_of, write_set
from quire_gateway.write.handle import ENTRY_BOOKKEEPING_BYTES, WriteHandle, WriteSettings
from quire_proto.common.v1 import common_pb2
from tests.unit.fakes import FakeClusterCalls, new_metadata

LEDGER = LedgerId(1, 2)
FAST = WriteSettings(bookie_retry_seconds=0.0, add_timeout_seconds=1.0)


def handle_on(remote: FakeClusterCalls, ensemble: list[str], write_quorum: int = 2, ack_quorum: int = 2) -> WriteHandle:
    remote.metadata = new_metadata(LEDGER, ensemble, write_quorum, ack_quorum)
    return WriteHandle(remote, remote, LEDGER, remote.metadata, remote.version, FAST)  # type: ignore[arg-type]


async def write(handle: WriteHandle, payloads: list[bytes]) -> list[int]:
    return list(await asyncio.gather(*await handle.submit(payloads)))


@pytest.mark.parametrize("write_quorum", [3, 2])
async def test_entries_submitted_together_reach_each_bookie_in_one_add(write_quorum):
    """A submit of many entries sends each bookie one add holding every entry
    its stripes give it: all of them when W = E, its share when W < E."""
    remote = FakeClusterCalls(["a", "b", "c"])
    handle = handle_on(remote, ["a", "b", "c"], write_quorum=write_quorum)
    ids = await write(handle, [b"p%d" % i for i in range(7)])
    assert ids == list(range(7))
    await asyncio.sleep(0.05)  # the third bookie's answer, after the quorum's
    assert sorted(bookie for method, bookie in remote.calls if method == "add") == ["a", "b", "c"]
    for bookie_id, bookie in remote.bookies.items():
        assert set(bookie.entries) == {e for e in ids if bookie_id in write_set(e, ["a", "b", "c"], write_quorum)}


async def test_a_failed_bookie_is_replaced_and_pending_entries_resent():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    assert await write(handle, [b"x%d" % i for i in range(6)]) == list(range(6))
    remote.bookies["b"].down = True
    assert await write(handle, [b"y%d" % i for i in range(6)]) == list(range(6, 12))
    metadata = remote.metadata
    assert metadata is not None
    assert [list(e.bookie_ids) for e in metadata.ensembles] == [["a", "b", "c"], ["a", "d", "c"]]
    assert metadata.ensembles[1].first_entry_id == 6  # LAC + 1 when b failed
    # Every entry from 6 on is on its whole write set in the new ensemble.
    for entry_id in range(6, 12):
        for bookie in replicas_of(metadata, entry_id):
            assert entry_id in remote.bookies[bookie].entries, (entry_id, bookie)
    assert handle.ensemble_changes == 1


async def test_an_entry_completes_on_the_replacement_of_a_dead_member():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"], write_quorum=3, ack_quorum=3)
    remote.bookies["c"].down = True
    assert await write(handle, [b"one"]) == [0]
    assert 0 in remote.bookies["d"].entries  # acknowledged only once d had it


async def test_a_fence_fails_the_writer_and_changes_no_ensemble():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    await write(handle, [b"before"])
    for bookie in ("a", "b", "c"):
        remote.bookies[bookie].fenced = True
    with pytest.raises(FailedPrecondition) as caught:
        await write(handle, [b"after"])
    assert caught.value.reason == Reason.LEDGER_FENCED
    assert not [c for c in remote.calls if c[0] == "replace"]
    with pytest.raises(FailedPrecondition):
        await handle.submit([b"again"])


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (common_pb2.LEDGER_STATE_IN_RECOVERY, Reason.LEDGER_FENCED),
        (common_pb2.LEDGER_STATE_CLOSED, Reason.LEDGER_CLOSED),
    ],
)
async def test_ensemble_change_meets_a_recovery_or_a_close(state, reason):
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    await write(handle, [b"before"])
    assert remote.metadata is not None
    changed = common_pb2.LedgerMetadata()
    changed.CopyFrom(remote.metadata)
    changed.state = state
    remote.before_update.append(changed)  # someone else's CAS lands first
    remote.bookies["b"].down = True  # entry 1 goes to b and c
    with pytest.raises(FailedPrecondition) as caught:
        await write(handle, [b"after"])
    assert caught.value.reason == reason


async def test_no_bookie_left_fails_unavailable_naming_the_counts():
    remote = FakeClusterCalls(["a", "b", "c"])
    handle = handle_on(remote, ["a", "b", "c"])
    remote.bookies["c"].down = True
    with pytest.raises(Unavailable) as caught:
        await write(handle, [b"x", b"y"])
    assert caught.value.reason == Reason.NOT_ENOUGH_BOOKIES
    assert "needs 1" in caught.value.message and "0 are available" in caught.value.message


async def test_an_ensemble_change_outlasts_a_metadata_store_out_of_reach():
    """The registry or etcd out of reach for a moment (a partition, an
    election) delays the ensemble change; it does not end the writer."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    await write(handle, [b"before"])
    remote.unreachable_updates = 3
    remote.bookies["b"].down = True
    assert await write(handle, [b"x%d" % i for i in range(4)]) == [1, 2, 3, 4]
    assert remote.unreachable_updates == 0 and not handle.failed
    assert remote.metadata is not None
    assert [list(e.bookie_ids) for e in remote.metadata.ensembles] == [["a", "b", "c"], ["a", "d", "c"]]


async def test_an_ensemble_change_whose_answer_was_lost_is_recorded_once():
    """The CAS committed but its answer was lost: the next attempt meets its own
    commit (a version conflict), reads it back, and records nothing twice."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    remote.metadata = new_metadata(LEDGER, ["a", "b", "c"], 3, 2)
    handle = WriteHandle(remote, remote, LEDGER, remote.metadata, remote.version, FAST)  # type: ignore[arg-type]
    await write(handle, [b"before"])
    remote.lost_update_answers = 1
    remote.bookies["b"].down = True
    assert await write(handle, [b"x%d" % i for i in range(4)]) == [1, 2, 3, 4]
    for _ in range(200):  # a and c confirmed the entries; the change may still be on its way
        if handle.ensemble_changes:
            break
        await asyncio.sleep(0.01)
    metadata = remote.metadata
    assert [list(e.bookie_ids) for e in metadata.ensembles] == [["a", "b", "c"], ["a", "d", "c"]]
    assert handle.version == remote.version and not handle.failed  # the handle holds the record as stored


async def test_an_ensemble_change_outlasts_attempts_slower_than_a_session():
    """Each attempt fails only at the registry's etcd deadline, and the outage
    outlasts many such attempts: the change waits for the store, however long,
    and the writer goes on (a time bound once let one slow attempt spend the
    whole session and closed the ledger)."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    await write(handle, [b"before"])
    remote.unreachable_updates, remote.unreachable_update_seconds = 6, 0.3
    remote.bookies["b"].down = True
    assert await write(handle, [b"x%d" % i for i in range(4)]) == [1, 2, 3, 4]
    assert remote.unreachable_updates == 0 and not handle.failed


async def test_a_close_gives_up_a_change_the_store_does_not_answer():
    """A close (a client's, the gateway's on shutdown) does not wait for a
    metadata store that does not answer: the pending entries fail UNAVAILABLE,
    the close does too, and once the store is back a close ends the ledger at
    the last entry acknowledged."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    await write(handle, [b"before"])
    remote.unreachable_updates = 10**6
    remote.bookies["b"].down = True
    pending = await handle.submit([b"x%d" % i for i in range(4)])
    await asyncio.sleep(0.3)  # the change is being tried again
    with pytest.raises(Unavailable):
        await asyncio.wait_for(handle.close(), 10)
    for future in pending:
        with pytest.raises(Unavailable):
            await future
    remote.unreachable_updates = 0
    closed = await handle.close()
    assert closed.state == common_pb2.LEDGER_STATE_CLOSED and closed.last_entry_id == 0


async def test_a_metadata_store_out_of_reach_past_a_retry_bound_ends_the_writer():
    """The control: with a bound on retrying and no time left in it, the same
    outage fails the writer UNAVAILABLE."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    remote.metadata = new_metadata(LEDGER, ["a", "b", "c"], 2, 2)
    no_retry = dataclasses.replace(FAST, metadata_retry_seconds=0.0)
    handle = WriteHandle(remote, remote, LEDGER, remote.metadata, remote.version, no_retry)  # type: ignore[arg-type]
    await write(handle, [b"before"])
    remote.unreachable_updates = 1
    remote.bookies["b"].down = True
    with pytest.raises(Unavailable) as caught:
        await write(handle, [b"x%d" % i for i in range(4)])
    assert caught.value.reason == Reason.METADATA_STORE_UNAVAILABLE and handle.failed


async def test_a_writer_that_cannot_go_on_closes_its_ledger_at_its_lac():
    """No bookie can replace a failed one: the writer fails, then closes the
    ledger at the last entry it acknowledged (tried again while the metadata
    store is out of reach), and says the ledger has ended."""
    remote = FakeClusterCalls(["a", "b", "c"])
    remote.metadata = new_metadata(LEDGER, ["a", "b", "c"], 2, 2)
    ended: list[WriteHandle] = []
    handle = WriteHandle(
        remote,
        remote,
        LEDGER,
        remote.metadata,
        remote.version,
        FAST,
        on_ended=ended.append,  # type: ignore[arg-type]
    )
    assert await write(handle, [b"x%d" % i for i in range(3)]) == [0, 1, 2]
    remote.unreachable_updates = 2
    remote.bookies["c"].down = True
    with pytest.raises(Unavailable):
        await write(handle, [b"y%d" % i for i in range(3)])
    for _ in range(500):
        if ended:
            break
        await asyncio.sleep(0.01)
    assert ended == [handle] and remote.unreachable_updates == 0
    # Entry 3 went to a and b and was confirmed; 4 and 5 needed c.
    assert handle.last_add_confirmed == 3
    assert remote.metadata.state == common_pb2.LEDGER_STATE_CLOSED and remote.metadata.last_entry_id == 3
    with pytest.raises(Unavailable):  # the writer's own failure, as before
        await handle.submit([b"z"])


async def ledger_with_two_entries(remote: FakeClusterCalls) -> LedgerOperations:
    ledgers = LedgerOperations(remote, settings=FAST)  # type: ignore[arg-type]
    await ledgers.create(CreateSpec(3, 3, 2, password=b"pw", exact_id=LEDGER))
    assert await asyncio.gather(*await ledgers.append(LEDGER, [b"x", b"y"], None)) == [0, 1]
    return ledgers


async def test_a_close_the_metadata_store_missed_is_finished_by_asking_again():
    """A client's CloseLedger that fails UNAVAILABLE (the end not recorded) and
    is asked again closes the ledger at its LAC: the writer's handle stays
    until the end is recorded. Before, the handle went with the first attempt
    and the retry was refused as a ledger open on another writer."""
    remote = FakeClusterCalls(["a", "b", "c"])
    ledgers = await ledger_with_two_entries(remote)
    remote.unreachable_updates = 1
    with pytest.raises(Unavailable):
        await ledgers.close(LEDGER)
    with pytest.raises(FailedPrecondition) as caught:
        await ledgers.append(LEDGER, [b"z"], None)  # the writer took nothing more meanwhile
    assert caught.value.reason == Reason.LEDGER_CLOSED
    closed = await ledgers.close(LEDGER)
    assert closed.state == common_pb2.LEDGER_STATE_CLOSED and closed.last_entry_id == 1
    assert LEDGER not in ledgers.handles
    assert await ledgers.close(LEDGER) == closed  # and again: closing twice is fine


async def test_a_close_the_metadata_store_missed_is_finished_without_asking_again():
    """The caller does not ask again (gone, or its deadline passed): the
    gateway records the end in the background, then forgets the handle."""
    remote = FakeClusterCalls(["a", "b", "c"])
    ledgers = await ledger_with_two_entries(remote)
    remote.unreachable_updates = 2
    with pytest.raises(Unavailable):
        await ledgers.close(LEDGER)
    for _ in range(1000):
        if LEDGER not in ledgers.handles:
            break
        await asyncio.sleep(0.01)
    assert LEDGER not in ledgers.handles and remote.unreachable_updates == 0
    assert remote.metadata is not None
    assert remote.metadata.state == common_pb2.LEDGER_STATE_CLOSED and remote.metadata.last_entry_id == 1


async def test_a_bookie_replaced_earlier_is_avoided_while_another_is_left():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d", "e"])
    handle = handle_on(remote, ["a", "b", "c"])
    remote.bookies["b"].down = True
    await write(handle, [b"x%d" % i for i in range(3)])
    remote.bookies["b"].down = False  # back, but it failed once
    remote.bookies["d"].down = True
    await write(handle, [b"y%d" % i for i in range(3)])
    assert remote.metadata is not None
    assert list(remote.metadata.ensembles[-1].bookie_ids) == ["a", "e", "c"]


async def test_a_bookie_replaced_earlier_is_taken_back_when_nothing_else_is_left():
    # Four bookies, E = 3: b times out once and d replaces it; then d fails
    # too, and b (healthy again) is the only bookie outside the ensemble.
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    remote.bookies["b"].down = True
    await write(handle, [b"x%d" % i for i in range(3)])
    remote.bookies["b"].down = False
    remote.bookies["d"].down = True
    assert await write(handle, [b"y%d" % i for i in range(3)]) == [3, 4, 5]
    assert remote.metadata is not None
    assert [list(e.bookie_ids) for e in remote.metadata.ensembles][-1] == ["a", "b", "c"]
    assert handle.ensemble_changes == 2


def slow_handle(max_inflight_bytes: int, max_waiting_bytes: int = 0) -> WriteHandle:
    """A handle on two bookies that answer each add 50 ms late, with these bounds."""
    remote = FakeClusterCalls(["a", "b"])
    remote.metadata = new_metadata(LEDGER, ["a", "b"], 2, 2)
    settings = WriteSettings(
        max_inflight_bytes=max_inflight_bytes, max_waiting_bytes=max_waiting_bytes, bookie_retry_seconds=0.0
    )
    for bookie in remote.bookies.values():
        bookie.delay_seconds = 0.05
    return WriteHandle(remote, remote, LEDGER, remote.metadata, remote.version, settings)  # type: ignore[arg-type]


async def test_in_flight_bytes_are_bounded():
    handle = slow_handle(max_inflight_bytes=4096)
    first = await handle.submit([b"x" * 3000])
    assert handle.submit_now([b"y" * 3000]) is None  # no room: nothing submitted, the caller is to wait
    second = asyncio.ensure_future(handle.submit([b"y" * 3000]))
    await asyncio.sleep(0.01)
    assert not second.done()  # waits for room
    await asyncio.gather(*first)
    assert await asyncio.gather(*await second) == [1]
    third = handle.submit_now([b"z" * 3000])  # room again: submitted at once
    assert third is not None and await asyncio.gather(*third) == [2]


async def test_tiny_entries_in_flight_count_what_each_holds_besides_its_bytes():
    """An entry in flight holds a record, a future and more besides its bytes:
    the bound counts ENTRY_BOOKKEEPING_BYTES for each, so 4 KiB of one-byte
    entries are a handful in flight, not the 89 their packed bytes alone let
    in."""
    handle = slow_handle(max_inflight_bytes=4096)
    admitted = []
    while (futures := handle.submit_now([b"x"])) is not None:
        admitted += futures
    assert 1 <= len(admitted) <= 4096 // ENTRY_BOOKKEEPING_BYTES
    assert await asyncio.gather(*admitted) == list(range(len(admitted)))
    assert handle.submit_now([b"x"]) is not None  # room again once they are confirmed


async def test_a_close_waits_for_the_entries_in_flight_and_ends_the_ledger_after_them():
    """Entries still in flight when a close comes are confirmed first, and the
    ledger ends at the last of them; two closes at once both see that end."""
    remote = FakeClusterCalls(["a", "b", "c"])
    handle = handle_on(remote, ["a", "b", "c"])
    for bookie in remote.bookies.values():
        bookie.delay_seconds = 0.05
    pending = await handle.submit([b"x%d" % i for i in range(3)])
    closes = [asyncio.ensure_future(handle.close()) for _ in range(2)]
    await asyncio.sleep(0.01)
    assert not any(close.done() for close in closes)  # the entries are still on their way
    ended = await asyncio.wait_for(asyncio.gather(*closes), 10)
    assert await asyncio.gather(*pending) == [0, 1, 2]
    assert [metadata.last_entry_id for metadata in ended] == [2, 2]


async def test_adds_beyond_the_waiting_cap_are_refused_at_once():
    handle = slow_handle(max_inflight_bytes=4096, max_waiting_bytes=4096)
    first = await handle.submit([b"x" * 3000])
    waiting = asyncio.ensure_future(handle.submit([b"y" * 3000]))  # waits: nothing else is waiting
    await asyncio.sleep(0.01)
    with pytest.raises(ResourceExhausted) as refused:
        await handle.submit([b"z" * 3000])  # 2 x 3 KB would wait: over the cap
    assert refused.value.reason == Reason.OVERLOADED and refused.value.retryable
    await asyncio.gather(*first)
    assert await asyncio.gather(*await waiting) == [1]
    assert await asyncio.gather(*await handle.submit([b"w" * 3000])) == [2]  # room again


def test_which_bookie_errors_call_for_a_replacement():
    from quire_api.errors import PermissionDenied, ResourceExhausted
    from quire_gateway.write.ensemble_change import replaceable

    assert replaceable(Unavailable("down", Reason.BOOKIE_UNAVAILABLE))
    assert replaceable(FailedPrecondition("read-only", Reason.BOOKIE_READ_ONLY))
    assert replaceable(ResourceExhausted("full", Reason.DISK_FULL))
    assert not replaceable(FailedPrecondition("fenced", Reason.LEDGER_FENCED))
    assert not replaceable(PermissionDenied("wrong key", Reason.WRONG_PASSWORD))
    assert not replaceable(ResourceExhausted("too big", Reason.ENTRY_TOO_LARGE))


async def test_an_unexpected_error_in_a_send_replaces_the_bookie_instead_of_hanging():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])
    original = remote.send_entries

    def broken_on_b(bookie_id, *args, **kwargs):  # type: ignore[no-untyped-def]
        if bookie_id == "b":
            raise TypeError("a bug in the send path")
        original(bookie_id, *args, **kwargs)

    remote.send_entries = broken_on_b  # type: ignore[method-assign]
    assert await asyncio.wait_for(write(handle, [b"x%d" % i for i in range(6)]), timeout=5) == list(range(6))
    assert handle.ensemble_changes == 1


async def test_with_no_bookie_to_replace_it_a_member_the_write_sets_can_spare_is_left_out():
    """E=3 W=3 A=2 and no spare bookie (registrations lapsed in a partition,
    say): the failed member is left out and marked, as a delayed ensemble
    change would, instead of failing the ledger."""
    remote = FakeClusterCalls(["a", "b", "c"])
    handle = handle_on(remote, ["a", "b", "c"], write_quorum=3, ack_quorum=2)
    assert await write(handle, [b"x%d" % i for i in range(3)]) == [0, 1, 2]
    remote.bookies["c"].down = True
    assert await write(handle, [b"y%d" % i for i in range(4)]) == list(range(3, 7))
    metadata = remote.metadata
    assert metadata is not None and len(metadata.ensembles) == 1 and handle.ensemble_changes == 0
    assert dict(metadata.custom_metadata) == {"quire.under-replicated/c": "3"}
    assert not handle.failed


async def test_with_placement_out_of_reach_a_member_the_write_sets_can_spare_is_left_out():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"], write_quorum=3, ack_quorum=2)

    async def placement_away(metadata, ensemble, failed, exclude):  # type: ignore[no-untyped-def]
        raise Unavailable("choosing a bookie to replace it: Deadline Exceeded")

    remote.replace_bookie = placement_away  # type: ignore[method-assign]
    await write(handle, [b"x"])
    remote.bookies["c"].down = True
    assert await write(handle, [b"y%d" % i for i in range(4)]) == list(range(1, 5))
    assert len(remote.metadata.ensembles) == 1 and not handle.failed
    assert dict(remote.metadata.custom_metadata) == {"quire.under-replicated/c": "1"}


DELAYED = WriteSettings(bookie_retry_seconds=0.0, add_timeout_seconds=1.0, delay_ensemble_change=True)


def delayed_handle_on(remote: FakeClusterCalls, ensemble: list[str], write_quorum: int, ack_quorum: int) -> WriteHandle:
    remote.metadata = new_metadata(LEDGER, ensemble, write_quorum, ack_quorum)
    return WriteHandle(remote, remote, LEDGER, remote.metadata, remote.version, DELAYED)  # type: ignore[arg-type]


async def test_a_delayed_change_writes_on_without_the_bookie_and_marks_the_ledger():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d", "e"])
    handle = delayed_handle_on(remote, ["a", "b", "c"], write_quorum=3, ack_quorum=2)
    assert await write(handle, [b"x%d" % i for i in range(3)]) == [0, 1, 2]
    remote.bookies["c"].down = True
    assert await write(handle, [b"y%d" % i for i in range(6)]) == list(range(3, 9))
    metadata = remote.metadata
    assert metadata is not None and len(metadata.ensembles) == 1 and handle.ensemble_changes == 0
    assert dict(metadata.custom_metadata) == {"quire.under-replicated/c": "3"}
    calls_to_c = sum(1 for method, bookie in remote.calls if (method, bookie) == ("add", "c"))
    assert await write(handle, [b"z"]) == [9]
    assert sum(1 for method, bookie in remote.calls if (method, bookie) == ("add", "c")) == calls_to_c  # left out

    # A second failure would leave write sets with one live member: now both are replaced.
    remote.bookies["b"].down = True
    assert await write(handle, [b"w%d" % i for i in range(3)]) == [10, 11, 12]
    metadata = remote.metadata
    assert [list(e.bookie_ids) for e in metadata.ensembles] == [["a", "b", "c"], ["a", "d", "e"]]
    assert metadata.ensembles[1].first_entry_id == 10 and handle.ensemble_changes == 2
    assert dict(metadata.custom_metadata) == {"quire.under-replicated/c": "3"}  # the auditor's to repair


async def test_entries_confirmed_without_a_replaced_bookie_are_marked_for_it():
    """E=3 W=3 A=2: entries go on being confirmed by two bookies while the
    third fails; the ensemble change that replaces it marks those entries, so
    the auditor restores the third copy (the write alone would leave them at
    two copies for good)."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"], write_quorum=3, ack_quorum=2)
    assert await write(handle, [b"x%d" % i for i in range(3)]) == [0, 1, 2]
    remote.bookies["b"].down = True
    assert await write(handle, [b"y%d" % i for i in range(5)]) == list(range(3, 8))
    metadata = remote.metadata
    assert metadata is not None and handle.ensemble_changes == 1
    first_new = metadata.ensembles[1].first_entry_id
    assert first_new > 3  # a and c confirmed some entries before the change
    assert dict(metadata.custom_metadata) == {"quire.under-replicated/b": f"3-{first_new - 1}"}
    assert not {3, 4} & set(remote.bookies["b"].entries)


async def test_without_the_marks_a_replaced_bookie_leaves_nothing_to_repair():
    """The control: mark_replaced_copies off, the same failure leaves no trace."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    remote.metadata = new_metadata(LEDGER, ["a", "b", "c"], 3, 2)
    unmarked = WriteSettings(bookie_retry_seconds=0.0, add_timeout_seconds=1.0, mark_replaced_copies=False)
    handle = WriteHandle(remote, remote, LEDGER, remote.metadata, remote.version, unmarked)  # type: ignore[arg-type]
    await write(handle, [b"x"])
    remote.bookies["b"].down = True
    await write(handle, [b"y%d" % i for i in range(5)])
    assert handle.ensemble_changes == 1 and not remote.metadata.custom_metadata


async def test_no_delay_when_a_write_set_would_fall_below_the_ack_quorum():
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = delayed_handle_on(remote, ["a", "b", "c"], write_quorum=2, ack_quorum=2)
    remote.bookies["b"].down = True
    assert await write(handle, [b"x%d" % i for i in range(3)]) == [0, 1, 2]
    metadata = remote.metadata
    assert metadata is not None and handle.ensemble_changes == 1 and not metadata.custom_metadata


async def test_a_ledger_fenced_by_a_recovery_elsewhere_fails_its_writer_with_a_warning_not_an_error(caplog):
    """A recovery elsewhere is what a fault is expected to do to a writer: the
    handle fails LEDGER_FENCED and says so at WARNING, not ERROR."""
    remote = FakeClusterCalls(["a", "b", "c"])
    handle = handle_on(remote, ["a", "b", "c"])
    for bookie in remote.bookies.values():
        bookie.fenced = True
    with caplog.at_level(logging.WARNING, logger="quire_gateway.write.handle"):
        with pytest.raises(FailedPrecondition):
            await asyncio.wait_for(write(handle, [b"x"]), timeout=5)
    failed = [r for r in caplog.records if "write handle failed" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.WARNING]


async def test_a_ledger_whose_bookies_and_placement_are_out_of_reach_fails_with_a_warning_not_an_error(caplog):
    """A gateway cut off from its bookies and from placement (a partition) fails
    the writes it cannot place, UNAVAILABLE, at WARNING: what the fault does."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"])

    async def placement_away(metadata, ensemble, failed, exclude):  # type: ignore[no-untyped-def]
        raise Unavailable("choosing a bookie to replace it: Deadline Exceeded")

    remote.replace_bookie = placement_away  # type: ignore[method-assign]
    remote.bookies["c"].down = True
    with caplog.at_level(logging.WARNING, logger="quire_gateway.write.handle"):
        with pytest.raises(Unavailable):
            await write(handle, [b"x%d" % i for i in range(3)])
    failed = [r for r in caplog.records if "write handle failed" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.WARNING]


async def test_the_marker_starts_at_the_first_failed_add_when_a_later_failure_finds_the_replacement():
    """E=3 W=3 A=2, two adds to c in flight when c fails. The first
    failure's change finds no replacement yet (registrations lapsed, say);
    the second's, queued behind it, finds one. The marker must still start
    at the first add's entry: a and b confirmed it without c (CI: PART-5
    left a batch of 20 entries at two copies this way)."""
    remote = FakeClusterCalls(["a", "b", "c"], spare=["d"])
    handle = handle_on(remote, ["a", "b", "c"], write_quorum=3, ack_quorum=2)
    assert await write(handle, [b"x"]) == [0]
    choose = remote.replace_bookie
    refusals = 1

    async def none_at_first(metadata, ensemble, failed, exclude):  # type: ignore[no-untyped-def]
        nonlocal refusals
        if refusals:
            refusals -= 1
            await asyncio.sleep(0.01)  # the second failure's change queues behind this one meanwhile
            raise Unavailable("not enough bookies: needs 1, 0 are available", Reason.NOT_ENOUGH_BOOKIES)
        return await choose(metadata, ensemble, failed, exclude)

    remote.replace_bookie = none_at_first  # type: ignore[method-assign]
    remote.bookies["c"].down = True
    first_add, second_add = await handle.submit([b"y"]), await handle.submit([b"z"])
    assert list(await asyncio.gather(*first_add, *second_add)) == [1, 2]  # by a and b, before the change
    for _ in range(500):  # until the second change has replaced c (a few loop turns; 5 s at most)
        if handle.ensemble_changes:
            break
        await asyncio.sleep(0.01)
    metadata = remote.metadata
    assert [list(e.bookie_ids) for e in metadata.ensembles][-1] == ["a", "b", "d"]
    marker = dict(metadata.custom_metadata)["quire.under-replicated/c"]
    assert marker.split("-")[0] == "1", marker
