"""A bookie whose journal (RocksDB's WAL) is damaged in the middle (DSK-7).

A SIGKILLed bookie's acknowledged entries live only in its WAL (a few hundred
KiB, far below the memtable size, so nothing was flushed into an SST file).
One byte in the middle of that WAL is flipped, then the bookie is restarted:
it must refuse to start rather than serve without the entries after the damage.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client.cli import main as cli_main
from quire_client.cluster import ClusterError, LocalCluster
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from tests.faults.audit import WAL_HEADER_BYTES, wal_record_starts
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import client_for, finish, new_ledger, thinly_replicated, writers
from tests.faults.test_durability import bookie_rocksdb, wait_bookie_has

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

COUNT = 300
AUDITOR = {"QUIRE_AUDITOR_INTERVAL_SECONDS": "1", "QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS": "4"}
# The entries must still be in the victim's WAL when it is killed, however slow the machine:
# a bookie quiet for a while flushes its memtables and retires that WAL.
KEEP_THE_WAL = {"QUIRE_BOOKIE_IDLE_FLUSH_SECONDS": "0"}
# The positive control: replay a damaged WAL up to the damage and start without the rest.
CONTROL = "QUIRE_BOOKIE_FAULT_UNSAFE_WAL_POINT_IN_TIME_RECOVERY"


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


def refused(local: LocalCluster, name: str) -> int | None:
    """Start a bookie that should refuse; its exit status (None: it served)."""
    try:
        local.start_process(name)
    except ClusterError:
        popen = local.processes[name].popen
        assert popen is not None
        return popen.wait(timeout=10)
    return None


@pytest.mark.parametrize("fix", [True, False], ids=["refuses", "control-point-in-time"])
def test_dsk7_wal_damaged_in_the_middle(tmp_path: Path, scenario: Scenario, capsys, fix: bool) -> None:  # type: ignore[no-untyped-def]
    """With the fix the bookie refuses to start, naming the damaged WAL file
    and the way out, which is then taken: the auditor copies its ledger
    elsewhere, `quire bookie decommission` removes its cookie, the data
    directory is moved aside, and it starts again as a new, empty bookie.
    The control replays the WAL only up to the damage (point in time): the
    bookie starts and answers "missing" for entries it acknowledged."""
    seed = scenario.start("DSK-7" + ("" if fix else "-control"), N=COUNT, E=3, Qw=3, Qa=2, fix=fix)
    history = History()
    with fault_cluster(tmp_path, bookies=4, env={**AUDITOR, **KEEP_THE_WAL}) as local:
        ledger, victim = write_and_damage(local, scenario, history, seed)
        victim_id = local.bookie_id(victim)
        if not fix:
            local.processes[victim].env[CONTROL] = "true"
        status = refused(local, victim)
        log_text = local.log_path(victim).read_text()
        scenario.figures["exit_status"] = status
        if status is None:
            found, missing, last = served(victim_id, ledger, COUNT)
            scenario.figures.update(served=found, acknowledged_answered_missing=missing, last_entry_id=last)
            scenario.figures["warning_logged"] = "dropped a torn or corrupt tail" in log_text
        else:
            refusal = next((line for line in log_text.splitlines() if "cannot start" in line), "")
            scenario.figures["refusal_log_line"] = refusal[-400:]
            scenario.figures["refusal_names_wal"] = scenario.figures["damaged_wal"] in refusal
            scenario.figures["refusal_names_way_out"] = f"quire bookie decommission {victim_id}" in refusal
            scenario.figures["acknowledged_answered_missing"] = 0  # it never answers
            scenario.figures["refuses_again"] = refused(local, victim) == 2  # a supervisor's restart changes nothing
            way_out(local, scenario, ledger, victim)
        with client_for(local) as client:
            finish(scenario, client, history, [ledger])
    if fix:
        assert status == 2
        assert scenario.figures["refusal_names_wal"] and scenario.figures["refusal_names_way_out"]
        assert scenario.figures["refuses_again"]
        assert scenario.figures["decommission_status"] == 0 and not scenario.figures["ledger_still_names_it"]
        assert scenario.figures["entries_below_qw_after"] == 0
        assert scenario.figures["rejoined_empty"]
        assert "decommissioned" in capsys.readouterr().out
    else:
        # The check bites: the bookie serves, short of what it acknowledged.
        assert status is None
        assert scenario.figures["acknowledged_answered_missing"] > 0 and scenario.figures["last_entry_id"] < COUNT - 1


def way_out(local: LocalCluster, scenario: Scenario, ledger: LedgerId, victim: str) -> None:
    """The documented way out, as an operator takes it."""
    victim_id = local.bookie_id(victim)
    target = ["--gateway", local.gateway_target, "--registry", local.registry_target]
    started = time.monotonic()
    scenario.figures["decommission_status"] = cli_main(
        [*target, "bookie", "decommission", victim_id, "--timeout", "120"]
    )
    scenario.figures["seconds_to_decommissioned"] = round(time.monotonic() - started, 2)
    with client_for(local) as client:
        scenario.figures["entries_below_qw_after"] = thinly_replicated(local, client, ledger)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
    scenario.figures["ledger_still_names_it"] = any(victim_id in e.bookie_ids for e in metadata.ensembles)
    data_dir = Path(local.processes[victim].env["QUIRE_BOOKIE_DATA_DIR"])
    data_dir.rename(data_dir.with_name(data_dir.name + ".damaged"))  # kept aside, not deleted
    local.start_process(victim)  # formats an empty data directory
    local.wait_bookies_registered(4)
    found, _, last = served(victim_id, ledger, COUNT)
    scenario.figures["rejoined_empty"] = found == 0 and last == -1
