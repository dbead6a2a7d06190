"""Ensemble and identity (ENS-*), corruption (COR-*) rows and the
digest-verification positive control."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_api.replication import markers
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import ClusterError, LocalCluster, free_port, grpc_serving
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from tests.faults.checker import check, read_back
from tests.faults.history import History, make_payload
from tests.faults.lab import READS_REACH_BOOKIES, fault_cluster
from tests.faults.proxy import TcpProxy
from tests.faults.report import Scenario
from tests.faults.scenarios import (
    PASSWORD,
    N,
    client_for,
    closed_ledgers,
    finish,
    latency_figures,
    metric_sum,
    new_ledger,
    registered_bookies,
    scrape,
    writers,
)
from tests.faults.workload import observe_metadata, read_all
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("ensemble"), bookies=4, env=READS_REACH_BOOKIES) as local:
        yield local


def name_of(cluster: LocalCluster, bookie_id: str) -> str:
    return next(n for n in cluster.bookie_names if cluster.bookie_id(n) == bookie_id)


def ensure_all_bookies(cluster: LocalCluster) -> None:
    for name in cluster.bookie_names:
        cluster.start_process(name)
    cluster.wait_bookies_registered(len(cluster.bookie_names))


def gateway_metric(cluster: LocalCluster, name: str) -> float:
    return metric_sum(scrape(f"127.0.0.1:{cluster.ports.gateway_http}"), name)


def test_ens1_bookie_fails_with_a_spare(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("ENS-1", N=N, bookies=4, E=3)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        changes_before = gateway_metric(cluster, "quire_gateway_ensemble_changes")
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        writer.start().wait_acked(400)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        victim = name_of(cluster, metadata.ensembles[-1].bookie_ids[1])
        cluster.kill(victim)
        writer.join()
        assert writer.error is None, writer.error
        after, _ = client.ledger_metadata(ledger.qualified_name)
        scenario.figures["ensemble_changes"] = len(after.ensembles) - 1
        scenario.figures["ensemble_change_counter_delta"] = (
            gateway_metric(cluster, "quire_gateway_ensemble_changes") - changes_before
        )
        scenario.figures.update(latency_figures([writer]))
        finish(scenario, client, history, [ledger])
    cluster.start_process(victim)
    cluster.wait_bookies_registered(4)
    assert scenario.figures["ensemble_changes"] == 1
    assert scenario.figures["ensemble_change_counter_delta"] >= 1  # OBS-1: the counter moved


def test_ens2_not_enough_bookies_fails_with_counts(cluster: LocalCluster, scenario: Scenario) -> None:
    scenario.start("ENS-2", E=3, Qw=3, Qa=3, live_bookies=2)
    history = History()
    with client_for(cluster, timeout=30) as client:
        ledger = new_ledger(client, history, write_quorum=3, ack_quorum=3)
        client.add_entry(ledger.qualified_name, b"x")
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        spare = next(n for n in cluster.bookie_names if cluster.bookie_id(n) not in metadata.ensembles[0].bookie_ids)
        member = name_of(cluster, metadata.ensembles[0].bookie_ids[0])
        cluster.kill(spare)
        cluster.kill(member)
        try:
            started = time.monotonic()
            with pytest.raises(QuireClientError) as caught:
                client.add_entry(ledger.qualified_name, b"y")
            scenario.figures["seconds_to_error"] = round(time.monotonic() - started, 2)
            scenario.figures["code"] = caught.value.code.name
            scenario.figures["message_names_counts"] = any(c.isdigit() for c in caught.value.message)
            scenario.figures["message"] = caught.value.message[:200]
        finally:
            ensure_all_bookies(cluster)
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert scenario.figures["message_names_counts"]


def store_on(bookie_id: str, ledger: LedgerId, entry_id: int, packed: bytes) -> None:
    with grpc.insecure_channel(bookie_id) as channel:
        bookie_pb2_grpc.BookieServiceStub(channel).AddEntries(
            bookie_pb2.AddEntriesRequest(
                ledger_id=ledger_id_to_proto(ledger),
                master_key=master_key(PASSWORD),
                entries=[bookie_pb2.PackedEntry(entry_id=entry_id, data=packed)],
                recovery=True,
            ),
            timeout=10,
        )


def corrupt_replicas(client: QuireClient, ledger: LedgerId, entries: range, seed: int, replicas: int) -> int:
    """Overwrite `replicas` copies of each entry with a copy whose payload has
    one flipped bit (HMAC: the bookie cannot check it, as with a rotted disk)."""
    rng = random.Random(seed)
    metadata, _ = client.ledger_metadata(ledger.qualified_name)
    digester = Digester(DigestType.HMAC, PASSWORD)
    length = 0
    injected = 0
    for entry_id in entries:
        payload = make_payload(rng, 9, ledger.scope_id, ledger.ledger_id, entry_id)
        length += len(payload)
        good = pack_entry(ledger, entry_id, entry_id - 1, length, payload, digester)
        bad = good[:-1] + bytes([good[-1] ^ 0x01])
        ensemble = [e for e in metadata.ensembles if e.first_entry_id <= entry_id][-1].bookie_ids
        write_set = [ensemble[(entry_id + i) % len(ensemble)] for i in range(metadata.write_quorum_size)]
        for index, bookie_id in enumerate(write_set):
            store_on(bookie_id, ledger, entry_id, bad if index < replicas else good)
            injected += int(index < replicas)
    return injected


def hmac_ledger(client: QuireClient, history: History, count: int) -> LedgerId:
    metadata = client.create_ledger(
        ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=PASSWORD, digest_type=DigestType.HMAC
    )
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    for entry_id in range(count):  # placeholders, replaced below by good and bad copies
        client.add_entry(ledger.qualified_name, b"placeholder")
        history.record("add", "invoke", ledger.qualified_name, index=entry_id)
    return ledger


def test_cor1_one_corrupt_replica_is_skipped(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("COR-1", M=50)
    history = History()
    with client_for(cluster) as client:
        ledger = hmac_ledger(client, history, 50)
        injected = corrupt_replicas(client, ledger, range(50), seed, replicas=1)
        before = gateway_metric(cluster, "quire_gateway_digest_mismatches")
        read_all(client, ledger.qualified_name, history, first=0, last=49)
        counted = gateway_metric(cluster, "quire_gateway_digest_mismatches") - before
        verdict = check(history, [read_back(client, ledger.qualified_name, history, PASSWORD)])
        scenario.figures.update(verdict.figures())
        scenario.figures["injected"] = injected
        scenario.figures["mismatches_counted"] = counted
        flagged = wait_until(
            "the corrupt replicas flagged for repair",
            lambda: markers(client.ledger_metadata(ledger.qualified_name)[0]),
        )
        scenario.figures["replicas_flagged_for_repair"] = len(flagged)
    assert verdict.wrong_bytes == 0
    assert counted >= 1  # speculative reads may not reach every bad copy first


def test_cor2_all_replicas_corrupt_is_data_loss(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("COR-2", M=5)
    history = History()
    with client_for(cluster) as client:
        ledger = hmac_ledger(client, history, 5)
        corrupt_replicas(client, ledger, range(5), seed, replicas=2)
        with pytest.raises(QuireClientError) as caught:
            read_all(client, ledger.qualified_name, history, first=0, last=4)
        scenario.figures["code"] = caught.value.code.name
        scenario.figures["names_ledger"] = ledger.qualified_name in caught.value.message
        scenario.figures["silent_corruptions"] = sum(1 for e in history.of("read", "ok") if not e.value["good"])
    assert caught.value.code == grpc.StatusCode.DATA_LOSS
    assert scenario.figures["silent_corruptions"] == 0


def test_cor2_positive_control_without_digest_checks(cluster: LocalCluster, scenario: Scenario) -> None:
    """The gateway's test-only digest skip plus one corrupt replica: the checker must see wrong bytes."""
    seed = scenario.start("COR-2-control", M=50)
    history = History()
    gateway = cluster.processes["gateway"]
    gateway.env["QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK"] = "true"
    cluster.restart("gateway")
    try:
        with client_for(cluster) as client:
            ledger = hmac_ledger(client, history, 50)
            corrupt_replicas(client, ledger, range(50), seed, replicas=1)
            read_all(client, ledger.qualified_name, history, first=0, last=49)
            verdict = check(history, [])
            scenario.figures.update(verdict.figures())
    finally:
        del gateway.env["QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK"]
        cluster.restart("gateway")
    assert verdict.wrong_bytes > 0, "positive control: unchecked corrupt replicas must show up as wrong bytes"


