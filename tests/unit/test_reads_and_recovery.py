"""Read rules, speculative reads and recovery against a fake ClusterCalls."""

from __future__ import annotations

import asyncio
import time

import pytest

from quire_api.errors import InvalidArgument, NotFound, OutOfRange, PermissionDenied, Unavailable
from quire_api.ids import LedgerId
from quire_common.entry import Digester, DigestType, pack_entry
from quire_gateway.ledgers import LedgerOperations
from quire_gateway.metadata_store import RegistryMetadata
from quire_gateway.quorum_rules import replicas_of
from quire_gateway.read import ledger_reads
from quire_gateway.read.entry_cache import EntryCache, incarnation
from quire_gateway.read.replicas import ReadSettings
from quire_gateway.recovery import RecoverySettings
from quire_proto.common.v1 import common_pb2
from tests.unit.fakes import FakeClusterCalls, new_metadata

LEDGER = LedgerId(3, 4)

# A replica this slow counts as hung: a test that finishes in half this time did not
# wait for it, however busy the machine.
HUNG_SECONDS = 30.0


def stored_ledger(ensemble: list[str], write_quorum: int, ack_quorum: int, entries: int) -> FakeClusterCalls:
    """A ledger whose writer wrote `entries` entries one at a time, then vanished."""
    remote = FakeClusterCalls(ensemble)
    remote.metadata = new_metadata(LEDGER, ensemble, write_quorum, ack_quorum)
    remote.metadata.ledger_id.CopyFrom(common_pb2.LedgerId(scope_id=LEDGER.scope_id, ledger_id=LEDGER.ledger_id))
    digester = Digester(DigestType.CRC32C, b"pw")
    length = 0
    for entry_id in range(entries):
        payload = b"e%d" % entry_id
        length += len(payload)
        packed = pack_entry(LEDGER, entry_id, entry_id - 1, length, payload, digester)
        for bookie in replicas_of(remote.metadata, entry_id):
            remote.bookies[bookie].entries[entry_id] = packed
            remote.bookies[bookie].lac = max(remote.bookies[bookie].lac, entry_id - 1)
    return remote


def ledger_operations(remote: FakeClusterCalls, recovery_timeout_seconds: float = 5, **read: float) -> LedgerOperations:
    return LedgerOperations(
        remote,  # type: ignore[arg-type]
        recovery_settings=RecoverySettings(timeout_seconds=recovery_timeout_seconds, bookie_timeout_seconds=0.2),
        read_settings=ReadSettings(**read),
    )


async def collect(ledgers: LedgerOperations, first: int, last: int, confirmed: bool) -> list[int]:
    return [e.entry_id async for chunk in ledgers.reads.read(LEDGER, first, last, confirmed=confirmed) for e in chunk]


async def test_confirmed_reads_stop_at_the_readers_lac_without_asking_a_bookie():
    remote = stored_ledger(["a", "b", "c"], 2, 2, 5)
    quire = ledger_operations(remote)
    assert (await quire.open(LEDGER, b"pw", recovery=False))[1] == 3
    assert await collect(quire, 0, 3, True) == [0, 1, 2, 3]
    remote.calls.clear()
    with pytest.raises(OutOfRange):
        await collect(quire, 0, 4, True)
    assert not remote.calls
    # The writer goes on elsewhere: entry 5 carries LAC 4. Readers see it once they refresh.
    digester = Digester(DigestType.CRC32C, b"pw")
    packed = pack_entry(LEDGER, 5, 4, 999, b"e5", digester)
    for bookie in replicas_of(remote.metadata, 5):  # type: ignore[arg-type]
        remote.bookies[bookie].entries[5] = packed
        remote.bookies[bookie].lac = 4
    with pytest.raises(OutOfRange):
        await collect(quire, 0, 4, True)
    assert await quire.reads.last_add_confirmed(LEDGER) == 4
    assert await collect(quire, 0, 4, True) == [0, 1, 2, 3, 4]
    for first, last in ((-1, 2), (3, 2)):
        for confirmed in (True, False):
            remote.calls.clear()
            with pytest.raises(InvalidArgument):
                await collect(quire, first, last, confirmed)
            assert not remote.calls


