"""The bookie: real RocksDB in tmp_path, real gRPC server on port 0."""

from __future__ import annotations

import asyncio
import errno
import os
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from quire_api.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
    ResourceExhausted,
    Unavailable,
)
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_api.rpc_status import STATUS_DETAILS_KEY
from quire_bookie import inspect, storage
from quire_bookie.bookie import Bookie, BookieSettings
from quire_bookie.collector import LedgerCollector
from quire_bookie.disk import ReadOnlyPolicy
from quire_bookie.servicer import BookieServicer, add_servicer_to_server
from quire_bookie.storage import LARGE_ENTRY_BYTES, EntryStore, LedgerState, entry_key
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_common.server import create_server
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc

pytestmark = pytest.mark.integration

LEDGER = LedgerId(9, 1)
KEY = master_key(b"secret")
DIGEST = Digester(DigestType.CRC32C)


def packed(entry_id: int, payload: bytes = b"payload", ledger: LedgerId = LEDGER, lac: int | None = None) -> bytes:
    return pack_entry(ledger, entry_id, entry_id - 1 if lac is None else lac, entry_id + 1, payload, DIGEST)


@pytest.fixture
async def bookie(tmp_path):
    instance = Bookie(tmp_path, BookieSettings(max_entry_bytes=64 * 1024))
    await instance.start()
    yield instance
    await instance.close()


async def test_added_entries_survive_reopen(tmp_path):
    first = Bookie(tmp_path)
    await first.start()
    await first.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(10)], recovery=False)
    await first.fence(LedgerId(9, 2), KEY)
    await first.close()

    second = Bookie(tmp_path)
    await second.start()
    try:
        assert (await second.read_entry(LEDGER, 7))[1] == packed(7)
        assert (await second.read_entry(LEDGER, -1))[0] == 9
        assert second.last_add_confirmed(LEDGER) == (8, 9, False)
        assert second.last_add_confirmed(LedgerId(9, 2))[2] is True  # the fence is durable
    finally:
        await second.close()


async def test_concurrent_adds_share_synced_writes(bookie):
    await asyncio.gather(*(bookie.add_entries(LEDGER, KEY, [(i, packed(i))], False) for i in range(200)))
    flushes = list(bookie._recent_flushes)
    assert sum(f.entries for f in flushes) == 200
    assert len(flushes) < 200, "group commit should put several adds in one synced write"
    found, missing, truncated = await bookie.read_entries(LEDGER, [*range(200), 500], 0)
    assert len(found) == 200 and missing == [500] and not truncated


async def test_fencing_and_master_keys(bookie):
    await bookie.add_entries(LEDGER, KEY, [(0, packed(0))], False)
    with pytest.raises(PermissionDenied):
        await bookie.add_entries(LEDGER, master_key(b"wrong"), [(1, packed(1))], False)
    with pytest.raises(PermissionDenied):
        await bookie.fence(LEDGER, master_key(b"wrong"))
    assert bookie.last_add_confirmed(LEDGER)[2] is False  # a wrong key fences nothing
    state = await bookie.fence(LEDGER, KEY)
    assert state.fenced and state.last_entry_id == 0
    with pytest.raises(FailedPrecondition):
        await bookie.add_entries(LEDGER, KEY, [(1, packed(1))], False)
    await bookie.add_entries(LEDGER, KEY, [(1, packed(1))], recovery=True)
    assert (await bookie.read_entry(LEDGER, 1))[1] == packed(1)


async def test_header_must_match_the_request(bookie):
    with pytest.raises(InvalidArgument, match="header says"):
        await bookie.add_entries(LEDGER, KEY, [(1, packed(2))], False)
    with pytest.raises(InvalidArgument, match="header says"):
        await bookie.add_entries(LEDGER, KEY, [(1, packed(1, ledger=LedgerId(9, 99)))], False)
    with pytest.raises(ResourceExhausted):
        await bookie.add_entries(LEDGER, KEY, [(0, packed(0, b"x" * 70_000))], False)


async def test_read_byte_limit_returns_at_least_one_entry(bookie):
    big = b"y" * 40_000
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i, big)) for i in range(3)], False)
    found, missing, truncated = await bookie.read_entries(LEDGER, [0, 1, 2], 10)
    assert [e for e, _ in found] == [0] and truncated and missing == []


async def test_bytes_stored_and_read_are_counted(bookie):
    entries = [(i, packed(i, b"z" * (100 * i))) for i in range(3)]
    await bookie.add_entries(LEDGER, KEY, entries, False)
    stored = sum(len(data) for _, data in entries)
    assert bookie.counters.bytes_written == stored
    await bookie.read_entry(LEDGER, 2)
    found, _, _ = await bookie.read_entries(LEDGER, [0, 1], 0)
    assert bookie.counters.bytes_read == len(entries[2][1]) + sum(len(data) for _, data in found)
    with pytest.raises(PermissionDenied):  # refused: nothing stored, nothing counted
        await bookie.add_entries(LEDGER, master_key(b"other"), [(3, packed(3))], False)
    assert bookie.counters.bytes_written == stored


async def test_delete_removes_entries_and_state(bookie):
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(5)], False)
    other = LedgerId(9, 2)
    await bookie.add_entries(other, KEY, [(0, packed(0, ledger=other))], False)
    assert await bookie.delete_ledger(LEDGER) == 5
    found, missing, _ = await bookie.read_entries(LEDGER, [0, 4], 0)
    assert found == [] and missing == [0, 4]
    assert bookie.last_add_confirmed(LEDGER) == (-1, -1, False)
    assert (await bookie.read_entry(other, 0))[1] == packed(0, ledger=other)


def test_a_delete_counts_and_removes_its_ledger_from_the_first_id_to_the_last_and_nothing_else(tmp_path):
    deleted, before, after = LedgerId(9, 5), LedgerId(9, 4), LedgerId(9, 6)
    store = EntryStore(tmp_path)
    try:
        last_id = 2**63 - 1
        store.write([(before, last_id, b"b"), (deleted, 0, b"d"), (deleted, 7, b"d"), (deleted, last_id, b"d")], {})
        store.write([(after, 0, b"a")], {})
        (count,) = store.delete_ledgers([deleted])
        store.write([(deleted, 8, b"d")], {})  # written after the delete: not in its count
        assert count() == 3
        assert store.read(deleted, 8) == b"d"
        assert [store.read(deleted, entry_id) for entry_id in (0, 7, last_id)] == [None, None, None]
        assert store.read(before, last_id) == b"b" and store.read(after, 0) == b"a"
        assert store.space_reclaimed(timeout_seconds=60)
        assert store.read(before, last_id) == b"b" and store.read(after, 0) == b"a"
    finally:
        store.close()


