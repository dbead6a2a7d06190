"""Bookie calls whose answers are no longer needed (a slower replica's read
once the entries have copies, a speculative read beaten by another replica)
are left to end by their deadlines, never cancelled: grpcio leaks the native
buffers of a response that is on its way when its call is cancelled, and a
long soak saw the gateway grow by about half a megabyte per recovered ledger."""

from __future__ import annotations

import asyncio
import gc

from quire_api.errors import DataLoss, Reason
from quire_common.tasks import let_finish
from quire_gateway.ledgers import LedgerOperations
from quire_gateway.read.replicas import EntryReader, ReadSettings
from quire_gateway.recovery import RecoverySettings
from quire_proto.common.v1 import common_pb2
from tests.unit.fakes import FakeClusterCalls
from tests.unit.test_reads_and_recovery import LEDGER, stored_ledger


class WatchedReads(FakeClusterCalls):
    """Counts the reads that ended and those cancelled on the way."""

    def __init__(self, bookies: list[str]) -> None:
        super().__init__(bookies)
        self.reads_ended = self.reads_cancelled = 0

    async def read_entries(self, bookie_id, ledger_id, entry_ids, timeout_seconds=None):  # type: ignore[no-untyped-def]
        try:
            return await super().read_entries(bookie_id, ledger_id, entry_ids, timeout_seconds)
        except asyncio.CancelledError:
            self.reads_cancelled += 1
            raise
        finally:
            self.reads_ended += 1


def watched(entries: int) -> WatchedReads:
    """A ledger on a, b, c (every entry on all three), b slow to answer."""
    stored = stored_ledger(["a", "b", "c"], 3, 2, entries)
    remote = WatchedReads(["a", "b", "c"])
    remote.metadata, remote.bookies = stored.metadata, stored.bookies
    remote.bookies["b"].delay_seconds = 0.3
    return remote


async def all_reads_ended(remote: WatchedReads) -> None:
    started = sum(1 for method, _ in remote.calls if method == "read")
    for _ in range(600):  # generous: the slow replica's calls end by their delay
        if remote.reads_ended == started:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{started - remote.reads_ended} reads still running")


async def test_recovery_leaves_the_slower_replicas_reads_to_finish():
    remote = watched(64 * 3)
    for bookie in remote.bookies.values():
        bookie.lac = -1  # recovery reads every batch
    quire = LedgerOperations(
        remote,  # type: ignore[arg-type]
        recovery_settings=RecoverySettings(timeout_seconds=60, bookie_timeout_seconds=30),
    )
    metadata, lac = await quire.open(LEDGER, b"pw", recovery=True)
    assert lac == 64 * 3 - 1 and metadata.state == common_pb2.LEDGER_STATE_CLOSED
    await all_reads_ended(remote)
    assert remote.reads_cancelled == 0


async def test_a_speculative_read_beaten_by_another_replica_is_left_to_finish():
    remote = watched(10)
    reader = EntryReader(
        remote,  # type: ignore[arg-type]
        LEDGER,
        remote.metadata,  # type: ignore[arg-type]
        ReadSettings(speculative_delay_seconds=0.01),
    )
    chunks = [chunk async for chunk in reader.read(0, 9)]
    assert [entry.entry_id for chunk in chunks for entry in chunk] == list(range(10))
    await all_reads_ended(remote)
    assert remote.reads_cancelled == 0


class UnreadableCopies(WatchedReads):
    """Bookie a, slow to answer, then says its storage could not read its copies."""

    async def read_entries(self, bookie_id, ledger_id, entry_ids, timeout_seconds=None):  # type: ignore[no-untyped-def]
        found = await super().read_entries(bookie_id, ledger_id, entry_ids, timeout_seconds)
        if bookie_id == "a":
            raise DataLoss(f"bookie a: cannot read entries {entry_ids}", Reason.DIGEST_MISMATCH)
        return found


async def test_a_late_answer_that_copies_cannot_be_read_still_flags_them_for_repair():
    stored = watched(10)
    remote = UnreadableCopies(["a", "b", "c"])
    remote.metadata, remote.bookies = stored.metadata, stored.bookies
    remote.bookies["b"].delay_seconds = 0
    remote.bookies["a"].delay_seconds = 0.3
    flagged: list[dict[str, tuple[int, int]]] = []
    reader = EntryReader(
        remote,  # type: ignore[arg-type]
        LEDGER,
        remote.metadata,  # type: ignore[arg-type]
        ReadSettings(speculative_delay_seconds=0.01),
        flag_damaged=flagged.append,
    )
    chunks = [chunk async for chunk in reader.read(0, 9)]
    reader.finish()
    assert [entry.entry_id for chunk in chunks for entry in chunk] == list(range(10))
    assert flagged == []  # served from b and c before a answered
    await all_reads_ended(remote)
    asked_of_a = [entry_id for entry_id in range(10) if entry_id % 3 == 0]  # a leads their write sets
    assert flagged == [{"a": (min(asked_of_a), max(asked_of_a))}]


async def test_let_finish_keeps_a_finished_calls_failure_out_of_the_log(caplog):
    async def fails() -> None:
        raise RuntimeError("the call failed after nobody needed it")

    call = asyncio.ensure_future(fails())
    let_finish([call])
    await asyncio.wait([call])
    del call
    gc.collect()
    assert "never retrieved" not in caplog.text