async def test_a_read_past_an_old_readers_lac_asks_the_bookies_again(monkeypatch):
    """With several gateways the writer is usually elsewhere: once what this
    gateway remembers is older than READER_LAC_MAX_AGE_SECONDS, a read past it
    learns the LAC again instead of answering OUT_OF_RANGE."""
    remote = stored_ledger(["a", "b", "c"], 2, 2, 5)
    quire = ledger_operations(remote)
    assert await collect(quire, 0, 3, True) == [0, 1, 2, 3]
    digester = Digester(DigestType.CRC32C, b"pw")
    packed = pack_entry(LEDGER, 5, 4, 999, b"e5", digester)
    for bookie in replicas_of(remote.metadata, 5):  # type: ignore[arg-type]
        remote.bookies[bookie].entries[5] = packed
        remote.bookies[bookie].lac = 4
    with pytest.raises(OutOfRange):
        await collect(quire, 0, 4, True)  # remembered a moment ago: the answer stands
    monkeypatch.setattr(ledger_reads, "READER_LAC_MAX_AGE_SECONDS", 0.0)
    assert await collect(quire, 0, 4, True) == [0, 1, 2, 3, 4]


async def test_read_entry_follows_the_confirmed_read_rules():
    """ReadEntry is ReadEntries with first = last: the entry up to the readers'
    LAC, OUT_OF_RANGE past it without asking a bookie, INVALID_ARGUMENT for a
    negative id, NOT_FOUND for a ledger that does not exist."""
    remote = stored_ledger(["a", "b", "c"], 2, 2, 5)
    quire = ledger_operations(remote)
    assert (await quire.open(LEDGER, b"pw", recovery=False))[1] == 3
    entry = await quire.reads.read_entry(LEDGER, 2)
    assert (entry.entry_id, entry.payload, entry.length) == (2, b"e2", len(b"e0e1e2"))
    remote.calls.clear()
    with pytest.raises(OutOfRange) as beyond:
        await quire.reads.read_entry(LEDGER, 4)
    assert beyond.value.reason == "ERROR_REASON_READ_BEYOND_LAC"
    assert beyond.value.metadata == {"last_add_confirmed": "3"}
    assert not [c for c in remote.calls if c[0] == "read"]
    with pytest.raises(InvalidArgument, match="entry_id -1 is negative"):
        await quire.reads.read_entry(LEDGER, -1)
    with pytest.raises(NotFound):
        await ledger_operations(FakeClusterCalls(["a", "b", "c"])).reads.read_entry(LEDGER, 0)  # no such ledger


class TrustedMetadata(RegistryMetadata):
    """The metadata cache's part in a read answered at once: the registry's
    record, trusted while `trusted` says so."""

    def __init__(self, remote: FakeClusterCalls) -> None:
        super().__init__(remote)  # type: ignore[arg-type]
        self.remote = remote
        self.trusted = True

    def cached_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int] | None:
        metadata = self.remote.metadata
        return (metadata, 1) if self.trusted and metadata is not None else None


async def test_an_entry_is_answered_at_once_only_where_read_entry_would_answer_it_without_asking():
    """entry_at_hand (ReadEntryStream's answers without a task): a cached
    entry at or below the LAC known here, from trusted metadata; None for
    anything read_entry would have to ask about, and then no miss is counted."""
    remote = stored_ledger(["a", "b", "c"], 2, 2, 5)
    metadata = TrustedMetadata(remote)
    cache = EntryCache(1 << 20)
    quire = LedgerOperations(
        remote,  # type: ignore[arg-type]
        metadata_store=metadata,
        entry_cache=cache,
        recovery_settings=RecoverySettings(timeout_seconds=5, bookie_timeout_seconds=0.2),
    )
    assert quire.reads.entry_at_hand(LEDGER, 2) is None  # no LAC known yet: read_entry asks the bookies
    assert (await quire.open(LEDGER, b"pw", recovery=False))[1] == 3
    assert quire.reads.entry_at_hand(LEDGER, 2) is None  # not cached yet
    assert cache.stats.misses == 0
    read = await quire.reads.read_entry(LEDGER, 2)  # from the bookies, then kept
    remote.calls.clear()
    at_hand = quire.reads.entry_at_hand(LEDGER, 2)
    assert at_hand is not None
    assert (at_hand.entry_id, at_hand.payload, at_hand.length) == (read.entry_id, read.payload, read.length)
    assert await collect(quire, 2, 2, True) == [2]  # ReadEntries of that one entry too, asking no bookie
    assert not remote.calls
    life = incarnation(remote.metadata)  # type: ignore[arg-type]
    cache.put(LEDGER, life, 4, b"e4", 99)  # cached, but past the LAC known here
    assert quire.reads.entry_at_hand(LEDGER, 4) is None
    assert quire.reads.entry_at_hand(LEDGER, -1) is None
    metadata.trusted = False  # the metadata cache would ask the registry
    assert quire.reads.entry_at_hand(LEDGER, 2) is None
    assert not remote.calls