def test_cor3_corrupt_add_is_rejected_by_the_bookie(cluster: LocalCluster, scenario: Scenario) -> None:
    scenario.start("COR-3", digest="CRC32C")
    with client_for(cluster) as client:
        metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=PASSWORD)
        ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
        good = pack_entry(ledger, 0, -1, 1024, b"q" * 1024, Digester(DigestType.CRC32C))
        bad = good[:-1] + bytes([good[-1] ^ 0x10])  # a bit flipped on the way in
        bookie_id = metadata.ensembles[0].bookie_ids[0]
        with pytest.raises(grpc.RpcError) as caught:
            store_on(bookie_id, ledger, 0, bad)
        with grpc.insecure_channel(bookie_id) as channel:
            stored = bookie_pb2_grpc.BookieServiceStub(channel).ReadEntries(
                bookie_pb2.ReadEntriesRequest(ledger_id=ledger_id_to_proto(ledger), entry_ids=[0]), timeout=10
            )
        scenario.figures["code"] = caught.value.code().name
        scenario.figures["corrupt_entries_persisted"] = len(stored.entries)
    assert caught.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.DATA_LOSS)
    assert scenario.figures["corrupt_entries_persisted"] == 0


def test_cor5_corrupt_metadata_value(cluster: LocalCluster, scenario: Scenario) -> None:
    scenario.start("COR-5")
    history = History()
    with client_for(cluster) as client:
        victim = new_ledger(client, history)
        other = new_ledger(client, history)
        client.add_entry(other.qualified_name, b"fine")
        key = f"/quire/{cluster.cluster_name}/ledgers/{victim.qualified_name}"
        subprocess.run(
            ["etcdctl", f"--endpoints=127.0.0.1:{cluster.ports.etcd}", "put", key],
            input=b"\x00garbage, not a protobuf\xff\x01",
            check=True,
            capture_output=True,
            env={**os.environ, "ETCDCTL_API": "3"},
        )
        # Written behind the registry's back: the gateway, which has the ledger cached, learns
        # of it by the registry's watch (docs/guarantees.md), so wait for that, not race it.
        deadline = time.monotonic() + 60
        while True:
            try:
                client.ledger_metadata(victim.qualified_name)
            except QuireClientError as exc:
                error = exc
                break
            assert time.monotonic() < deadline, "the gateway still serves the overwritten record"
            time.sleep(0.1)
        scenario.figures["code"] = error.code.name
        scenario.figures["message"] = error.message[:160]
        other_ok = [e.payload for e in client.read(other.qualified_name, 0, 0)] == [b"fine"]
        listed = sum(1 for _ in client.list_ledgers())  # listing copes with one bad record
        scenario.figures["other_ledgers_failing"] = int(not other_ok)
        scenario.figures["ledgers_listed"] = listed
        scenario.figures["services_crashed"] = sum(1 for n in cluster.processes if cluster.pid(n) is None)
    assert scenario.figures["other_ledgers_failing"] == 0
    assert scenario.figures["services_crashed"] == 0
    assert error.code != grpc.StatusCode.UNKNOWN