def test_an_entry_is_stored_under_its_ledgers_key_and_its_id_whatever_their_size(tmp_path):
    """An entry's key packs its ledger's ids and its own as 8 big-endian bytes
    each: every entry is found again at every width of the ids, and a ledger's
    entries come back in id order (what range reads and deletes rely on)."""
    largest = 2**64 - 1
    ledgers = [LedgerId(0, 0), LedgerId(0, 1), LedgerId(1, 0), LedgerId(largest, largest), LedgerId(3, 2**40)]
    entry_ids = [0, 1, 255, 2**32, 2**63 - 1]
    store = EntryStore(tmp_path)
    try:
        store.write([(ledger, entry_id, b"%d" % entry_id) for ledger in ledgers for entry_id in entry_ids], {})
        for ledger in ledgers:
            assert [store.read(ledger, entry_id) for entry_id in entry_ids] == [b"%d" % e for e in entry_ids]
            assert [entry_id for entry_id, _ in store.entries(ledger)] == entry_ids
    finally:
        store.close()


def _rocksdb_option(path, name: str) -> str:
    """The value RocksDB wrote for option `name` in its newest OPTIONS file."""
    newest = max(path.glob("OPTIONS-*"), key=lambda options: int(options.name.split("-")[1]))
    (line,) = [line.strip() for line in newest.read_text().splitlines() if line.strip().startswith(f"{name}=")]
    return line.split("=", 1)[1]


@pytest.mark.parametrize("wanted", [True, False])
def test_flushes_and_compactions_bypass_the_page_cache_when_asked(tmp_path, wanted):
    if wanted and not storage.direct_io_works(tmp_path):
        pytest.skip(f"{tmp_path}'s file system refuses O_DIRECT")
    ledger = LedgerId(9, 5)
    store = EntryStore(tmp_path, direct_io_flushes=wanted)
    try:
        assert store.direct_io_flushes is wanted
        assert _rocksdb_option(tmp_path, "use_direct_io_for_flush_and_compaction") == str(wanted).lower()
        payloads = [os.urandom(1000 + entry_id) for entry_id in range(300)]
        store.write([(ledger, entry_id, data) for entry_id, data in enumerate(payloads)], {})
        store.flush_memtables()  # written to SST files the way the option says
        store.reopen()
        assert [store.read(ledger, entry_id) for entry_id in range(300)] == payloads
        assert _rocksdb_option(tmp_path, "use_direct_io_for_flush_and_compaction") == str(wanted).lower()
        assert not list(tmp_path.glob(".direct-io-probe*"))
    finally:
        store.close()


def test_a_file_system_that_refuses_direct_io_keeps_flushes_buffered(tmp_path, monkeypatch):
    """Where O_DIRECT is refused (EINVAL, as older tmpfs and some FUSE file systems do), the
    store opens with buffered flushes rather than let RocksDB fail on it."""
    real_open = os.open

    def refusing_direct_io(path, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(storage.os, "open", refusing_direct_io)
    ledger = LedgerId(9, 5)
    store = EntryStore(tmp_path)
    try:
        assert not store.direct_io_flushes
        assert _rocksdb_option(tmp_path, "use_direct_io_for_flush_and_compaction") == "false"
        store.write([(ledger, 0, b"kept")], {})
        store.flush_memtables()
        assert store.read(ledger, 0) == b"kept"
    finally:
        store.close()


def test_a_deleted_ledgers_count_is_refused_once_the_store_was_reopened(tmp_path):
    """The count reads the database the delete saw: after a reopen it is gone."""
    ledger = LedgerId(9, 5)
    store = EntryStore(tmp_path)
    try:
        store.write([(ledger, 0, b"d")], {})
        (count,) = store.delete_ledgers([ledger])
        store.reopen()
        with pytest.raises(RuntimeError, match="closed or reopened"):
            count()
    finally:
        store.close()


def test_a_delete_that_fails_lets_go_of_the_views_it_opened(tmp_path, monkeypatch):
    """Nobody will count a delete that failed: the views of its ledgers (open
    iterators, which hold the database and its files) are let go at once."""
    opened: list[storage._KeysBeforeDelete] = []

    class Recorded(storage._KeysBeforeDelete):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            opened.append(self)

    monkeypatch.setattr(storage, "_KeysBeforeDelete", Recorded)
    ledger = LedgerId(9, 5)
    store = EntryStore(tmp_path)
    try:
        store.write([(ledger, 0, b"d")], {})

        def failing_sync() -> None:
            raise OSError("sync failed")

        monkeypatch.setattr(store._wal, "sync", failing_sync)
        with pytest.raises(OSError, match="sync failed"):
            store.delete_ledgers([ledger])
        assert len(opened) == 1 and opened[0].keys is None
        assert store._uncounted == set()
    finally:
        store.close()


def info_log_bytes_after_deleting(path, ledgers: int) -> tuple[int, int]:
    """(files, bytes) of RocksDB's info LOG once `ledgers` one-entry ledgers are written and deleted one by one."""
    store = EntryStore(path)
    try:
        for number in range(1, ledgers + 1):
            store.write([(LedgerId(9, number), 0, b"x" * 100)], {})
            store.delete_ledger(LedgerId(9, number))
    finally:
        store.close()
    logs = [p for p in path.iterdir() if p.name.startswith("LOG")]
    return len(logs), sum(p.stat().st_size for p in logs)


def test_deletes_do_not_grow_the_info_log_without_bound(tmp_path, monkeypatch):
    from quire_bookie import storage

    cap = 64 * 1024
    bound = 2 * cap + 64 * 1024  # two files, and the settings RocksDB writes at once on opening
    monkeypatch.setattr(storage, "INFO_LOG_BYTES", cap)
    monkeypatch.setattr(storage, "INFO_LOG_FILES", 2)
    files, size = info_log_bytes_after_deleting(tmp_path / "bounded", 200)
    assert files <= 2 and size <= bound, (files, size)
    # The control: RocksDB's defaults (one LOG growing until the next open) keep every line.
    monkeypatch.setattr(storage, "INFO_LOG_BYTES", 0)
    monkeypatch.setattr(storage, "INFO_LOG_FILES", 1000)
    files, size = info_log_bytes_after_deleting(tmp_path / "unbounded", 200)
    assert size > bound, (files, size)


@pytest.fixture
async def bookie_stub(bookie):
    def register(server):
        add_servicer_to_server(BookieServicer(bookie), server)
        return ["quire.bookie.v1.BookieService"]

    server, port, _ = create_server("127.0.0.1:0", register)
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield bookie_pb2_grpc.BookieServiceStub(channel)
    await server.stop(0)


def reason_of(error: grpc.aio.AioRpcError) -> str:
    for key, value in error.trailing_metadata():
        if key == STATUS_DETAILS_KEY:
            info = error_details_pb2.ErrorInfo()
            status_pb2.Status.FromString(value).details[0].Unpack(info)
            return info.reason
    return ""


async def test_errors_reach_clients_with_code_and_reason(bookie_stub):
    request = bookie_pb2.AddEntriesRequest(
        ledger_id=ledger_id_to_proto(LEDGER),
        master_key=KEY,
        entries=[bookie_pb2.PackedEntry(entry_id=3, data=packed(4))],
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.AddEntries(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(caught.value) == "ERROR_REASON_ENTRY_HEADER_MISMATCH"
    assert "Traceback" not in (caught.value.details() or "")

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(LEDGER), entry_id=0))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.ReadEntry(bookie_pb2.ReadEntryRequest(entry_id=0))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(caught.value) == "ERROR_REASON_INVALID_LEDGER_ID"

    info = await bookie_stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest())
    assert info.total_disk_bytes >= info.free_disk_bytes > 0