async def test_unconfirmed_reads_go_past_the_lac_and_change_nothing():
    remote = stored_ledger(["a", "b", "c"], 2, 2, 5)
    quire = ledger_operations(remote)
    assert await collect(quire, 0, 4, False) == [0, 1, 2, 3, 4]
    with pytest.raises(NotFound):
        await collect(quire, 3, 5, False)
    assert not [c for c in remote.calls if c[0] in ("fence", "add")]
    assert (await quire.open(LEDGER, b"pw", recovery=False))[1] == 3


async def test_a_slow_replica_gets_the_next_one_asked():
    remote = stored_ledger(["a", "b", "c"], 3, 2, 3)
    quire = ledger_operations(remote, speculative_delay_seconds=0.05)
    remote.bookies["a"].delay_seconds = remote.bookies["b"].delay_seconds = HUNG_SECONDS
    started = time.monotonic()
    assert await collect(quire, 0, 2, False) == [0, 1, 2]
    assert time.monotonic() - started < HUNG_SECONDS / 2  # answered without waiting for a hung replica


async def test_recovery_with_a_hung_bookie_finds_the_end():
    remote = stored_ledger(["a", "b", "c"], 3, 2, 10)
    remote.bookies["b"].delay_seconds = HUNG_SECONDS
    quire = ledger_operations(remote)
    started = time.monotonic()
    metadata, lac = await quire.open(LEDGER, b"pw", recovery=True)
    assert lac == 9 and metadata.state == common_pb2.LEDGER_STATE_CLOSED
    assert metadata.length == sum(len(b"e%d" % i) for i in range(10))
    assert time.monotonic() - started < HUNG_SECONDS / 2  # it did not wait for the hung bookie


async def test_recovery_re_adds_an_entry_found_on_one_replica_only():
    remote = stored_ledger(["a", "b", "c"], 3, 2, 4)
    # Entry 4 reached one bookie before the writer died: not acknowledged, but found.
    digester = Digester(DigestType.CRC32C, b"pw")
    length = sum(len(b"e%d" % i) for i in range(5))
    remote.bookies["c"].entries[4] = pack_entry(LEDGER, 4, 3, length, b"e4", digester)
    metadata, lac = await ledger_operations(remote).open(LEDGER, b"pw", recovery=True)
    assert lac == 4 and metadata.length == length
    assert all(4 in remote.bookies[b].entries for b in ("a", "b", "c"))


async def test_recovery_needs_coverage():
    remote = stored_ledger(["a", "b", "c"], 3, 2, 3)
    remote.bookies["a"].down = remote.bookies["b"].down = True
    with pytest.raises(Exception) as caught:
        await ledger_operations(remote, recovery_timeout_seconds=0.5).open(LEDGER, b"pw", recovery=True)
    assert getattr(caught.value, "code", None) == "UNAVAILABLE"
    assert "too few to cover" in str(caught.value)  # the cause survives the timeout
    assert remote.metadata is not None and remote.metadata.state == common_pb2.LEDGER_STATE_IN_RECOVERY


