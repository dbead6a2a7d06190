"""What a bookie holds over a long run stays bounded: a deleted ledger leaves no
SST file (and so no open descriptor) behind, RocksDB runs with explicit
memtable, block cache and open-file bounds (a long soak saw a bookie's RSS and
descriptors grow), and a long poll leaves no per-ledger state once it ends."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from quire_api.ids import LedgerId
from quire_bookie import storage
from quire_bookie.bookie import Bookie, BookieSettings
from quire_bookie.storage import ALL_MEMTABLES_BYTES, LARGE_ENTRY_BYTES, MAX_OPEN_FILES, MEMTABLE_BYTES, EntryStore
from quire_common.entry import master_key
from tests.integration.test_bookie import packed

pytestmark = pytest.mark.integration

KEY = master_key(b"secret")


def descriptors_under(path: Path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(str(path))
        except OSError:
            continue
    return count


def settled_descriptors(bookie: Bookie, path: Path) -> int:
    """`descriptors_under(path)` once the store's WAL syncer has let go of the
    WAL files RocksDB retired since its last sync: it does so at its next sync
    after a memtable switch (storage.WalSyncer), and until then holds them open
    as "(deleted)", two or three of them after a run of deletes' flushes. Call
    with the writer idle: the sync here is the writer's, taken from the test."""
    bookie._store._wal.sync()
    return descriptors_under(path)


async def test_deleted_ledgers_leave_no_sst_files_or_descriptors(tmp_path):
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        for number in range(40):
            ledger = LedgerId(9, 100 + number)
            await bookie.add_entries(ledger, KEY, [(i, packed(i, b"x" * 1024, ledger)) for i in range(50)], False)
            assert await bookie.delete_ledger(ledger) == 50
            if number == 4:  # counted, as at the end, once the deleted ledgers' space is back
                assert bookie._store.space_reclaimed(timeout_seconds=60)
                early = settled_descriptors(bookie, tmp_path)
        # Every ledger is gone, so is every file that held it or its deletion, once
        # the space is given back (beside the writer, after each delete).
        assert bookie._store.space_reclaimed(timeout_seconds=60)
        assert bookie._store._db.live_files() == []
        assert settled_descriptors(bookie, tmp_path) <= early
        assert bookie.ledger_ids() == []
    finally:
        await bookie.close()


async def test_ledgers_deleted_at_once_are_gone_with_their_files(tmp_path):
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        ledgers = [LedgerId(9, 200 + number) for number in range(40)]
        for ledger in ledgers:
            await bookie.add_entries(ledger, KEY, [(i, packed(i, b"x" * 1024, ledger)) for i in range(5)], False)
        # Queued together, they share synced writes and compactions.
        assert await asyncio.gather(*(bookie.delete_ledger(ledger) for ledger in ledgers)) == [5] * 40
        assert bookie._store.space_reclaimed(timeout_seconds=60)
        assert bookie._store._db.live_files() == []
        assert bookie.ledger_ids() == []
        for ledger in ledgers:
            assert (await bookie.read_entries(ledger, [0], 0, 0))[0] == []
    finally:
        await bookie.close()


def value_file_bytes(path: Path) -> int:
    return sum(file.stat().st_size for file in (path / "rocksdb").glob("*.blob"))


@pytest.mark.parametrize("collected", [True, False], ids=["collected", "positive-control-not-collected"])
async def test_large_entries_of_deleted_ledgers_leave_their_value_files(tmp_path, monkeypatch, collected):
    """Large entries live in value files, which compaction leaves alone; the
    value files of deleted ledgers go with the compaction of their ranges,
    which collects them for that alone. Without it (the positive control)
    the deleted half of the entries stays on disk."""
    if not collected:
        monkeypatch.setattr(storage, "_COLLECT_VALUE_FILES", storage._LEAVE_VALUE_FILES)
    payload = os.urandom(LARGE_ENTRY_BYTES * 4)
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        ledgers = [LedgerId(9, 400 + number) for number in range(16)]
        for entry_id in range(12):  # interleaved, as concurrent writers leave them: they share value files
            for ledger in ledgers:
                await bookie.add_entries(ledger, KEY, [(entry_id, packed(entry_id, payload, ledger))], False)
        bookie._store._entries.flush()
        held = value_file_bytes(tmp_path)
        assert held >= 16 * 12 * len(payload)  # every entry in a value file, none only in the SST files
        assert await asyncio.gather(*(bookie.delete_ledger(ledger) for ledger in ledgers[::2])) == [12] * 8
        assert bookie._store.space_reclaimed(timeout_seconds=60)
        left = value_file_bytes(tmp_path)
        if collected:
            assert held * 0.4 < left < held * 0.6, (held, left)
        else:
            assert left == held
        for ledger in ledgers[1::2]:
            assert (await bookie.read_entry(ledger, 11))[1] == packed(11, payload, ledger)
        for ledger in ledgers[::2]:
            assert (await bookie.read_entries(ledger, [0], 0, 0))[0] == []
    finally:
        await bookie.close()