async def test_bad_input_stores_nothing(bookie):
    attempts = [
        ([(1, packed(2))], InvalidArgument),  # header names another entry
        ([(0, packed(0, ledger=LedgerId(9, 99)))], InvalidArgument),  # ... another ledger
        ([(0, packed(0)), (1, packed(1, b"x" * 70_000))], ResourceExhausted),  # one oversize entry spoils the batch
        ([(0, b"\x80short")], InvalidArgument),  # truncated header
    ]
    for entries, error in attempts:
        with pytest.raises(error):
            await bookie.add_entries(LEDGER, KEY, entries, False)
    with pytest.raises(InvalidArgument, match="20 bytes"):
        await bookie.add_entries(LEDGER, b"short", [(0, packed(0))], False)
    assert bookie.ledger_ids() == []
    assert await asyncio.to_thread(bookie._store.ledgers_with_entries) == {}


async def test_unknown_ledger_reads_are_not_found(bookie):
    with pytest.raises(NotFound, match="not on this bookie") as caught:
        await bookie.read_entry(LEDGER, 0)
    assert caught.value.reason == Reason.LEDGER_NOT_FOUND
    with pytest.raises(NotFound):
        await bookie.read_entry(LEDGER, -1)
    assert await bookie.read_entries(LEDGER, [0, 1]) == ([], [0, 1], False)


async def test_reads_are_bounded_by_count(bookie):
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(10)], False)
    found, missing, truncated = await bookie.read_entries(LEDGER, list(range(10)), max_entries=4)
    assert [e for e, _ in found] == [0, 1, 2, 3] and truncated and missing == []


async def test_lac_is_the_highest_of_headers_and_explicit_writes(tmp_path):
    first = Bookie(tmp_path)
    await first.start()
    await first.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(3)], False)
    assert first.last_add_confirmed(LEDGER) == (1, 2, False)
    with pytest.raises(PermissionDenied):
        await first.write_last_add_confirmed(LEDGER, master_key(b"wrong"), 2)
    state = await first.write_last_add_confirmed(LEDGER, KEY, 2)
    assert state.lac == 2
    await first.write_last_add_confirmed(LEDGER, KEY, 0)  # an older LAC changes nothing
    assert first.last_add_confirmed(LEDGER) == (2, 2, False)
    await first.close()
    second = Bookie(tmp_path)
    await second.start()
    try:
        assert second.last_add_confirmed(LEDGER) == (2, 2, False)  # durable
    finally:
        await second.close()


async def test_long_poll_returns_when_the_lac_passes_the_given_value(bookie):
    await bookie.add_entries(LEDGER, KEY, [(0, packed(0)), (1, packed(1))], False)  # LAC 0
    waiting = asyncio.create_task(bookie.wait_last_add_confirmed(LEDGER, 0, timeout_seconds=30))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await bookie.add_entries(LEDGER, KEY, [(2, packed(2, lac=0))], False)  # the LAC does not move
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await bookie.add_entries(LEDGER, KEY, [(3, packed(3, lac=2))], False)
    assert await asyncio.wait_for(waiting, 10) == (2, 3, False)
    # Already past: at once. Not past within the timeout: the LAC as it stands.
    assert await bookie.wait_last_add_confirmed(LEDGER, 1, timeout_seconds=30) == (2, 3, False)
    assert await bookie.wait_last_add_confirmed(LEDGER, 2, timeout_seconds=0.05) == (2, 3, False)


async def test_long_poll_wakes_on_an_explicit_lac(bookie):
    other = LedgerId(9, 5)
    waiting = asyncio.create_task(bookie.wait_last_add_confirmed(other, -1, timeout_seconds=30))
    await asyncio.sleep(0.05)
    await bookie.write_last_add_confirmed(other, KEY, 4)
    assert (await asyncio.wait_for(waiting, 10))[0] == 4


async def test_fence_survives_restart_and_only_recovery_adds_pass(tmp_path):
    first = Bookie(tmp_path)
    await first.start()
    await first.add_entries(LEDGER, KEY, [(0, packed(0)), (1, packed(1))], False)
    with pytest.raises(PermissionDenied):
        await first.fence(LEDGER, master_key(b"wrong"))
    state = await first.fence(LEDGER, KEY)
    assert (state.lac, state.last_entry_id) == (0, 1)
    await first.close()
    second = Bookie(tmp_path)
    await second.start()
    try:
        with pytest.raises(FailedPrecondition, match="fenced"):
            await second.add_entries(LEDGER, KEY, [(2, packed(2))], False)
        await second.add_entries(LEDGER, KEY, [(2, packed(2))], recovery=True)
        assert second.last_add_confirmed(LEDGER) == (1, 2, True)
    finally:
        await second.close()