async def test_wrong_password_fences_nothing():
    remote = stored_ledger(["a", "b", "c"], 2, 2, 3)
    with pytest.raises(PermissionDenied):
        await ledger_operations(remote).open(LEDGER, b"nope", recovery=True)
    assert not remote.calls
    assert remote.metadata is not None and remote.metadata.state == common_pb2.LEDGER_STATE_OPEN


async def test_concurrent_recoveries_report_one_end():
    remote = stored_ledger(["a", "b", "c"], 3, 2, 20)
    results = await asyncio.gather(*(ledger_operations(remote).open(LEDGER, b"pw", recovery=True) for _ in range(5)))
    assert {lac for _, lac in results} == {19}


async def test_recovery_rides_out_a_bookie_that_comes_back():
    remote = stored_ledger(["a", "b", "c"], 3, 2, 5)
    remote.bookies["a"].down = remote.bookies["b"].down = True  # no coverage for now

    async def bring_back() -> None:
        await asyncio.sleep(0.3)
        remote.bookies["a"].down = False

    back = asyncio.ensure_future(bring_back())
    metadata, lac = await ledger_operations(remote).open(LEDGER, b"pw", recovery=True)
    await back
    assert lac == 4 and metadata.state == common_pb2.LEDGER_STATE_CLOSED


async def test_recovery_reads_do_not_wait_for_a_slow_replica_every_round():
    # NET-5: one replica behind a slow link, and the bookies' LAC far behind the end (the
    # writer pipelined every entry before any was confirmed): recovery reads and re-adds
    # many batches. Each batch is decided (read) and acknowledged by A = 2 (added) by the two
    # fast replicas; the slow one's timeout must not be paid once per batch.
    remote = stored_ledger(["a", "b", "c"], 3, 2, 64 * 10)
    for bookie in remote.bookies.values():
        bookie.lac = -1
    remote.bookies["b"].delay_seconds = HUNG_SECONDS
    quire = LedgerOperations(
        remote,  # type: ignore[arg-type]
        recovery_settings=RecoverySettings(timeout_seconds=20, bookie_timeout_seconds=0.5),
    )
    started = time.monotonic()
    metadata, lac = await quire.open(LEDGER, b"pw", recovery=True)
    assert lac == 639 and metadata.state == common_pb2.LEDGER_STATE_CLOSED
    assert time.monotonic() - started < HUNG_SECONDS / 2, time.monotonic() - started


