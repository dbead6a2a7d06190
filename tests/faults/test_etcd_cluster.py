"""MET-7: a three-member etcd whose leader hangs. The registry is given all
three members; the etcd leader is SIGSTOPped while writers append and a
churn of creates and closes keeps the metadata busy. Metadata operations may
pause or fail UNAVAILABLE while the others elect a new leader, then go on;
appends to open ledgers never need etcd; the ledger metadata histories stay
free of version regressions and no acknowledged entry is lost.

The isolation is a hung process rather than blackholed peer traffic: on
loopback there is no route to cut between two members only."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from quire_api.ids import LedgerId
from quire_client import QuireClientError
from quire_client.cluster import LocalCluster, etcd_command, free_port
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import client_for, finish, latency_figures, new_ledger, writers
from tests.faults.workload import observe_metadata
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

PAUSE_SECONDS = 8
LEASE_TTL_SECONDS = 15


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def status(self) -> dict[str, object] | None:
        request = urllib.request.Request(f"http://{self.endpoint}/v3/maintenance/status", data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=1) as response:
                return dict(json.loads(response.read()))
        except (OSError, ValueError):
            return None


@pytest.fixture
def etcd_members(tmp_path: Path) -> Iterator[list[Member]]:
    binary = shutil.which("etcd") or "/usr/bin/etcd"
    members = [Member(f"m{i}", free_port(), free_port()) for i in range(3)]
    initial = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in members)
    extra_args = ["--initial-cluster-token", "quire-met7", "--heartbeat-interval", "100", "--election-timeout", "1000"]
    try:
        for member in members:
            command = etcd_command(
                binary,
                member.name,
                tmp_path / member.name,
                member.client_port,
                member.peer_port,
                extra_args,
                initial_cluster=initial,
            )
            with (tmp_path / f"{member.name}.log").open("ab") as log:
                member.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while leader_of(members) is None:
            assert time.monotonic() < deadline, "the three-member etcd elected no leader"
            time.sleep(0.2)
        yield members
    finally:
        for member in members:
            if member.process is not None and member.process.poll() is None:
                member.process.send_signal(signal.SIGCONT)
                member.process.kill()
                member.process.wait(timeout=10)


def leader_of(members: list[Member]) -> Member | None:
    """The member every answering member names as leader (None while they disagree)."""
    named = set()
    for member in members:
        status = member.status()
        if status is not None:
            named.add(str(status.get("leader")))
    if len(named) != 1:
        return None
    leader_id = named.pop()
    for member in members:
        status = member.status()
        if status is not None and str(dict(status.get("header", {})).get("member_id")) == leader_id:  # type: ignore[call-overload]
            return member
    return None


class MetadataChurn:
    """Creates and closes ledgers in a loop, recording each outcome."""

    def __init__(self, cluster: LocalCluster, history: History) -> None:
        self.cluster, self.history = cluster, history
        self.ok = self.failed = 0
        self.errors: dict[str, int] = {}
        self.longest_seconds = 0.0
        self.ledgers: list[LedgerId] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with client_for(self.cluster, timeout=15) as client:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    ledger = new_ledger(client, self.history)
                    self.ledgers.append(ledger)
                    client.add_entry(ledger.qualified_name, b"churn")
                    client.close_ledger(ledger.qualified_name)
                    observe_metadata(client, ledger.qualified_name, self.history)
                    self.ok += 1
                except QuireClientError as exc:
                    self.failed += 1
                    self.errors[exc.code.name] = self.errors.get(exc.code.name, 0) + 1
                self.longest_seconds = max(self.longest_seconds, time.monotonic() - started)
                time.sleep(0.05)

    def start(self) -> MetadataChurn:
        self._thread.start()
        return self

    def join(self) -> None:
        self.stop.set()
        self._thread.join(timeout=60)


def test_met7_etcd_leader_hangs_in_a_three_member_cluster(
    tmp_path_factory: pytest.TempPathFactory, etcd_members: list[Member], scenario: Scenario
) -> None:
    seed = scenario.start(
        "MET-7", etcd_members=3, pause_seconds=PAUSE_SECONDS, lease_ttl_seconds=LEASE_TTL_SECONDS, N=2000, ledgers=2
    )
    endpoints = ",".join(m.endpoint for m in etcd_members)
    history = History()
    # Leases outlive the registry's 5 s etcd request timeout: a request stuck on the hung member
    # must be able to fail and be retried on another member before a bookie's lease runs out.
    settings = {"QUIRE_ETCD_ENDPOINTS": endpoints, "QUIRE_BOOKIE_TTL_SECONDS": str(LEASE_TTL_SECONDS)}
    with fault_cluster(tmp_path_factory.mktemp("etcd3"), env=settings) as cluster:
        with client_for(cluster) as client:
            ledgers = [new_ledger(client, history) for _ in range(2)]
            running = [w.start() for w in writers(cluster, ledgers, history, seed, pace_seconds=0.004)]
            churn = MetadataChurn(cluster, history).start()
            running[0].wait_acked(200)
            leader = leader_of(etcd_members)
            assert leader is not None and leader.process is not None
            leader.process.send_signal(signal.SIGSTOP)
            paused = time.monotonic()
            try:
                others = [m for m in etcd_members if m is not leader]
                new_leader = wait_until("a new etcd leader", lambda: leader_of(others))
                scenario.figures["seconds_to_new_leader"] = round(time.monotonic() - paused, 2)
                time.sleep(max(0.0, PAUSE_SECONDS - (time.monotonic() - paused)))
            finally:
                leader.process.send_signal(signal.SIGCONT)
            ok_before, resumed = churn.ok, time.monotonic()
            # Metadata operations go on after the fault. One still stuck on the hung member when
            # it resumed may take up to the registry's 5 s etcd timeout (and a retry) to end first.
            while churn.ok - ok_before < 3 and time.monotonic() - resumed < 30:
                time.sleep(0.1)
            scenario.figures["seconds_to_metadata_progress_after_resume"] = round(time.monotonic() - resumed, 2)
            churn.join()
            for writer in running:
                writer.join()
                assert writer.error is None, writer.error
            scenario.figures.update(latency_figures(running))
            scenario.figures.update(
                {
                    "old_leader": leader.name,
                    "new_leader": new_leader.name,
                    "metadata_ops_ok": churn.ok,
                    "metadata_ops_failed": churn.failed,
                    "metadata_errors": churn.errors,
                    "metadata_ops_after_resume": churn.ok - ok_before,
                    "longest_metadata_op_seconds": round(churn.longest_seconds, 2),
                }
            )
            verdict = finish(scenario, client, history, ledgers)
    assert churn.ok - ok_before > 0, "metadata operations did not continue after the fault"
    assert set(churn.errors) <= {"UNAVAILABLE", "DEADLINE_EXCEEDED"}, churn.errors
    assert verdict.meta_version_regressions == 0