async def test_the_last_entry_and_lac_come_back_from_the_entries_after_restart_or_eviction(tmp_path):
    """A ledger's record is written by its first add here (its master key);
    later adds write their entries alone. Read back, after a restart or once
    the state left the cache, the last entry and the LAC are those of the
    highest stored entry."""
    first = Bookie(tmp_path, BookieSettings(cached_ledger_states=1))
    await first.start()
    other = LedgerId(9, 2)
    for entry_id in range(5):  # five adds, five synced writes
        await first.add_entries(LEDGER, KEY, [(entry_id, packed(entry_id))], False)
    await first.add_entries(other, KEY, [(0, packed(0, ledger=other))], False)  # LEDGER's state leaves the cache
    assert first.last_add_confirmed(LEDGER) == (3, 4, False)
    await first.close()

    store = EntryStore(tmp_path / "rocksdb", read_only=True)
    try:
        assert LedgerState.decode(store._ledgers[LEDGER.key]).last_entry_id == 0, "one record, from the first add"
        assert store.read_state(LEDGER) == LedgerState(KEY, False, 4, 3)
    finally:
        store.close()
    second = Bookie(tmp_path)
    await second.start()
    try:
        assert second.last_add_confirmed(LEDGER) == (3, 4, False)
        await second.add_entries(LEDGER, KEY, [(5, packed(5))], False)
        assert second.last_add_confirmed(LEDGER) == (4, 5, False)
    finally:
        await second.close()
    assert [(row.ledger_id, row.last_entry_id, row.last_add_confirmed) for row in inspect.list_ledgers(tmp_path)] == [
        (LEDGER, 5, 4),
        (other, 0, -1),
    ]


async def test_ledgers_past_the_state_cache_keep_their_fence_key_and_lac(tmp_path):
    """With room for two ledger states in memory, ten ledgers: those evicted
    are read back from RocksDB, so a fenced one stays fenced, a wrong key is
    still refused, reads and LACs answer, and a delete counts as it should;
    memory holds two states, whatever the bookie holds."""
    bookie = Bookie(tmp_path, BookieSettings(cached_ledger_states=2))
    await bookie.start()
    try:
        ledgers = [LedgerId(9, n) for n in range(10)]
        for ledger in ledgers:
            await bookie.add_entries(ledger, KEY, [(i, packed(i, ledger=ledger)) for i in range(3)], False)
        await bookie.fence(ledgers[0], KEY)
        for ledger in ledgers[5:]:  # the fenced ledger leaves the cache
            await bookie.add_entries(ledger, KEY, [(3, packed(3, ledger=ledger))], False)
        states = bookie._committer.states
        assert states.cached == 2 and len(states) == 10 == bookie.ledger_count()
        assert sorted(bookie.ledger_ids()) == ledgers
        with pytest.raises(FailedPrecondition, match="fenced"):
            await bookie.add_entries(ledgers[0], KEY, [(3, packed(3, ledger=ledgers[0]))], False)
        with pytest.raises(PermissionDenied):
            await bookie.add_entries(ledgers[1], master_key(b"wrong"), [(3, packed(3, ledger=ledgers[1]))], False)
        assert bookie.last_add_confirmed(ledgers[0]) == (1, 2, True)
        assert bookie.last_add_confirmed(ledgers[2]) == (1, 2, False)
        assert (await bookie.read_entry(ledgers[3], 2))[1] == packed(2, ledger=ledgers[3])
        with pytest.raises(NotFound):
            await bookie.read_entry(LedgerId(9, 99), 0)
        await bookie.delete_ledger(ledgers[4])
        await bookie.delete_ledger(LedgerId(9, 99))  # never held: the count stays right
        assert len(states) == 9 and states.cached <= 2
    finally:
        await bookie.close()


async def memtables_after_a_quiet_spell(tmp_path, idle_flush_seconds: float, spell: float) -> tuple[int, int]:
    """Bytes in the memtables right after 2 MiB of adds, and once they are
    flushed or `spell` seconds of quiet have passed."""
    bookie = Bookie(tmp_path, BookieSettings(idle_flush_seconds=idle_flush_seconds))
    await bookie.start()
    try:
        payload = b"x" * 65536
        await bookie.add_entries(LEDGER, KEY, [(i, packed(i, payload)) for i in range(32)], False)
        written = bookie._store.memtable_bytes()
        for _ in range(int(spell / 0.05)):  # until flushed, or the spell is over
            if (quiet := bookie._store.memtable_bytes()) < 64 * 1024:
                break
            await asyncio.sleep(0.05)
        assert (await bookie.read_entry(LEDGER, 31))[1] == packed(31, payload), "a flush loses nothing"
        return written, quiet
    finally:
        await bookie.close()


async def test_memtables_are_flushed_once_writes_are_quiet(tmp_path):
    written, quiet = await memtables_after_a_quiet_spell(tmp_path / "flushing", 0.2, spell=30)
    assert written > 2 * 1024 * 1024 and quiet < 64 * 1024, (written, quiet)
    # The control: with the flush off, the memtables keep what was written.
    written, quiet = await memtables_after_a_quiet_spell(tmp_path / "kept", 0, spell=1)
    assert quiet >= written > 2 * 1024 * 1024, (written, quiet)


def read_only_bookie(tmp_path, capacity_bytes: int) -> Bookie:
    return Bookie(
        tmp_path,
        BookieSettings(
            capacity_bytes=capacity_bytes,
            read_only=ReadOnlyPolicy(read_only_usage=0.8, writable_usage=0.5),
            disk_check_interval_seconds=3600,  # the test checks by hand
        ),
    )


async def test_read_only_when_full_reads_still_served_writable_again_below_the_low_watermark(tmp_path):
    bookie = read_only_bookie(tmp_path, capacity_bytes=4 * 1024 * 1024)
    changes: list[tuple[bool, str]] = []
    bookie.on_read_only_change(lambda read_only, reason: changes.append((read_only, reason)))
    await bookie.start()
    try:
        assert not bookie.read_only
        big = b"z" * 200_000
        for i in range(20):  # ~4 MB
            await bookie.add_entries(LEDGER, KEY, [(i, packed(i, big))], False)
        await bookie.check_disk()
        assert bookie.read_only and changes == [(True, bookie.read_only_reason)]
        assert "threshold 80%" in bookie.read_only_reason
        with pytest.raises(FailedPrecondition, match="read-only") as caught:
            await bookie.add_entries(LedgerId(9, 2), KEY, [(0, packed(0, ledger=LedgerId(9, 2)))], False)
        assert caught.value.reason == Reason.BOOKIE_READ_ONLY
        assert (await bookie.read_entry(LEDGER, 19))[1] == packed(19, big)  # reads go on
        info = bookie.info()
        assert info.read_only and info.read_only_reason == bookie.read_only_reason

        await bookie.delete_ledger(LEDGER)  # frees the space, beside the writer
        assert bookie._store.space_reclaimed(timeout_seconds=60)
        await bookie.check_disk()
        assert not bookie.read_only and changes[-1] == (False, "")
        await bookie.add_entries(LedgerId(9, 2), KEY, [(0, packed(0, ledger=LedgerId(9, 2)))], False)
    finally:
        await bookie.close()