def test_cor6_digest_types_side_by_side_and_mismatched_copies(cluster: LocalCluster, scenario: Scenario) -> None:
    """Ledgers of every digest type share the bookies and each reads back under
    its own; copies packed with another digest type or another key are caught
    like corruption: the good replica is read, and with none left DATA_LOSS.

    The digest type is the ledger's, from its metadata (BookKeeper's digest
    auto-detection, always on): a client cannot open a ledger "as" another
    type, and another password is PERMISSION_DENIED before anything is read
    (FEN-7)."""
    seed = scenario.start("COR-6", N=500, digest_types=["CRC32", "CRC32C", "HMAC", "DUMMY"], mismatched=40)
    ensure_all_bookies(cluster)
    history = History()
    with client_for(cluster) as client:
        ledgers = []
        for digest_type in (DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC, DigestType.DUMMY):
            metadata = client.create_ledger(
                ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=PASSWORD, digest_type=digest_type
            )
            ledgers.append(LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id))
            observe_metadata(client, ledgers[-1].qualified_name, history)
        running = [w.start() for w in writers(cluster, ledgers, history, seed, count=500)]
        for writer in running:
            writer.join()
            assert writer.error is None, writer.error
        finish(scenario, client, history, ledgers)

        # One ledger (HMAC) with copies packed as another type or under another key.
        ledger = hmac_ledger(client, history, 40)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        rng = random.Random(seed)
        right = Digester(DigestType.HMAC, PASSWORD)
        other_type, other_key = Digester(DigestType.CRC32C), Digester(DigestType.HMAC, b"another password")
        length = 0
        for entry_id in range(40):
            payload = make_payload(rng, 9, ledger.scope_id, ledger.ledger_id, entry_id)
            length += len(payload)
            ensemble = metadata.ensembles[0].bookie_ids
            first, second = (ensemble[(entry_id + i) % len(ensemble)] for i in range(2))
            # 0-19: one copy of another type; 20-29: one copy under another key; 30-39: both bad.
            bad = other_type if entry_id < 20 or entry_id >= 30 else other_key
            store_on(first, ledger, entry_id, pack_entry(ledger, entry_id, entry_id - 1, length, payload, bad))
            second_digester = other_key if entry_id >= 30 else right
            store_on(
                second, ledger, entry_id, pack_entry(ledger, entry_id, entry_id - 1, length, payload, second_digester)
            )
        before = gateway_metric(cluster, "quire_gateway_digest_mismatches")
        read = read_all(client, ledger.qualified_name, history, first=0, last=29)
        with pytest.raises(QuireClientError) as lost:
            read_all(client, ledger.qualified_name, history, first=30, last=39)
        counted = gateway_metric(cluster, "quire_gateway_digest_mismatches") - before
    unverified = sum(1 for event in history.of("read", "ok") if not event.value["good"])
    scenario.figures.update(
        {
            "mismatched_reads_served_from_good_copy": len(read),
            "both_copies_bad_code": lost.value.code.name,
            "mismatches_counted": counted,
            "unverified_reads": unverified,
        }
    )
    assert read == list(range(30)) and unverified == 0
    assert lost.value.code == grpc.StatusCode.DATA_LOSS and counted >= 1


