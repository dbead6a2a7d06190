"""Durability and crash rows (DUR-*) and the power-loss positive control."""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_bookie.storage import EntryStore
from quire_client.cluster import LocalCluster, grpc_serving
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2
from tests.faults.audit import WAL_HEADER_BYTES, audit_acks, wal_record_starts
from tests.faults.history import History
from tests.faults.lab import fault_cluster, strace
from tests.faults.report import Scenario
from tests.faults.scenarios import (
    HealthWatch,
    N,
    client_for,
    finish,
    latency_figures,
    metric_sum,
    new_ledger,
    scrape,
    writers,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("durability"), bookies=4) as local:
        yield local


def test_dur1_fault_free_baseline(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("DUR-1", ledgers=4, N=N, E=3, Qw=2, Qa=2)
    history = History()
    with client_for(cluster) as client:
        ledgers = [new_ledger(client, history) for _ in range(4)]
        started = time.monotonic()
        running = [w.start() for w in writers(cluster, ledgers, history, seed)]
        for writer in running:
            writer.join()
            assert writer.error is None, writer.error
        scenario.figures["write_seconds"] = round(time.monotonic() - started, 2)
        scenario.figures.update(latency_figures(running))
        verdict = finish(scenario, client, history, ledgers)
    assert verdict.acked == 4 * N


def test_dur2_one_bookie_sigkill_mid_stream_then_restart(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("DUR-2", N=N, restart_after_seconds=5)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        writer.start()
        kill_at = 200 + seed % 1000
        writer.wait_acked(kill_at)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        victim = next(n for n in cluster.bookie_names if cluster.bookie_id(n) in metadata.ensembles[-1].bookie_ids)
        cluster.kill(victim)
        killed_at = time.monotonic()
        time.sleep(5)
        cluster.start_process(victim)
        writer.join()
        assert writer.error is None, writer.error
        during = [
            (writer.ack_times[i] - writer.invoke_times[i]) * 1000
            for i in writer.ack_times
            if writer.invoke_times.get(i, 0) >= killed_at - 1
        ]
        scenario.figures["killed_at_entry"] = kill_at
        scenario.figures["max_add_ms_during_fault"] = round(max(during), 1) if during else 0.0
        finish(scenario, client, history, [ledger])
    cluster.wait_bookies_registered(4)


def test_dur3_all_bookies_sigkill_then_restart(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("DUR-3", ledgers=2, N=N)
    history = History()
    with client_for(cluster) as client:
        ledgers = [new_ledger(client, history) for _ in range(2)]
        running = [w.start() for w in writers(cluster, ledgers, history, seed, pace_seconds=0.001)]
        for writer in running:
            writer.wait_acked(500)
        for name in cluster.bookie_names:
            cluster.kill(name)
        killed = time.monotonic()
        for writer in running:
            writer.join()
        for name in cluster.bookie_names:
            cluster.start_process(name, wait=False)
        for name in cluster.bookie_names:
            cluster.wait_healthy(name)
        cluster.wait_bookies_registered(4)
        deadline = time.monotonic() + 60
        while True:  # the first successful read after the crash
            try:
                list(client.read(ledgers[0].qualified_name, 0, 0))
                break
            except Exception:
                assert time.monotonic() < deadline, "no read succeeded within 60s of the restart"
                time.sleep(0.2)
        scenario.figures["seconds_to_first_read"] = round(time.monotonic() - killed, 2)
        finish(scenario, client, history, ledgers)


def test_dur8_unsafe_no_sync_is_loud(tmp_path, scenario: Scenario) -> None:  # type: ignore[no-untyped-def]
    scenario.start("DUR-8")
    with fault_cluster(tmp_path, env={"QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA": "true"}) as local:
        name = local.bookie_names[0]
        metrics = scrape(local.bookie_http(name))
        log_text = local.log_path(name).read_text()
        scenario.figures["unsafe_flag_exported"] = metric_sum(metrics, "quire_bookie_sync_disabled") == 1.0
        scenario.figures["warning_logged"] = "QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA" in log_text
        scenario.figures["durable_health_serving"] = grpc_serving(local.bookie_id(name), "durable")
    assert scenario.figures["unsafe_flag_exported"] and scenario.figures["warning_logged"]


@pytest.mark.parametrize("lose_unsynced", [True, False], ids=["control-sync-off", "sync-on"])
def test_dur5_power_loss_positive_control(tmp_path, scenario: Scenario, lose_unsynced: bool) -> None:  # type: ignore[no-untyped-def]
    """Acked entries held only in 'page cache' (never written) are lost by a
    SIGKILL; the checker must see it. With sync on, the same run loses nothing."""
    seed = scenario.start("DUR-5" + ("-control" if lose_unsynced else ""), N=500, lose_unsynced=lose_unsynced)
    env = (
        {"QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA": "true", "QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES": "true"}
        if lose_unsynced
        else {}
    )
    history = History()
    with fault_cluster(tmp_path, env=env) as local, client_for(local) as client:
        ledger = new_ledger(client, history, write_quorum=3, ack_quorum=3)
        (writer,) = writers(local, [ledger], history, seed, count=500)
        writer.start().join()
        assert writer.error is None
        for name in local.bookie_names:
            local.kill(name)  # the "power loss"
        for name in local.bookie_names:
            local.start_process(name)
        local.wait_bookies_registered(3)
        verdict = finish(scenario, client, history, [ledger], expect_clean=not lose_unsynced)
    if lose_unsynced:
        assert verdict.acked_lost > 0, "positive control: the checker must see the lost acknowledged entries"


def bookie_rocksdb(cluster: LocalCluster, name: str) -> Path:
    return Path(cluster.processes[name].env["QUIRE_BOOKIE_DATA_DIR"]) / "rocksdb"


def stored_entries(rocksdb: Path, ledger: LedgerId) -> int:
    """Entries of `ledger` a stopped bookie's database recovers to (opened
    read-only: the WAL is replayed in memory, nothing is written)."""
    store = EntryStore(rocksdb, read_only=True)
    try:
        return sum(1 for _ in store.entries(ledger))
    finally:
        store.close()


def wait_bookie_has(bookie_id: str, ledger: LedgerId, last_entry_id: int, timeout: float = 60.0) -> None:
    """Until one bookie has stored `ledger` up to `last_entry_id` (it may lag its Qa peers)."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(bookie_id) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        while True:
            response = stub.ReadLastAddConfirmed(
                bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id_to_proto(ledger)), timeout=10
            )
            if response.last_entry_id >= last_entry_id:
                return
            assert time.monotonic() < deadline, f"{bookie_id} stored only up to {response.last_entry_id}"
            time.sleep(0.1)


@pytest.mark.parametrize("sync", [True, False], ids=["sync-on", "control-no-sync"])
def test_dur4_no_ack_precedes_the_sync_covering_it(tmp_path: Path, scenario: Scenario, sync: bool) -> None:
    """strace on one bookie (Qw = E: every entry goes to it): for every entry
    acked in its AddStream results (or AddEntries responses), a completed fdatasync of the WAL file
    holding the entry's key precedes the response's sendmsg. The control runs
    the same bookie without sync: the audit must flag its acks."""
    count = 500
    seed = scenario.start("DUR-4" + ("" if sync else "-control"), N=count, E=3, Qw=3, Qa=2, tracer="strace")
    traced = "bookie-1"
    unsafe = {} if sync else {traced: {"QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA": "true"}}
    history = History()
    # The traced bookie is slow; its peers carry Qa, and its calls must not time out.
    slow_ok = {"QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS": "60"}
    with fault_cluster(tmp_path, bookie_env=unsafe, env=slow_ok) as local, client_for(local) as client:
        ledger = new_ledger(client, history, write_quorum=3, ack_quorum=2)
        rocksdb = bookie_rocksdb(local, traced)
        sizes = {str(path): path.stat().st_size for path in rocksdb.glob("*.log")}
        pid = local.pid(traced)
        assert pid is not None
        # recvmsg too: an AddStream ack names its add, and the add (received) names the entries.
        with strace(pid, tmp_path / "bookie.strace", "fsync,fdatasync,sync_file_range,write,sendmsg,recvmsg") as trace:
            # Paced, so the bookie answers in many responses, each after its own sync.
            (writer,) = writers(local, [ledger], history, seed, count=count, pace_seconds=0.002)
            writer.start().join()
            assert writer.error is None, writer.error
            wait_bookie_has(local.bookie_id(traced), ledger, count - 1)
        audit = audit_acks(trace, ledger, local.ports.bookies[0], sizes, count)
        scenario.figures.update(
            acks_sampled=audit.acks,
            acks_without_prior_sync=audit.acks_without_prior_sync,
            acks_without_traced_wal_write=audit.acks_without_wal_write,
            responses_decoded=audit.responses,
            wal_writes=audit.wal_writes,
            wal_syncs=audit.wal_syncs,
            first_violations=audit.violations,
        )
        finish(scenario, client, history, [ledger])
    assert audit.acks >= count * 0.9, audit  # the sample is (nearly) every entry
    assert audit.acks_without_wal_write == 0, audit
    if sync:
        assert audit.acks_without_prior_sync == 0, audit
    else:
        assert audit.acks_without_prior_sync == audit.acks, "control: the audit must see acks without a sync"


@pytest.mark.parametrize("damage", ["torn-last-record", "junk-tail"])
def test_dur6_torn_or_junk_wal_tail(tmp_path: Path, scenario: Scenario, damage: str) -> None:
    """SIGKILL a bookie mid-stream, then tear the last record of its newest
    WAL file (or append random bytes to it): it starts, drops only the damaged
    tail (tolerated as torn) and says so in its log."""
    seed = scenario.start("DUR-6", damage=damage, N=N, E=3, Qw=3, Qa=2)
    history = History()
    with fault_cluster(tmp_path, bookies=4) as local, client_for(local) as client:
        ledger = new_ledger(client, history, write_quorum=3, ack_quorum=2)
        (writer,) = writers(local, [ledger], history, seed, pace_seconds=0.001)
        writer.start().wait_acked(400 + seed % 400)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        victim = next(n for n in local.bookie_names if local.bookie_id(n) == metadata.ensembles[-1].bookie_ids[0])
        local.kill(victim)
        writer.join()
        assert writer.error is None, writer.error

        rocksdb = bookie_rocksdb(local, victim)
        before = stored_entries(rocksdb, ledger)
        newest = max(rocksdb.glob("*.log"), key=lambda path: int(path.stem))
        data = newest.read_bytes()
        torn_keys = 0  # distinct (ledger, id) keys in the record torn: an upper bound on its entries
        if damage == "torn-last-record":
            starts = wal_record_starts(data)
            assert starts, f"no WAL record in {newest}"
            tail = data[starts[-1] :]
            torn_keys = len({tail[m.end() : m.end() + 8] for m in re.finditer(re.escape(ledger.key), tail)})
            os.truncate(newest, starts[-1] + WAL_HEADER_BYTES + 16)  # a write torn inside the record
        else:
            with newest.open("ab") as out:
                out.write(random.Random(seed).randbytes(3000))
        expected = stored_entries(rocksdb, ledger)

        started = time.monotonic()
        local.start_process(victim)  # raises if it exits (a crash loop) instead of serving
        scenario.figures["start_ok"] = True
        scenario.figures["seconds_to_serving"] = round(time.monotonic() - started, 2)
        scenario.figures["entries_before_damage"] = before
        scenario.figures["entries_discarded"] = before - expected
        scenario.figures["ledger_keys_in_torn_record"] = torn_keys
        dropped = [line for line in local.log_path(victim).read_text().splitlines() if "dropped a torn" in line]
        scenario.figures["drop_logged"] = bool(dropped)
        scenario.figures["drop_log_line"] = dropped[0][-200:] if dropped else ""
        local.wait_bookies_registered(4)
        finish(scenario, client, history, [ledger])
    assert dropped, "the bookie must log what WAL recovery dropped"
    if damage == "junk-tail":
        assert before == expected, "junk after the last record must cost no entry"
    else:
        assert 0 <= before - expected <= torn_keys, "only the entries of the torn last record may be lost"


LATE_START_SECONDS = 8.0


def test_dur7_full_system_restart_in_random_order(tmp_path: Path, scenario: Scenario) -> None:
    """Stop every process, etcd included; start them in a seeded random order
    without waiting for any (the last one 8 s late). Each waits for what it
    needs (NOT_SERVING meanwhile, or not yet listening: registry and bookies);
    then every ledger is served with its metadata and data intact."""
    count = 500
    seed = scenario.start("DUR-7", ledgers=3, N=count, last_started_after_seconds=LATE_START_SECONDS)
    history = History()
    with fault_cluster(tmp_path) as local:
        with client_for(local) as client:
            ledgers = [new_ledger(client, history) for _ in range(3)]
            running = [w.start() for w in writers(local, ledgers, history, seed, count=count)]
            for writer in running:
                writer.join()
                assert writer.error is None, writer.error
            client.close_ledger(ledgers[0].qualified_name)  # one closed; the others stay open
            before = {ledger: client.ledger_metadata(ledger.qualified_name)[0] for ledger in ledgers}
        local.stop()
        gateway_health = HealthWatch(local.gateway_target, "quire.gateway.v1.LedgerService", wait_for_ready=True)
        order = list(local.processes)
        random.Random(seed).shuffle(order)
        started = time.monotonic()
        for name in order[:-1]:
            local.start_process(name, wait=False)
        # The last one comes late, past the 5 s a service might give a missing
        # dependency before giving up (with this seed: etcd, that all depend on).
        time.sleep(LATE_START_SECONDS)
        local.start_process(order[-1], wait=False)
        last_started = time.monotonic()
        local.wait_all_healthy(order, timeout=90)  # raises if a process exits instead of waiting
        local.wait_bookies_registered(3)
        scenario.figures["seconds_after_last_start_to_all_serving"] = round(time.monotonic() - last_started, 2)
        scenario.figures["start_order"] = order
        scenario.figures["seconds_to_all_serving"] = round(time.monotonic() - started, 2)
        time.sleep(0.5)
        # OBS-3: the gateway says NOT_SERVING until its dependencies answer, then SERVING, and no flapping.
        health_sequence = [status for status in gateway_health.close() if status != "SERVICE_UNKNOWN"]
        scenario.figures["gateway_health_sequence"] = health_sequence
        assert health_sequence in (["SERVING"], ["NOT_SERVING", "SERVING"]), health_sequence
        with client_for(local) as client:
            after = {ledger: client.ledger_metadata(ledger.qualified_name)[0] for ledger in ledgers}
            finish(scenario, client, history, ledgers)
            mismatches = 0
            for ledger in ledgers:
                closed, _ = client.ledger_metadata(ledger.qualified_name)
                readable = sum(1 for _ in client.read(ledger.qualified_name, 0, closed.last_entry_id))
                # A graceful stop may close an open ledger (at its last acked entry); nothing else may change.
                was_closed = before[ledger].state == common_pb2.LEDGER_STATE_CLOSED
                changed = (
                    after[ledger].SerializeToString(deterministic=True)
                    != before[ledger].SerializeToString(deterministic=True)
                    if was_closed
                    else list(after[ledger].ensembles) != list(before[ledger].ensembles)
                )
                if changed or closed.last_entry_id != count - 1 or readable != count:
                    mismatches += 1
                    scenario.figures.setdefault("mismatches", []).append(
                        f"{ledger}: metadata changed by the restart={changed}, closed at {closed.last_entry_id}, "
                        f"{readable} readable"
                    )
        scenario.figures["ledgers_with_metadata_data_mismatch"] = mismatches
    assert mismatches == 0