async def test_forced_read_only(tmp_path):
    bookie = Bookie(tmp_path, BookieSettings(read_only=ReadOnlyPolicy(forced=True)))
    await bookie.start()
    try:
        with pytest.raises(FailedPrecondition, match="QUIRE_BOOKIE_FORCE_READ_ONLY"):
            await bookie.add_entries(LEDGER, KEY, [(0, packed(0))], False)
    finally:
        await bookie.close()


async def test_info_reflects_a_configured_capacity_and_load(tmp_path):
    bookie = Bookie(tmp_path, BookieSettings(capacity_bytes=50 * 1024 * 1024))
    await bookie.start()
    try:
        await asyncio.gather(
            *(bookie.add_entries(LEDGER, KEY, [(i, packed(i, b"q" * 1000))], False) for i in range(50))
        )
        await bookie.check_disk()
        info = bookie.info()
        assert info.total_disk_bytes == 50 * 1024 * 1024
        assert info.used_bytes >= 50 * 1000
        assert info.free_disk_bytes == info.total_disk_bytes - info.used_bytes
        assert info.adds_per_second > 0 and info.add_bytes_per_second >= 50 * 1000 / 60
        assert 0 < info.sync_latency_p50_ms <= info.sync_latency_p99_ms
        assert not info.sync_disabled
    finally:
        await bookie.close()


async def test_garbage_collection_deletes_only_ledgers_gone_twice(bookie):
    ledgers = [LedgerId(9, n) for n in (1, 2, 3, 4)]
    for ledger in ledgers:
        await bookie.add_entries(ledger, KEY, [(0, packed(0, ledger=ledger))], False)
    listed = [LedgerId(1, 1), ledgers[1], LedgerId(9, 7)]  # the registry's: ledgers[1] alone of the bookie's
    rechecks: dict[LedgerId, object] = {
        ledgers[0]: True,  # gone: deleted
        ledgers[2]: False,  # unlisted, then found (a hiccup): kept
        ledgers[3]: Unavailable("registry down"),  # unknown: kept
    }
    asked: list[LedgerId] = []

    async def existing_ledgers():
        yield listed[:2]  # two pages
        yield listed[2:]

    async def metadata_gone(ledger_id: LedgerId) -> bool:
        asked.append(ledger_id)
        answer = rechecks[ledger_id]
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)

    collector = LedgerCollector(bookie, existing_ledgers, metadata_gone, interval_seconds=3600, recheck_seconds=0)
    assert await collector.collect_once() == [ledgers[0]]
    assert asked == [ledgers[0], ledgers[2], ledgers[3]]  # the listed one is never asked about
    assert sorted(bookie.ledger_ids()) == ledgers[1:]
    with pytest.raises(NotFound):
        await bookie.read_entry(ledgers[0], 0)


async def test_garbage_collection_deletes_nothing_when_the_listing_fails_part_way(bookie):
    ledgers = [LedgerId(9, n) for n in (1, 2)]
    for ledger in ledgers:
        await bookie.add_entries(ledger, KEY, [(0, packed(0, ledger=ledger))], False)

    async def existing_ledgers():
        yield [ledgers[0]]
        raise Unavailable("registry down")  # the page that would list ledgers[1]

    async def metadata_gone(ledger_id: LedgerId) -> bool:
        return True  # were it asked, every ledger would look gone

    collector = LedgerCollector(bookie, existing_ledgers, metadata_gone, interval_seconds=3600, recheck_seconds=0)
    assert await collector.collect_once() == []
    assert sorted(bookie.ledger_ids()) == ledgers


async def test_inspect_lists_dumps_and_verifies_without_writing(tmp_path):
    bookie = Bookie(tmp_path)
    await bookie.start()
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(5)], False)
    await bookie.fence(LEDGER, KEY)
    other = LedgerId(9, 2)
    await bookie.add_entries(other, KEY, [(0, packed(0, ledger=other))], False)
    await bookie.close()
    # Corrupt one stored entry behind the bookie's back.
    store = EntryStore(tmp_path / "rocksdb")
    bad = bytearray(packed(3))
    bad[-1] ^= 0x01
    store.write([(LEDGER, 3, bytes(bad))], {})
    store.close()
    before = snapshot(tmp_path)

    ledgers = inspect.list_ledgers(tmp_path)
    assert [(row.ledger_id, row.entries, row.fenced, row.last_entry_id) for row in ledgers] == [
        (LEDGER, 5, True, 4),
        (other, 1, False, 0),
    ]
    dumped = list(inspect.dump_entries(tmp_path, LEDGER, first=1, last=2))
    assert [(row.entry_id, row.payload) for row in dumped] == [(1, b"payload"), (2, b"payload")]
    verified = list(inspect.dump_entries(tmp_path, LEDGER, verify=True))
    assert [row.digest_ok for row in verified] == [True, True, True, False, True]
    assert snapshot(tmp_path) == before  # nothing written, nothing touched