def test_ens6_address_change_keeps_the_bookie_id(cluster: LocalCluster, scenario: Scenario) -> None:
    """Restart a bookie advertising a new endpoint (a proxy in front of it): readers follow the registration."""
    seed = scenario.start("ENS-6", N=500)
    history = History()
    with client_for(cluster) as client:
        (ledger,) = closed_ledgers(cluster, client, history, seed, 500, ledgers=1)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        name = name_of(cluster, metadata.ensembles[0].bookie_ids[0])
        port = cluster.ports.bookies[cluster.bookie_names.index(name)]
        with TcpProxy("127.0.0.1", port, seed=seed) as proxy:
            process = cluster.processes[name]
            process.env["QUIRE_BOOKIE_ADVERTISED_PORT"] = str(proxy.listen_port)
            try:
                cluster.restart(name)
                cluster.wait_bookies_registered(4)
                started = time.monotonic()
                failed = 0
                for _ in range(3):  # entries 0, 3, 6, ... ask the moved bookie first
                    try:
                        read_all(client, ledger.qualified_name, history, first=0, last=499)
                    except QuireClientError:
                        failed += 1
                        time.sleep(1)
                    else:
                        break
                scenario.figures["re_resolve_seconds"] = round(time.monotonic() - started, 2)
                scenario.figures["failed_reads_after_refresh"] = failed
                scenario.figures["bytes_through_new_address"] = proxy.chunks
                finish(scenario, client, history, [ledger])
            finally:
                del process.env["QUIRE_BOOKIE_ADVERTISED_PORT"]
                cluster.restart(name)
    ensure_all_bookies(cluster)
    assert proxy.chunks > 0


def test_ens7_duplicate_bookie_id_is_refused(cluster: LocalCluster, scenario: Scenario, tmp_path) -> None:  # type: ignore[no-untyped-def]
    scenario.start("ENS-7")
    name = cluster.bookie_names[0]
    bookie_id = cluster.bookie_id(name)
    port = free_port()
    env = {
        **cluster.processes[name].env,
        "QUIRE_BOOKIE_ID": bookie_id,
        "QUIRE_BOOKIE_PORT": str(port),
        "QUIRE_BOOKIE_HTTP_PORT": str(free_port()),
        "QUIRE_BOOKIE_DATA_DIR": str(tmp_path / "impostor"),
    }
    with (tmp_path / "impostor.log").open("wb") as log:
        impostor = subprocess.Popen([sys.executable, "-m", "quire_bookie"], env=env, stdout=log, stderr=log)
    try:
        time.sleep(8)
        records = [r for r in registered_bookies(cluster) if r.bookie_id == bookie_id]
        ports = {e.port for r in records for e in r.service_info.endpoints if e.protocol == "bookie-rpc"}
        scenario.figures["live_registrations"] = len(records)
        scenario.figures["impostor_registered"] = port in ports
        scenario.figures["impostor_exited"] = impostor.poll() is not None
        scenario.figures["impostor_log_tail"] = (tmp_path / "impostor.log").read_text()[-200:]
    finally:
        if impostor.poll() is None:
            impostor.terminate()
            impostor.wait(15)
    assert scenario.figures["live_registrations"] == 1
    assert not scenario.figures["impostor_registered"]


def test_ens8_wiped_bookie_refuses_to_start(cluster: LocalCluster, scenario: Scenario) -> None:
    """Last in the module: the wiped bookie stays down."""
    scenario.start("ENS-8")
    name = cluster.bookie_names[-1]
    cluster.terminate(name)
    shutil.rmtree(cluster.data_dir / name)
    try:
        cluster.start_process(name, timeout=20)
        serving = grpc_serving(cluster.bookie_id(name))
    except ClusterError:
        serving = False
    cluster.terminate(name)
    scenario.figures["starts_serving_with_missing_data"] = serving
    assert not serving
