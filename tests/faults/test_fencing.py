"""Fencing and recovery rows (FEN-*)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import (
    PASSWORD,
    N,
    client_for,
    finish,
    new_ledger,
    registered_bookies,
    stale_adds_accepted,
    writers,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("fencing"), bookies=4) as local:
        yield local


def name_of(cluster: LocalCluster, bookie_id: str) -> str:
    return next(n for n in cluster.bookie_names if cluster.bookie_id(n) == bookie_id)


def test_fen1_recovery_while_the_first_writer_still_writes(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("FEN-1", N=N)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        writer.start().wait_acked(300)
        started = time.monotonic()
        closed = client.recover_ledger(ledger.qualified_name, PASSWORD)
        history.record("fence", "ok", ledger.qualified_name, last_entry_id=closed.last_entry_id)
        scenario.figures["recovery_seconds"] = round(time.monotonic() - started, 2)
        writer.join()
        assert writer.error is not None and writer.error.code == grpc.StatusCode.FAILED_PRECONDITION, writer.error
        scenario.figures["writer_error"] = writer.error.reason
        scenario.figures["closed_at"] = closed.last_entry_id
        scenario.figures["writer_acked"] = writer.acked
        verdict = finish(scenario, client, history, [ledger])
        assert closed.last_entry_id >= writer.acked
    assert verdict.adds_after_fence == 0


@pytest.mark.parametrize(("write_quorum", "ack_quorum"), [(3, 2), (2, 2)], ids=["w3a2", "w2a2"])
def test_fen2_recovery_with_a_hung_bookie(
    cluster: LocalCluster, scenario: Scenario, write_quorum: int, ack_quorum: int
) -> None:
    # With Qw=Qa a hung member of an entry's write set cannot ack its
    # recovery add: recovery replaces it in the last ensemble (as a writer's
    # ensemble change would) instead of waiting for its timeout.
    seed = scenario.start("FEN-2", N=500, E=3, Qw=write_quorum, Qa=ack_quorum, fault="SIGSTOP one ensemble member")
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history, write_quorum=write_quorum, ack_quorum=ack_quorum)
        (writer,) = writers(cluster, [ledger], history, seed, count=500)
        writer.start().join()
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        # The member holding the last entry: its recovery add must go somewhere.
        last_ensemble = metadata.ensembles[-1].bookie_ids
        hung_id = last_ensemble[(writer.acked - 1) % len(last_ensemble)] if writer.acked else last_ensemble[0]
        hung = name_of(cluster, hung_id)
        cluster.pause(hung)
        try:
            started = time.monotonic()
            closed = client.recover_ledger(ledger.qualified_name, PASSWORD)
            scenario.figures["recovery_seconds"] = round(time.monotonic() - started, 2)
            scenario.figures["recovery_completed"] = True
            scenario.figures["ensembles_after"] = len(closed.ensembles)
            history.record("fence", "ok", ledger.qualified_name, last_entry_id=closed.last_entry_id)
            finish(scenario, client, history, [ledger])
        finally:
            cluster.resume(hung)
            cluster.restart(hung)  # it may have lost its registration while stopped
            cluster.wait_bookies_registered(4)


def test_fen5_writer_crash_then_readers_agree(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("FEN-5", N=N, readers=3)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.001)
        writer.start().wait_acked(400)
        cluster.kill("gateway")  # the gateway holds the write handle: the writer crashes
        writer.join()
        cluster.start_process("gateway")
        client.recover_ledger(ledger.qualified_name, PASSWORD)
        ends = set()
        for _ in range(3):
            with client_for(cluster) as reader:
                opened = reader.open_ledger(ledger.qualified_name, PASSWORD)
                ends.add((opened.metadata.state, opened.metadata.last_entry_id))
        scenario.figures["distinct_ends_seen"] = len(ends)
        scenario.figures["ledgers_left_open"] = sum(1 for state, _ in ends if state != 3)
        finish(scenario, client, history, [ledger])
    assert len(ends) == 1


def test_fen6_five_concurrent_recoveries_agree(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("FEN-6", N=N, recoverers=5)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed)
        writer.start().wait_acked(1000)
        cluster.kill("gateway")
        writer.join()
        cluster.start_process("gateway")

        def recover(_: int) -> int:
            with client_for(cluster) as recoverer:
                return recoverer.recover_ledger(ledger.qualified_name, PASSWORD).last_entry_id

        with ThreadPoolExecutor(5) as pool:
            ends = list(pool.map(recover, range(5)))
        scenario.figures["distinct_lac_values"] = len(set(ends))
        finish(scenario, client, history, [ledger])
    assert len(set(ends)) == 1


def test_fen7_wrong_password_fences_nothing(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("FEN-7", N=1000)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, count=1000, pace_seconds=0.002)
        writer.start().wait_acked(100)
        with pytest.raises(QuireClientError) as caught:
            client.recover_ledger(ledger.qualified_name, b"wrong-password")
        scenario.figures["bad_client_error"] = caught.value.code.name
        writer.join()
        scenario.figures["fenced_by_bad_client"] = int(writer.error is not None)
        assert caught.value.code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        assert writer.error is None, writer.error
        finish(scenario, client, history, [ledger])


def test_fen8_fence_survives_bookie_restarts(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("FEN-8", N=1000)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, count=1000)
        writer.start().wait_acked(300)
        cluster.kill("gateway")
        writer.join()
        cluster.start_process("gateway")
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        ensemble = list(metadata.ensembles[-1].bookie_ids)
        outcome: dict[str, object] = {}

        def recover() -> None:
            with client_for(cluster) as recoverer:
                try:
                    outcome["closed"] = recoverer.recover_ledger(ledger.qualified_name, PASSWORD)
                except QuireClientError as exc:
                    outcome["error"] = exc

        thread = threading.Thread(target=recover)
        thread.start()
        cluster.restart(name_of(cluster, ensemble[1]))  # mid-recovery
        thread.join(60)
        if "error" in outcome:  # the restart can break the first attempt: recovery is idempotent
            outcome["closed"] = client.recover_ledger(ledger.qualified_name, PASSWORD)
        for bookie_id in ensemble:
            cluster.restart(name_of(cluster, bookie_id))
        cluster.wait_bookies_registered(4)
        # A stale writer's add counts as accepted only if Qa members of its
        # write set take it; fencing may legitimately skip one bookie (the
        # coverage rule), so single-bookie acceptances are reported apart.
        accepted_writes, single_bookie_acceptances = stale_adds_accepted(ensemble, ledger, writer.acked + 1000)
        scenario.figures["stale_writes_accepted_after_restart"] = accepted_writes
        scenario.figures["single_bookie_stale_acceptances"] = single_bookie_acceptances
        finish(scenario, client, history, [ledger])
    assert accepted_writes == 0


def test_fen2_fence_rpc_rejected_on_one_bookie(cluster: LocalCluster, scenario: Scenario) -> None:
    """The test-only gRPC interceptor rejects FenceLedger on one ensemble member:
    the coverage rule still lets recovery finish, and nothing acked is lost."""
    seed = scenario.start("FEN-2-interceptor", N=500, rule="FenceLedger rejected UNAVAILABLE on one bookie")
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        target = name_of(cluster, metadata.ensembles[0].bookie_ids[2])
        process = cluster.processes[target]
        process.env["QUIRE_FAULT_INJECTION_RULES"] = '[{"method": "FenceLedger", "action": "reject"}]'
        cluster.restart(target)
        try:
            cluster.wait_bookies_registered(4)
            (writer,) = writers(cluster, [ledger], history, seed, count=500)
            writer.start().join()
            started = time.monotonic()
            closed = client.recover_ledger(ledger.qualified_name, PASSWORD)
            history.record("fence", "ok", ledger.qualified_name, last_entry_id=closed.last_entry_id)
            scenario.figures["recovery_seconds"] = round(time.monotonic() - started, 2)
            scenario.figures["warning_logged"] = "FAULT INJECTION ENABLED" in cluster.log_path(target).read_text()
            finish(scenario, client, history, [ledger])
        finally:
            del process.env["QUIRE_FAULT_INJECTION_RULES"]
            cluster.restart(target)
            cluster.wait_bookies_registered(4)
    assert scenario.figures["warning_logged"]


def test_ops1_met4_paused_bookie_resumes_after_recovery(cluster: LocalCluster, scenario: Scenario) -> None:
    """OPS-1 (a GC-pause analogue) and MET-4: SIGSTOP an ensemble member past its
    lease while the writer keeps going, recover the ledger, SIGCONT. The writer's
    adds queued at the paused bookie must not become acknowledged; the bookie
    comes back with one registration."""
    seed = scenario.start("OPS-1+MET-4", N=N, pause_seconds=6, lease_ttl_seconds=3)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        writer.start().wait_acked(300)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        paused_id = metadata.ensembles[-1].bookie_ids[0]
        paused = name_of(cluster, paused_id)
        cluster.pause(paused)
        paused_at = time.monotonic()
        try:
            wait_until(
                "the registry dropping a paused bookie",
                lambda: not any(r.bookie_id == paused_id for r in registered_bookies(cluster)),
            )
            scenario.figures["seconds_to_drop_registration"] = round(time.monotonic() - paused_at, 2)
            time.sleep(max(0.0, 6 - (time.monotonic() - paused_at)))
            closed = client.recover_ledger(ledger.qualified_name, PASSWORD)
            history.record("fence", "ok", ledger.qualified_name, last_entry_id=closed.last_entry_id)
        finally:
            cluster.resume(paused)
        writer.join()
        resumed_at = time.monotonic()
        registered = False
        while time.monotonic() - resumed_at < 15:
            records = [r for r in registered_bookies(cluster) if r.bookie_id == paused_id]
            if records:
                registered = True
                scenario.figures["duplicate_registrations"] = len(records) - 1
                break
            time.sleep(0.2)
        scenario.figures["re_registered_after_resume"] = registered
        if registered:
            scenario.figures["seconds_to_re_register"] = round(time.monotonic() - resumed_at, 2)
        verdict = finish(scenario, client, history, [ledger])
        scenario.figures["zombie_writes_accepted"] = verdict.adds_after_fence
    if not registered:
        cluster.restart(paused)
    cluster.wait_bookies_registered(4)
    assert verdict.adds_after_fence == 0


def test_met8_paused_writer_gateway_is_fenced_not_locked_out(cluster: LocalCluster, scenario: Scenario) -> None:
    """The writer's gateway hangs (SIGSTOP) for longer than any lease in the
    cluster with adds in flight; a second gateway recovers the ledger; the
    first one resumes and tries to finish its adds. Nothing but fencing and the
    metadata compare-and-swap stops it: Quire holds no writer lock or lease."""
    seed = scenario.start("MET-8", N=N, pause_seconds=5, lease_ttl_seconds=3, gateways=2)
    history = History()
    second = cluster.add_gateway("gateway-2")
    try:
        with client_for(cluster) as client, QuireClient(second, timeout=30) as other:
            ledger = new_ledger(client, history)
            (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
            writer.start().wait_acked(300)
            cluster.pause("gateway")
            time.sleep(5)  # past the bookies' 3 s leases; the writer's stream keeps sending into the socket
            acked_before_recovery = writer.acked
            closed = other.recover_ledger(ledger.qualified_name, PASSWORD)
            history.record("fence", "ok", ledger.qualified_name, last_entry_id=closed.last_entry_id)
            cluster.resume("gateway")
            writer.join()
            assert writer.error is not None, "the paused writer must not finish its ledger"
            scenario.figures.update(
                {
                    "writer_error": writer.error.reason or writer.error.code.name,
                    "acked_before_pause_ended": acked_before_recovery + 1,
                    "writer_acked_total": writer.acked + 1,
                    "closed_at": closed.last_entry_id,
                }
            )
            verdict = finish(scenario, client, history, [ledger])
            scenario.figures["stale_writes_accepted"] = verdict.adds_after_fence
    finally:
        cluster.resume("gateway")
        cluster.terminate("gateway-2")
    assert writer.error.code == grpc.StatusCode.FAILED_PRECONDITION, writer.error
    assert verdict.adds_after_fence == 0 and closed.last_entry_id >= writer.acked