async def test_entries_stay_in_the_sst_files_below_the_large_size_or_with_it_off(tmp_path):
    large, small = LedgerId(9, 500), LedgerId(9, 501)
    large_entries = [(i, packed(i, os.urandom(64 * 1024), large)) for i in range(4)]
    bookie = Bookie(tmp_path, BookieSettings(large_entry_bytes=0))
    await bookie.start()
    try:
        await bookie.add_entries(large, KEY, large_entries, False)
        bookie._store._entries.flush()
        assert value_file_bytes(tmp_path) == 0  # off: even 64 KiB entries stay in the SST files
    finally:
        await bookie.close()
    bookie = Bookie(tmp_path)  # on again: what was written before reads as it was
    await bookie.start()
    try:
        await bookie.add_entries(small, KEY, [(i, packed(i, b"x" * 1024, small)) for i in range(4)], False)
        bookie._store._entries.flush()
        assert value_file_bytes(tmp_path) == 0  # 1 KiB entries are below the size
        assert (await bookie.read_entries(large, [0, 1, 2, 3]))[0] == large_entries
    finally:
        await bookie.close()


async def test_adds_queued_after_a_delete_do_not_wait_for_its_space_to_come_back(tmp_path, monkeypatch):
    """A delete's memtable flush and compactions run beside the writer: an
    add queued after the delete is stored while they are still running."""
    steps: list[str] = []
    reclaiming, release = threading.Event(), threading.Event()
    reclaim = EntryStore._reclaim_space

    def held_reclaim(store: EntryStore, ledger_ids: list[LedgerId]) -> None:
        reclaiming.set()
        release.wait(60)
        reclaim(store, ledger_ids)
        steps.append("space given back")

    monkeypatch.setattr(EntryStore, "_reclaim_space", held_reclaim)
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        deleted, written = LedgerId(9, 300), LedgerId(9, 301)
        await bookie.add_entries(deleted, KEY, [(i, packed(i, b"x" * 1024, deleted)) for i in range(5)], False)
        assert await bookie.delete_ledger(deleted) == 5
        assert await asyncio.to_thread(reclaiming.wait, 60)
        await bookie.add_entries(written, KEY, [(0, packed(0, ledger=written))], False)
        steps.append("add stored")
        release.set()
        assert bookie._store.space_reclaimed(timeout_seconds=60)
        assert steps == ["add stored", "space given back"]
        assert (await bookie.read_entry(written, 0))[1] == packed(0, ledger=written)
        assert (await bookie.read_entries(deleted, [0], 0, 0))[0] == []
    finally:
        release.set()
        await bookie.close()


