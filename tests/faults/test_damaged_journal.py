"""A bookie whose journal (RocksDB's WAL) is damaged in the middle (DSK-7).

A SIGKILLed bookie's acknowledged entries live only in its WAL (a few hundred
KiB, far below the memtable size, so nothing was flushed into an SST file).
One byte in the middle of that WAL is flipped, then the bookie is restarted.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import grpc
import pytest

from quire.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_client.cluster import LocalCluster
from quire_common.ids import LedgerId, ledger_id_to_proto
from tests.faults.audit import WAL_HEADER_BYTES, wal_record_starts
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import client_for, finish, new_ledger, writers
from tests.faults.test_durability import bookie_rocksdb, wait_bookie_has

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

COUNT = 300


def flip_middle_of_wal(rocksdb: Path) -> tuple[Path, int, int]:
    """Flip one payload byte of the middle record of the biggest WAL file:
    a whole record boundary region away from both ends. Returns the file, the
    offset flipped and how many records the file holds."""
    wal = max(rocksdb.glob("*.log"), key=lambda path: path.stat().st_size)
    data = bytearray(wal.read_bytes())
    starts = wal_record_starts(bytes(data))
    assert len(starts) >= 4, f"{wal} holds only {len(starts)} records"
    middle = starts[len(starts) // 2]
    _, length, _ = struct.unpack_from("<IHB", data, middle)  # crc | length | type
    offset = middle + WAL_HEADER_BYTES + min(length, 64) // 2
    data[offset] ^= 0x5A
    wal.write_bytes(bytes(data))
    return wal, offset, len(starts)


def served(bookie_id: str, ledger: LedgerId, count: int) -> tuple[int, int, int]:
    """(entries the bookie returns, ids it answers missing, its last entry id)
    for entries 0..count-1 of `ledger`, asked of the bookie directly."""
    found = missing = 0
    with grpc.insecure_channel(bookie_id) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        ids = list(range(count))
        while ids:
            response = stub.ReadEntries(
                bookie_pb2.ReadEntriesRequest(ledger_id=ledger_id_to_proto(ledger), entry_ids=ids[:100]), timeout=10
            )
            answered = {e.entry_id for e in response.entries} | set(response.missing_entry_ids)
            found += len(response.entries)
            missing += len(response.missing_entry_ids)
            ids = [i for i in ids if i not in answered]
        last = stub.ReadLastAddConfirmed(
            bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id_to_proto(ledger)), timeout=10
        ).last_entry_id
    return found, missing, last


def write_and_damage(local: LocalCluster, scenario: Scenario, history: History, seed: int) -> tuple[LedgerId, str]:
    """COUNT entries on every bookie of a closed ledger (E = Qw = 3), then one
    of them SIGKILLed and a byte in the middle of its WAL flipped."""
    with client_for(local) as client:
        ledger = new_ledger(client, history, write_quorum=3, ack_quorum=2)
        (writer,) = writers(local, [ledger], history, seed, count=COUNT, pace_seconds=0.001)
        writer.start().join()
        assert writer.error is None, writer.error
        client.close_ledger(ledger.qualified_name)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
    victim_id = metadata.ensembles[0].bookie_ids[0]
    victim = next(n for n in local.bookie_names if local.bookie_id(n) == victim_id)
    wait_bookie_has(victim_id, ledger, COUNT - 1)  # it acknowledged every entry
    local.kill(victim)
    rocksdb = bookie_rocksdb(local, victim)
    scenario.figures["sst_files_before"] = len(list(rocksdb.glob("*.sst")))
    wal, offset, records = flip_middle_of_wal(rocksdb)
    scenario.figures.update(damaged_wal=wal.name, flipped_offset=offset, wal_records=records)
    return ledger, victim


def test_dsk7_reproduction_mid_wal_flip_today(tmp_path: Path, scenario: Scenario) -> None:
    seed = scenario.start("DSK-7-reproduction", N=COUNT, E=3, Qw=3, Qa=2)
    history = History()
    with fault_cluster(tmp_path, bookies=4) as local:
        ledger, victim = write_and_damage(local, scenario, history, seed)
        started = time.monotonic()
        local.start_process(victim)
        scenario.figures["seconds_to_serving"] = round(time.monotonic() - started, 2)
        found, missing, last = served(local.bookie_id(victim), ledger, COUNT)
        scenario.figures.update(acknowledged=COUNT, served=found, answered_missing=missing, last_entry_id=last)
        log_text = local.log_path(victim).read_text()
        scenario.figures["warning_logged"] = "dropped a torn or corrupt tail" in log_text
        with client_for(local) as client:
            finish(scenario, client, history, [ledger])
    # Today: the bookie starts and answers "no such entry" for entries it acknowledged.
    assert missing > 0 and found < COUNT