def snapshot(path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


async def test_lac_writes_of_many_ledgers_in_one_call_are_answered_each(bookie, bookie_stub):
    ledgers = [LedgerId(9, 50 + n) for n in range(3)]
    await bookie.write_last_add_confirmed(ledgers[1], KEY, 0)  # the key this ledger keeps

    def write(ledger: LedgerId, key: bytes, lac: int) -> bookie_pb2.WriteLastAddConfirmedRequest:
        return bookie_pb2.WriteLastAddConfirmedRequest(
            ledger_id=ledger_id_to_proto(ledger), master_key=key, last_add_confirmed=lac
        )

    response = await bookie_stub.WriteLastAddConfirmedBatch(
        bookie_pb2.WriteLastAddConfirmedBatchRequest(
            writes=[write(ledgers[0], KEY, 4), write(ledgers[1], master_key(b"no"), 5), write(ledgers[2], KEY, 6)]
        )
    )
    outcomes = [(r.code, r.reason, r.last_add_confirmed) for r in response.results]
    denied = grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert outcomes[0] == (0, "", 4) and outcomes[2] == (0, "", 6)
    assert outcomes[1][0] == denied and outcomes[1][2] == 0 and response.results[1].message
    assert [bookie.last_add_confirmed(ledger)[0] for ledger in ledgers] == [4, 0, 6]
    for writes in ([write(ledgers[0], KEY, 7)] * 2, [write(LedgerId(9, n), KEY, 1) for n in range(10_001)]):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await bookie_stub.WriteLastAddConfirmedBatch(bookie_pb2.WriteLastAddConfirmedBatchRequest(writes=writes))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_lac_rpcs_long_poll_and_explicit_write(bookie_stub):
    ledger = ledger_id_to_proto(LEDGER)
    poll = asyncio.ensure_future(
        bookie_stub.ReadLastAddConfirmed(
            bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger, previous_lac=-1, timeout_ms=30_000)
        )
    )
    await asyncio.sleep(0.1)
    assert not poll.done()
    written = await bookie_stub.WriteLastAddConfirmed(
        bookie_pb2.WriteLastAddConfirmedRequest(ledger_id=ledger, master_key=KEY, last_add_confirmed=3)
    )
    assert written.last_add_confirmed == 3
    assert (await asyncio.wait_for(poll, 10)).last_add_confirmed == 3
    now = await bookie_stub.ReadLastAddConfirmed(bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger))
    assert now.last_add_confirmed == 3
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.WriteLastAddConfirmed(
            bookie_pb2.WriteLastAddConfirmedRequest(
                ledger_id=ledger, master_key=master_key(b"no"), last_add_confirmed=4
            )
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    fenced = await bookie_stub.FenceLedger(bookie_pb2.FenceLedgerRequest(ledger_id=ledger, master_key=KEY))
    assert fenced.last_add_confirmed == 3
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.AddEntries(
            bookie_pb2.AddEntriesRequest(
                ledger_id=ledger, master_key=KEY, entries=[bookie_pb2.PackedEntry(entry_id=0, data=packed(0))]
            )
        )
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(caught.value) == "ERROR_REASON_LEDGER_FENCED"


async def test_oversize_entry_is_resource_exhausted_over_grpc(bookie_stub):
    request = bookie_pb2.AddEntriesRequest(
        ledger_id=ledger_id_to_proto(LEDGER),
        master_key=KEY,
        entries=[bookie_pb2.PackedEntry(entry_id=0, data=packed(0, b"x" * 70_000))],
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.AddEntries(request)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reason_of(caught.value) == "ERROR_REASON_ENTRY_TOO_LARGE"
    assert "at most 65536" in (caught.value.details() or "")


def record_wal_syncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the bookie's storage fdatasyncs, in order, from now on."""
    synced: list[str] = []
    real_fdatasync = os.fdatasync

    def recording_fdatasync(fd: int) -> None:
        real_fdatasync(fd)
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))

    monkeypatch.setattr("quire_bookie.storage.os.fdatasync", recording_fdatasync)
    return synced


async def test_every_write_syncs_the_wal_before_the_add_returns(tmp_path, monkeypatch):
    synced = record_wal_syncs(monkeypatch)
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        for i in range(3):
            before = len(synced)
            await bookie.add_entries(LEDGER, KEY, [(i, packed(i))], False)
            assert len(synced) > before and synced[-1].endswith(".log"), "acknowledged without a WAL sync"
    finally:
        await bookie.close()

    unsafe = Bookie(tmp_path / "unsafe", BookieSettings(sync=False))
    await unsafe.start()
    try:
        before = len(synced)
        await unsafe.add_entries(LEDGER, KEY, [(0, packed(0))], False)
        assert len(synced) == before
        assert unsafe.info().sync_disabled
    finally:
        await unsafe.close()


@pytest.mark.parametrize("generation_seen", [True, False], ids=["switch-seen", "control-switch-unseen"])
async def test_a_wal_file_started_by_a_memtable_switch_is_synced_by_the_next_write(
    tmp_path, monkeypatch, generation_seen
):
    """The WAL syncer lists the directory only when a memtable switch (the
    only time RocksDB starts a WAL file) changed a super version number. The
    control freezes that number: the new WAL file then goes unsynced, which
    is what the check must catch."""
    synced = record_wal_syncs(monkeypatch)
    bookie = Bookie(tmp_path)
    await bookie.start()
    store = bookie._store
    if not generation_seen:
        monkeypatch.setattr(store._wal, "_generation", lambda: (0,))
    try:
        await bookie.add_entries(LEDGER, KEY, [(0, packed(0))], False)
        wals_before = {name for name in os.listdir(store.path) if name.endswith(".log")}
        store._entries.flush()  # a memtable switch, as a full memtable or a delete's flush makes
        started = {name for name in os.listdir(store.path) if name.endswith(".log")} - wals_before
        assert started, "the memtable switch started no WAL file"
        synced.clear()
        await bookie.add_entries(LEDGER, KEY, [(1, packed(1))], False)
        assert bool(started & set(synced)) == generation_seen
    finally:
        await bookie.close()


async def test_once_an_older_wal_file_had_its_last_sync_only_the_newest_is_synced(tmp_path, monkeypatch):
    """RocksDB appends to its newest WAL file only; an older one stays until
    every column family with data in it is flushed (the ledger states' family
    seldom is). The write after a switch syncs every live file once, then
    each write syncs the newest alone: an fdatasync of a file with nothing
    new still waits for the disk."""
    synced = record_wal_syncs(monkeypatch)
    bookie = Bookie(tmp_path)
    await bookie.start()
    store = bookie._store
    try:
        await bookie.add_entries(LEDGER, KEY, [(0, packed(0))], False)
        store._entries.flush()  # a memtable switch: a new WAL file, the old one kept for the states
        live = sorted(name for name in os.listdir(store.path) if name.endswith(".log"))
        assert len(live) >= 2, live
        synced.clear()
        await bookie.add_entries(LEDGER, KEY, [(1, packed(1))], False)
        assert set(live) <= set(synced)  # the older files' last sync
        synced.clear()
        await bookie.add_entries(LEDGER, KEY, [(2, packed(2))], False)
        assert synced == [live[-1]]
    finally:
        await bookie.close()


async def test_an_entry_corrupted_on_the_way_in_is_refused_and_not_stored(tmp_path):
    corrupt = bytearray(packed(0, b"payload bytes"))
    corrupt[-3] ^= 0x10
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        with pytest.raises(InvalidArgument, match="does not match its digest") as caught:
            await bookie.add_entries(LEDGER, KEY, [(0, bytes(corrupt))], False)
        assert caught.value.reason == Reason.DIGEST_MISMATCH
        assert bookie.ledger_ids() == []
    finally:
        await bookie.close()
    trusting = Bookie(tmp_path / "trusting", BookieSettings(verify_digests=False))
    await trusting.start()
    try:
        await trusting.add_entries(LEDGER, KEY, [(0, bytes(corrupt))], False)  # the setting is what refused it
    finally:
        await trusting.close()