class FakeLease:
    """The reading gateway's registry lease, as far as reads ask it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def is_me(self, owner: common_pb2.LedgerOwner) -> bool:
        return owner.gateway == self.name

    def is_a_previous_process(self, owner: common_pb2.LedgerOwner) -> bool:
        return False  # the owner here is always another gateway, alive


class OwnerElsewhere:
    """A ledger written by gateway "owner" (entries 0..4 stored, the bookies'
    LAC 3, as the headers trail the writer's LAC by one), and readers on
    other gateways that ask the owner through `owners_lac`. `answer` is what
    the owner says: a LAC, an error, or None to never answer."""

    def __init__(self) -> None:
        self.remote = stored_ledger(["a", "b", "c"], 2, 2, 5)
        self.remote.metadata.owner.CopyFrom(common_pb2.LedgerOwner(gateway="owner", address="127.0.0.1:1"))
        self.asked: list[str] = []
        self.answer: int | Exception | None = 4

    async def owners_lac(self, owner: common_pb2.LedgerOwner, ledger: LedgerId) -> int:
        self.asked.append(owner.gateway)
        if self.answer is None:
            await asyncio.Event().wait()  # a hung owner (a blackholed link)
        if isinstance(self.answer, Exception):
            raise self.answer
        assert isinstance(self.answer, int)
        return self.answer

    def reader(self, gateway: str, read_your_writes: bool = True, **read: float) -> LedgerOperations:
        return LedgerOperations(
            self.remote,  # type: ignore[arg-type]
            recovery_settings=RecoverySettings(bookie_timeout_seconds=0.2),
            read_settings=ReadSettings(read_your_writes=read_your_writes, **read),
            lease=FakeLease(gateway),  # type: ignore[arg-type]
            owners_lac=self.owners_lac,
        )


async def test_a_read_past_the_bookies_lac_asks_the_ledgers_owner_elsewhere():
    """Read-your-writes (GWY-3): the bookies' headers trail the writer's LAC
    by one entry, so a confirmed read past what this gateway knows asks the
    gateway that owns the ledger; an owner it cannot reach leaves the
    bookies' LAC standing, and a ledger written here is never asked about."""
    ledger = OwnerElsewhere()
    assert [e.entry_id for e in [await ledger.reader("other").reads.read_entry(LEDGER, 4)]] == [4]
    assert ledger.asked == ["owner"]
    with pytest.raises(OutOfRange):
        await ledger.reader("other", read_your_writes=False).reads.read_entry(LEDGER, 4)  # the control
    assert ledger.asked == ["owner"]
    ledger.answer = Unavailable("the owner is cut off")
    with pytest.raises(OutOfRange) as beyond:
        await ledger.reader("other").reads.read_entry(LEDGER, 4)
    assert beyond.value.metadata == {"last_add_confirmed": "3"}
    with pytest.raises(OutOfRange):
        # It owns the ledger but holds no handle: no hop to itself.
        await ledger.reader("owner").reads.read_entry(LEDGER, 4)
    assert ledger.asked == ["owner", "owner"]


async def test_an_owner_that_never_answers_costs_a_read_its_deadline_then_the_bookies_lac_stands():
    ledger = OwnerElsewhere()
    ledger.answer = None
    reader = ledger.reader("other", owner_lac_timeout_seconds=0.2)
    with pytest.raises(OutOfRange) as beyond:
        await asyncio.wait_for(reader.reads.read_entry(LEDGER, 4), HUNG_SECONDS)
    assert beyond.value.metadata == {"last_add_confirmed": "3"}
    assert ledger.asked == ["owner"]
    assert (await reader.reads.read_entry(LEDGER, 3)).entry_id == 3  # what the bookies confirm is served


def test_an_acknowledged_entry_is_confirmed_even_when_its_ack_carries_an_older_lac():
    assert ledger_reads.confirmed_by_ack(69, 68) == 69
    assert ledger_reads.confirmed_by_ack(69, 69) == 69
    assert ledger_reads.confirmed_by_ack(-1, -1) == -1


async def test_a_relaying_gateway_learns_from_the_acks_it_relays():
    """The gateway that relayed the write and handed out its acknowledgement
    reads the entry with no hop, even with the owner unreachable, also when
    the ack's LAC trails the entry it acknowledges."""
    ledger = OwnerElsewhere()
    ledger.answer = Unavailable("the owner is cut off")
    relay = ledger.reader("relay")
    with pytest.raises(OutOfRange):
        await relay.reads.read_entry(LEDGER, 4)  # nothing relayed yet: the bookies' LAC 3
    learned = await relay.reads.relayed_acks(LEDGER)
    learned(4, 3)  # entry 4 acknowledged; the LAC the ack carries is 3
    assert (await relay.reads.read_entry(LEDGER, 4)).payload == b"e4"
    control = ledger.reader("relay", read_your_writes=False)
    (await control.reads.relayed_acks(LEDGER))(4, 3)
    with pytest.raises(OutOfRange):
        await control.reads.read_entry(LEDGER, 4)


async def test_a_tail_through_another_gateway_delivers_the_last_acknowledged_entry_at_once():
    """The bookies' LAC stays at 3 (nothing more is written): a tail started
    after entry 4 was acknowledged asks the owner once it has caught up, and
    delivers entry 4 without waiting for another entry or the close."""
    ledger = OwnerElsewhere()
    tail = ledger.reader("other", tail_wait_seconds=0.05).reads.tail(LEDGER, 0)
    delivered: list[int] = []

    async def until_entry_4() -> None:
        async for chunk in tail:
            delivered.extend(entry.entry_id for entry in chunk)
            if delivered[-1] == 4:
                return

    try:
        await asyncio.wait_for(until_entry_4(), HUNG_SECONDS)
    finally:
        await tail.aclose()  # type: ignore[attr-defined]
    assert delivered == [0, 1, 2, 3, 4]
    assert ledger.asked == ["owner"]