async def test_adds_are_stored_while_a_deleted_ledger_is_counted(tmp_path, monkeypatch):
    """A delete's answer counts the ledger's entries after the delete, off
    the writer thread: an add queued behind the delete is stored while the
    count still runs, and the count is of the entries the delete removed."""
    counting, release = threading.Event(), threading.Event()
    count = EntryStore._count

    def held_count(store: EntryStore, *args: object) -> int:
        counting.set()
        release.wait(60)
        return count(store, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(EntryStore, "_count", held_count)
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        deleted, written = LedgerId(9, 500), LedgerId(9, 501)
        await bookie.add_entries(deleted, KEY, [(i, packed(i, ledger=deleted)) for i in range(7)], False)
        delete = asyncio.create_task(bookie.delete_ledger(deleted))
        added = asyncio.create_task(bookie.add_entries(written, KEY, [(0, packed(0, ledger=written))], False))
        assert await asyncio.to_thread(counting.wait, 60)
        await added  # queued behind the delete, stored while the count still runs
        assert not delete.done()
        release.set()
        assert await delete == 7
        assert (await bookie.read_entries(deleted, [0, 6], 0, 0))[0] == []
        assert (await bookie.read_entry(written, 0))[1] == packed(0, ledger=written)
    finally:
        release.set()
        await bookie.close()


async def test_a_delete_whose_caller_gave_up_lets_go_of_the_ledgers_view(tmp_path):
    """The view a delete keeps of its ledger holds the deleted entries' files
    open until it is counted: counted all the same when nobody waits."""
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        ledger = LedgerId(9, 600)
        await bookie.add_entries(ledger, KEY, [(i, packed(i, ledger=ledger)) for i in range(3)], False)
        delete = asyncio.create_task(bookie.delete_ledger(ledger))
        await asyncio.sleep(0)  # queued: now waiting for the writer
        delete.cancel()
        deadline = asyncio.get_running_loop().time() + 60
        while (await bookie.read_entries(ledger, [0, 2], 0, 0))[0]:
            assert asyncio.get_running_loop().time() < deadline, "the ledger was not deleted"
            await asyncio.sleep(0.05)
        while bookie._store._uncounted:
            assert asyncio.get_running_loop().time() < deadline, "the deleted ledger's view is still held"
            await asyncio.sleep(0.05)
    finally:
        await bookie.close()


async def test_adds_are_stored_while_a_long_read_of_the_store_runs(tmp_path, monkeypatch):
    """A scrub's check holds the store's handles for as long as it reads;
    the writer's next write goes on beside it, not behind it."""
    checking, release = threading.Event(), threading.Event()
    check = EntryStore._check

    def held_check(store: EntryStore, *args: object) -> object:
        checking.set()
        release.wait(60)
        return check(store, *args)

    monkeypatch.setattr(EntryStore, "_check", held_check)
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        checked, written = LedgerId(9, 400), LedgerId(9, 401)
        await bookie.add_entries(checked, KEY, [(0, packed(0, ledger=checked))], False)
        scrub = asyncio.create_task(bookie.check_entries([(checked, [0], [0])]))
        assert await asyncio.to_thread(checking.wait, 60)
        await bookie.add_entries(written, KEY, [(0, packed(0, ledger=written))], False)
        assert not scrub.done()  # stored while the check still held the store
        release.set()
        (found,) = await scrub
        assert found.missing == [] and found.damaged == []
    finally:
        release.set()
        await bookie.close()


async def test_rocksdb_runs_with_explicit_memory_and_file_bounds(tmp_path):
    bookie = Bookie(tmp_path)
    await bookie.start()
    await bookie.close()
    (options_file,) = sorted((tmp_path / "rocksdb").glob("OPTIONS-*"))[-1:]
    text = options_file.read_text()
    assert f"max_open_files={MAX_OPEN_FILES}" in text
    assert f"db_write_buffer_size={ALL_MEMTABLES_BYTES}" in text
    for column_family in ("default", "entries", "ledgers"):
        section = text.split(f'[CFOptions "{column_family}"]', 1)[1].split("[", 1)[0]
        assert f"write_buffer_size={MEMTABLE_BYTES}" in section
        assert "max_write_buffer_number=2" in section


async def test_a_long_poll_that_times_out_leaves_no_state_behind(tmp_path):
    bookie = Bookie(tmp_path)
    await bookie.start()
    try:
        ledger = LedgerId(9, 7)
        await bookie.add_entries(ledger, KEY, [(0, packed(0, b"x", ledger))], False)
        polls = [bookie.wait_last_add_confirmed(ledger, 5, 0.05) for _ in range(3)]
        assert {lac for lac, _, _ in await asyncio.gather(*polls)} == {-1}  # the LAC never moved past 5
        assert bookie._lac_moved == {} and bookie._lac_waiters == {}
    finally:
        await bookie.close()