async def test_range_reads_scan_in_order_report_gaps_and_respect_bounds(bookie):
    stored = [0, 1, 2, 5, 6, 9]
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i, b"r" * 1000)) for i in stored], False)
    found, missing, truncated = await bookie.read_range(LEDGER, 1, 1 << 62)
    assert [e for e, _ in found] == [1, 2, 5, 6, 9] and missing == [3, 4, 7, 8] and not truncated
    assert found[2][1] == packed(5, b"r" * 1000)
    found, missing, truncated = await bookie.read_range(LEDGER, 0, 9, max_entries=4)
    assert [e for e, _ in found] == [0, 1, 2, 5] and missing == [3, 4] and truncated
    found, _, truncated = await bookie.read_range(LEDGER, 3, 9, max_bytes=10)  # always the first one
    assert [e for e, _ in found] == [5] and truncated
    assert await bookie.read_range(LedgerId(9, 77), 0, 10) == ([], [], False)
    with pytest.raises(InvalidArgument):
        await bookie.read_range(LEDGER, 5, 4)


async def test_range_reads_over_grpc(bookie, bookie_stub):
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(5)], False)
    ledger = ledger_id_to_proto(LEDGER)
    response = await bookie_stub.ReadEntries(
        bookie_pb2.ReadEntriesRequest(ledger_id=ledger, range=bookie_pb2.EntryRange(first_entry_id=1, last_entry_id=3))
    )
    assert [e.entry_id for e in response.entries] == [1, 2, 3] and not response.truncated
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.ReadEntries(
            bookie_pb2.ReadEntriesRequest(
                ledger_id=ledger, entry_ids=[1], range=bookie_pb2.EntryRange(first_entry_id=1, last_entry_id=3)
            )
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_find_missing_entries_scans_keys_and_is_bounded(bookie, bookie_stub):
    stored = [0, 1, 2, 5, 6, 9]
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in stored], False)
    assert await bookie.find_missing_entries(LEDGER, [9, 3, 0, 4, 12, 5]) == [3, 4, 12]
    assert await bookie.find_missing_entries(LedgerId(9, 77), [0, 1]) == [0, 1]  # a ledger never seen
    assert await bookie.find_missing_entries(LEDGER, []) == []
    response = await bookie_stub.FindMissingEntries(
        bookie_pb2.FindMissingEntriesRequest(ledger_id=ledger_id_to_proto(LEDGER), entry_ids=[8, 9, 10])
    )
    assert list(response.missing_entry_ids) == [8, 10]
    for entry_ids in ([-1], list(range(65_537))):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await bookie_stub.FindMissingEntries(
                bookie_pb2.FindMissingEntriesRequest(ledger_id=ledger_id_to_proto(LEDGER), entry_ids=entry_ids)
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_check_entries_finds_missing_and_damaged_copies_of_many_ledgers_in_one_call(bookie, bookie_stub):
    other = LedgerId(9, 2)
    keyed = LedgerId(9, 3)
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in (0, 1, 2, 3, 5)], False)
    await bookie.add_entries(other, KEY, [(i, packed(i, ledger=other)) for i in range(3)], False)
    hmac = Digester(DigestType.HMAC, b"secret")
    await bookie.add_entries(keyed, KEY, [(i, pack_entry(keyed, i, i - 1, 1, b"k", hmac)) for i in range(2)], False)
    # Damage as a disk or a storage bug would, below the add path's checks:
    # a flipped payload bit (1), another entry's whole copy (2), an HMAC copy
    # with a flipped bit the bookie cannot see (keyed 0) and one misplaced (keyed 1).
    store = bookie._store._entries
    flipped = packed(1)
    store.put(entry_key(LEDGER, 1), flipped[:-1] + bytes([flipped[-1] ^ 1]))
    store.put(entry_key(LEDGER, 2), packed(3))
    keyed_copy = pack_entry(keyed, 0, -1, 1, b"k", hmac)
    store.put(entry_key(keyed, 0), keyed_copy[:-1] + bytes([keyed_copy[-1] ^ 1]))
    store.put(entry_key(keyed, 1), keyed_copy)
    found = await bookie.check_entries(
        [
            (LEDGER, [0, 4, 6], [1, 2, 3, 7]),
            (other, [0, 1, 2], []),
            (keyed, [], [0, 1]),
            (LedgerId(9, 77), [0], [1]),  # never seen
        ]
    )
    assert [(f.missing, f.damaged) for f in found] == [
        ([4, 6, 7], [1, 2]),
        ([], []),
        ([], [1]),  # the bookie checks an HMAC copy's header, not its digest
        ([0, 1], []),
    ]
    assert found[0].bytes_verified == 3 * len(packed(1)) and found[3].bytes_verified == 0
    response = await bookie_stub.CheckEntries(
        bookie_pb2.CheckEntriesRequest(
            ledgers=[bookie_pb2.LedgerEntriesToCheck(ledger_id=ledger_id_to_proto(other), entry_ids=[2, 3])]
        )
    )
    assert [list(f.missing_entry_ids) for f in response.ledgers] == [[3]]
    refused = [
        [(LEDGER, [-1], [])],
        [(LEDGER, list(range(40_000)), []), (other, list(range(25_537)), [])],
        [(LEDGER, [0], []), (LEDGER, [1], [])],
    ]
    for asked in refused:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await bookie_stub.CheckEntries(
                bookie_pb2.CheckEntriesRequest(
                    ledgers=[
                        bookie_pb2.LedgerEntriesToCheck(
                            ledger_id=ledger_id_to_proto(ledger), entry_ids=ids, verify_entry_ids=verify
                        )
                        for ledger, ids, verify in asked
                    ]
                )
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def stripes(*rows: tuple[LedgerId, int, int, int, int, int, int, int]) -> bookie_pb2.EntryStripes:
    """Rows of (ledger, first, last, ensemble size, write quorum, position, verify first, verify last)."""
    return bookie_pb2.EntryStripes(
        scope_ids=[row[0].scope_id for row in rows],
        ledger_ids=[row[0].ledger_id for row in rows],
        first_entry_ids=[row[1] for row in rows],
        last_entry_ids=[row[2] for row in rows],
        ensemble_sizes=[row[3] for row in rows],
        write_quorums=[row[4] for row in rows],
        positions=[row[5] for row in rows],
        verify_first_ids=[row[6] for row in rows],
        verify_last_ids=[row[7] for row in rows],
    )


async def test_check_entries_by_stripes_expands_each_row_to_the_copies_its_bookie_holds(bookie, bookie_stub):
    other = LedgerId(9, 2)
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in (0, 1, 2, 3, 5)], False)
    await bookie.add_entries(other, KEY, [(i, packed(i, ledger=other)) for i in range(3)], False)
    store = bookie._store._entries
    flipped = packed(1)
    store.put(entry_key(LEDGER, 1), flipped[:-1] + bytes([flipped[-1] ^ 1]))
    store.put(entry_key(LEDGER, 2), packed(3))
    response = await bookie_stub.CheckEntries(
        bookie_pb2.CheckEntriesRequest(
            stripes=stripes(
                (LEDGER, 0, 7, 1, 1, 0, 1, 3),  # every entry held here; 1..3 verified
                (other, 0, 3, 3, 2, 1, 0, -1),  # position 1 of 3, W 2: entries 0, 1 and 3
                (LedgerId(9, 77), 0, 0, 1, 1, 0, 0, 0),  # never seen
                (other, 0, 2, 3, 1, 2, 0, 2),  # position 2 of 3, W 1: entry 2, verified
            )
        )
    )
    assert response.rows_checked == 4 and not response.ledgers
    assert list(zip(response.missing_rows, response.missing_entry_ids, strict=True)) == [
        (0, 4),
        (0, 6),
        (0, 7),
        (1, 3),
        (2, 0),
    ]
    assert list(zip(response.damaged_rows, response.damaged_entry_ids, strict=True)) == [(0, 1), (0, 2)]
    assert response.bytes_verified == 4 * len(packed(1))
    refused = [
        bookie_pb2.CheckEntriesRequest(
            stripes=stripes((LEDGER, 0, 1, 1, 1, 0, 0, -1)),
            ledgers=[bookie_pb2.LedgerEntriesToCheck(ledger_id=ledger_id_to_proto(other), entry_ids=[2])],
        ),
        bookie_pb2.CheckEntriesRequest(stripes=bookie_pb2.EntryStripes(scope_ids=[9], ledger_ids=[1])),
        bookie_pb2.CheckEntriesRequest(stripes=stripes((LEDGER, -1, 1, 1, 1, 0, 0, -1))),
        bookie_pb2.CheckEntriesRequest(stripes=stripes((LEDGER, 0, 1, 2, 3, 0, 0, -1))),  # W above E
        bookie_pb2.CheckEntriesRequest(stripes=stripes((LEDGER, 0, 1, 3, 2, 3, 0, -1))),  # no position 3 of 3
        bookie_pb2.CheckEntriesRequest(stripes=stripes((LEDGER, 0, 1, 0, 0, 0, 0, -1))),
        bookie_pb2.CheckEntriesRequest(
            stripes=stripes((LEDGER, 0, 40_000, 3, 1, 0, 0, -1), (other, 0, 25_535, 3, 1, 0, 0, -1))
        ),  # 65,537 ids spanned, a third of them held
    ]
    for request in refused:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await bookie_stub.CheckEntries(request)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, request


