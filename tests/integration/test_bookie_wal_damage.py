"""The bookie's store opened on a real RocksDB WAL that a crash tore or that
a flipped byte damaged in the middle (fault row DSK-7 runs the same with
whole processes)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from quire_api.errors import DataLoss
from quire_api.ids import LedgerId
from quire_bookie.storage import DamagedJournal, EntryStore, LedgerState, wal_whole_records_end
from quire_client.cli import main as cli_main
from tests.faults.audit import WAL_HEADER_BYTES, wal_record_starts

pytestmark = pytest.mark.integration

LEDGER = LedgerId(3, 4)
ENTRIES = 200


@pytest.fixture
def crashed(tmp_path: Path) -> Path:
    """A copy of a live store's directory after ENTRIES synced one-entry
    writes: what a crash leaves (every entry only in the WAL)."""
    live = EntryStore(tmp_path / "live")
    state = LedgerState()
    for entry_id in range(ENTRIES):
        state = state.with_entry(entry_id, entry_id - 1)
        live.write([(LEDGER, entry_id, os.urandom(1000))], {LEDGER: state})
    copy = tmp_path / "crashed"
    shutil.copytree(live.path, copy, ignore=shutil.ignore_patterns("LOCK"))
    live.close()
    assert not list(copy.glob("*.sst"))
    return copy


def wal_of(path: Path) -> tuple[Path, bytes, list[int]]:
    (wal,) = path.glob("*.log")
    data = wal.read_bytes()
    return wal, data, wal_record_starts(data)


def stored(path: Path, **options: bool) -> int:
    store = EntryStore(path, **options)
    try:
        return sum(1 for _ in store.entries(LEDGER))
    finally:
        store.close()


def test_a_flip_in_the_middle_refuses_to_open_and_changes_nothing(crashed: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    wal, data, starts = wal_of(crashed)
    damaged = bytearray(data)
    damaged[starts[len(starts) // 2] + WAL_HEADER_BYTES + 10] ^= 0x01
    wal.write_bytes(bytes(damaged))
    for _ in range(2):  # a refused open leaves the files as they were: it can be retried, or inspected
        with pytest.raises(DamagedJournal) as caught:
            EntryStore(crashed)
        assert caught.value.wal_files == [str(wal)]
        assert isinstance(caught.value, DataLoss) and "checksum mismatch" in str(caught.value)
        assert wal.read_bytes() == bytes(damaged)
    with pytest.raises(DamagedJournal):
        EntryStore(crashed, read_only=True)  # `quire bookie inspect` is not shown a silently short store either
    assert cli_main(["bookie", "inspect", "--data-dir", str(crashed)]) == 1
    assert "is damaged before its end" in capsys.readouterr().err


def test_a_flip_in_the_middle_with_point_in_time_recovery_loses_acknowledged_entries(crashed: Path) -> None:
    wal, data, starts = wal_of(crashed)
    damaged = bytearray(data)
    damaged[starts[len(starts) // 2] + WAL_HEADER_BYTES + 10] ^= 0x01
    wal.write_bytes(bytes(damaged))
    assert stored(crashed, unsafe_point_in_time_recovery=True) == len(starts) // 2  # the control's loss


def test_a_torn_last_record_is_dropped_and_reported(crashed: Path) -> None:
    wal, _, starts = wal_of(crashed)
    os.truncate(wal, starts[-1] + WAL_HEADER_BYTES + 16)  # a write torn inside its last record
    store = EntryStore(crashed)
    try:
        assert sum(1 for _ in store.entries(LEDGER)) == ENTRIES - 1
        assert any("the last 23 bytes are not a whole record" in line for line in store.recovery_report)
    finally:
        store.close()


def test_a_torn_header_and_zeros_after_the_end_drop_only_the_torn_batch(crashed: Path) -> None:
    wal, _, starts = wal_of(crashed)
    os.truncate(wal, starts[-1] + 3)  # not even a whole header of the last batch
    with wal.open("ab") as out:
        out.write(b"\0" * 5000)  # blocks a crash left allocated but never written
    assert stored(crashed) == ENTRIES - 1


def test_whole_records_end() -> None:
    def record(kind: int, payload: bytes) -> bytes:
        return struct.pack("<IHB", 0, len(payload), kind) + payload

    full, first, last = record(1, b"a" * 10), record(2, b"b" * 5), record(4, b"c" * 5)
    assert wal_whole_records_end(full + full) == 2 * len(full)
    assert wal_whole_records_end(full + first) == len(full)  # a batch whose last fragment never came
    assert wal_whole_records_end(full + first + last) == len(full + first + last)
    assert wal_whole_records_end(full + full[:9]) == len(full)  # torn inside the record
    assert wal_whole_records_end(full + b"\0" * 3) == len(full)
    block_end = record(1, b"x" * (32 * 1024 - 3 - 7))  # leaves a 3-byte trailer in its block
    assert wal_whole_records_end(block_end + b"\0" * 3 + full) == len(block_end) + 3 + len(full)


WRITER = """
import os, sys
from pathlib import Path
from quire_bookie.storage import EntryStore, LedgerState
from quire_api.ids import LedgerId
store, ledger = EntryStore(Path(sys.argv[1])), LedgerId(3, 4)
state = store.load_states().get(ledger, LedgerState())
next_id = state.last_entry_id + 1
while True:
    count = 1 + next_id % 40
    state = state.with_entry(next_id + count - 1, next_id - 1)
    store.write([(ledger, next_id + i, os.urandom(700)) for i in range(count)], {ledger: state})
    next_id += count
    print(next_id, flush=True)
"""


def test_sigkill_mid_write_never_looks_like_damage(tmp_path: Path) -> None:
    """A process writing synced batches in a loop, SIGKILLed at once after a
    write returned: the store opens every time, with every returned write."""
    path = tmp_path / "store"
    for _ in range(5):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None
            returned = [int(writer.stdout.readline()) for _ in range(50)][-1]
        finally:
            writer.kill()
            writer.wait(timeout=10)
        assert stored(path) >= returned