@pytest.mark.parametrize(
    ("entry_bytes", "count", "files"),
    [(1000, 2000, "*.sst"), (LARGE_ENTRY_BYTES, 64, "*.blob")],
    ids=["sst", "value-file"],
)
async def test_a_checksum_failure_is_data_loss_storage_error_not_internal(tmp_path, entry_bytes, count, files):
    """A flipped byte in an SST data block, or in a value file of large
    entries: RocksDB reports `Corruption: block checksum mismatch` or a blob
    record's CRC mismatch (plain Exceptions from rocksdict). The bookie
    answers DATA_LOSS with STORAGE_ERROR, like an I/O error, so the gateway
    reads another replica and flags this copy; never INTERNAL."""
    first = Bookie(tmp_path)
    await first.start()
    await first.add_entries(
        LEDGER, KEY, [(i, packed(i, os.urandom(entry_bytes))) for i in range(count)], recovery=False
    )
    first._store._db.flush()  # into the SST (and value) files, so the WAL no longer holds the entries
    await first.close()
    (damaged,) = sorted((tmp_path / "rocksdb").glob(files), key=lambda p: p.stat().st_size)[-1:]
    with damaged.open("r+b") as file:
        file.seek(damaged.stat().st_size // 3)
        byte = file.read(1)
        file.seek(damaged.stat().st_size // 3)
        file.write(bytes([byte[0] ^ 0xFF]))

    bookie = Bookie(tmp_path)
    await bookie.start()

    def register(server):
        add_servicer_to_server(BookieServicer(bookie), server)
        return ["quire.bookie.v1.BookieService"]

    server, port, _ = create_server("127.0.0.1:0", register)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = bookie_pb2_grpc.BookieServiceStub(channel)
            codes = set()
            for entry_id in range(count):
                try:
                    await stub.ReadEntry(
                        bookie_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(LEDGER), entry_id=entry_id)
                    )
                except grpc.aio.AioRpcError as exc:
                    codes.add((exc.code(), reason_of(exc)))
                    assert "Traceback" not in (exc.details() or "")
            assert codes == {(grpc.StatusCode.DATA_LOSS, "ERROR_REASON_STORAGE_ERROR")}
    finally:
        await server.stop(0)
        await bookie.close()


def stored_entry_bytes(store: EntryStore) -> int:
    """Bytes of the SST files holding the entries, once every memtable is flushed."""
    store.flush_memtables()
    return store._entries.property_int_value("rocksdb.total-sst-files-size")


def test_entries_are_stored_with_the_chosen_compression_and_files_of_another_stay_readable(tmp_path):
    # About 4 KiB each, and compressible.
    text = [(entry_id, f"entry {entry_id} ".encode() * 400) for entry_id in range(50)]
    raw = sum(len(data) for _, data in text)
    other = LedgerId(9, 2)
    path = tmp_path / "rocksdb"
    store = EntryStore(path, entry_compression="zstd")
    try:
        store.write([(LEDGER, entry_id, data) for entry_id, data in text], {})
        compressed = stored_entry_bytes(store)
    finally:
        store.close()
    assert compressed < raw / 10, (compressed, raw)
    # The default stores them as they came: the control that the size above is the setting's doing.
    store = EntryStore(path)
    try:
        store.write([(other, entry_id, data) for entry_id, data in text], {})
        assert stored_entry_bytes(store) - compressed >= raw, (compressed, raw)
        for ledger_id in (LEDGER, other):  # the zstd files and the uncompressed ones alike
            for entry_id, data in text:
                assert store.read(ledger_id, entry_id) == data
    finally:
        store.close()


def test_every_entry_compression_the_setting_offers_opens_a_store(tmp_path):
    from quire_bookie.settings import BookieEnv
    from quire_common.config import declared_settings

    (choices,) = [
        meta.choices for meta, _ in declared_settings(BookieEnv) if meta.env == "QUIRE_BOOKIE_ENTRY_COMPRESSION"
    ]
    for name in choices:
        store = EntryStore(tmp_path / name, entry_compression=name)
        try:
            store.write([(LEDGER, 0, b"entry")], {})
            assert store.read(LEDGER, 0) == b"entry"
        finally:
            store.close()
