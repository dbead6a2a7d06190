"""The auditor restores copies (ENS-10, COR-7) and is one per cluster (OPS-8).

ENS-10: E=3 Qw=3 Qa=2 on 4 bookies; a member is SIGKILLed mid-stream and
restarted a few seconds later. The writer goes on with two copies, replaces
the member, and marks the entries confirmed without it; the auditor copies
them back to it while the ledger is still open. Controls: with the marks off
the copies stay at two for good (the check catches it), and with the marks
off but the scrub on, the scrub finds them and they are restored.

COR-7: copies damaged (a flipped bit under an HMAC digest the bookie cannot
check) or gone (deleted from a stopped bookie's RocksDB) on a closed and on
an open ledger, which no reader touches: the scrub finds both and the
auditor repairs them. Control: with the scrub off they stay.

COR-8: one replica of a closed ledger's entries replaced, in a stopped
bookie's RocksDB, by that bookie's copy of another entry of the ledger:
whole, with a digest that checks. The scrub checks the header's ledger and
entry id too, finds them, and the auditor repairs them. Control: the
digest alone passes every planted copy.

OPS-8: three gateways, one auditor. Killing the holder hands the role to a
standby; the registry, /status and `quire recovery status` name it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from quire_api.ids import LedgerId
from quire_api.replication import markers
from quire_bookie.storage import EntryStore, entry_key
from quire_client.client import QuireClient
from quire_client.cluster import LocalCluster
from quire_common.entry import Digester, DigestType, unpack_entry
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.faults.history import History
from tests.faults.lab import READS_REACH_BOOKIES, fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import PASSWORD, admin_for, client_for, finish, new_ledger, thinly_replicated, writers
from tests.faults.test_ensemble_and_corruption import corrupt_replicas, hmac_ledger

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

ENTRIES = 1500
SETTINGS = {
    **READS_REACH_BOOKIES,
    "QUIRE_AUDITOR_INTERVAL_SECONDS": "1",
    "QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS": "120",  # the victim returns long before it counts as lost
    "QUIRE_AUDITOR_LEASE_SECONDS": "3",
    "QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS": "2",
    "QUIRE_AUDITOR_SCRUB_SAMPLE_ENTRIES": "64",
}
SCRUB_ON = {"QUIRE_AUDITOR_SCRUB_ENTRIES_PER_SECOND": "50000"}
SCRUB_OFF = {"QUIRE_AUDITOR_SCRUB_ENTRIES_PER_SECOND": "0"}
MARKS_OFF = {"QUIRE_GATEWAY_FAULT_UNSAFE_NO_REPAIR_MARKS": "true"}
# How long a control waits to show that nothing restores the copies: many
# auditor rounds and scrub pass intervals.
CONTROL_WAIT_SECONDS = 12.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with fault_cluster(tmp_path_factory.mktemp("auditor"), bookies=4, env=SETTINGS) as local:
        yield local


def gateway_with(cluster: LocalCluster, settings: dict[str, str]) -> None:
    """Restart the gateway with `settings` on top of the module's."""
    env = cluster.processes["gateway"].env
    for name in (*SCRUB_ON, *MARKS_OFF):
        env.pop(name, None)
    env.update(settings)
    cluster.restart("gateway")


def wait_for(what: str, condition: Any, timeout: float = 120.0) -> float:
    """Seconds until `condition()` held; fails naming `what` after `timeout`."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"gave up waiting: {what}"
        time.sleep(0.5)
    return round(time.monotonic() - started, 2)


def crash_a_member_mid_stream(
    cluster: LocalCluster, client: QuireClient, history: History, seed: int
) -> tuple[LedgerId, int, dict[str, tuple[int, int | None]]]:
    """One E=3 Qw=3 Qa=2 ledger; a member SIGKILLed at entry 200 and started
    again 5 s later while the writer goes on. Returns the (still open) ledger,
    how many entries of its replaced segment the victim's own RocksDB lacked
    while it was down, and the ledger's repair marks then: both read before it
    is back, since the auditor may then restore the copies and clear the marks
    before anything else looks."""
    ledger = new_ledger(client, history, write_quorum=3)
    metadata, _ = client.ledger_metadata(ledger.qualified_name)
    victim_id = metadata.ensembles[0].bookie_ids[1]
    victim = next(n for n in cluster.bookie_names if cluster.bookie_id(n) == victim_id)
    (writer,) = [w.start() for w in writers(cluster, [ledger], history, seed, count=ENTRIES, pace_seconds=0.003)]
    writer.wait_acked(200)
    cluster.kill(victim)
    killed_at = time.monotonic()
    wait_for(
        "the writer replacing the killed member",
        lambda: len(client.ledger_metadata(ledger.qualified_name)[0].ensembles) >= 2,
    )
    # Read while the victim is down: once it is back the auditor may repair the marked copies
    # and clear the marks before the writer finishes.
    marks_at_the_change = dict(markers(client.ledger_metadata(ledger.qualified_name)[0]))
    store = EntryStore(cluster.data_dir / victim / "rocksdb", read_only=True)
    try:
        victim_lacked = len(store.missing(ledger, list(range(closed_segment_end(client, ledger) + 1))))
    finally:
        store.close()
    time.sleep(max(0.0, 5 - (time.monotonic() - killed_at)))
    cluster.start_process(victim)
    cluster.wait_bookies_registered(4)
    writer.join()
    assert writer.error is None, writer.error
    return ledger, victim_lacked, marks_at_the_change


def closed_segment_end(client: QuireClient, ledger: LedgerId) -> int:
    """The last entry of every segment but the open last one."""
    metadata, _ = client.ledger_metadata(ledger.qualified_name)
    assert len(metadata.ensembles) >= 2, "the crash caused no ensemble change"
    return int(metadata.ensembles[-1].first_entry_id) - 1


def run_crash(
    cluster: LocalCluster, scenario: Scenario, row: str, settings: dict[str, str]
) -> tuple[LedgerId, int, History]:
    seed = scenario.start(
        row, N=ENTRIES, E=3, Qw=3, Qa=2, bookies=4, fault="SIGKILL a member at entry 200, back 5 s later"
    )
    gateway_with(cluster, settings)
    history = History()
    with client_for(cluster) as client:
        ledger, victim_lacked, marks = crash_a_member_mid_stream(cluster, client, history, seed)
        end = closed_segment_end(client, ledger)
        scenario.figures.update({"first_entry_of_new_ensemble": end + 1, "markers": marks})
        scenario.figures["victim_lacked_while_down"] = victim_lacked
    return ledger, end, history


def test_ens10_copies_a_replaced_member_missed_are_restored(cluster: LocalCluster, scenario: Scenario) -> None:
    ledger, end, history = run_crash(cluster, scenario, "ENS-10", SCRUB_OFF)
    with client_for(cluster) as client:
        # The auditor copies the entries first, then removes the marks with a compare-and-swap: wait
        # for both, or a look between the two sees the copies back and the marks still there.
        scenario.figures["restore_seconds"] = wait_for(
            "the auditor restoring the third copy and removing the marks",
            lambda: (
                thinly_replicated(cluster, client, ledger, end) == 0
                and not markers(client.ledger_metadata(ledger.qualified_name)[0])
            ),
        )
        scenario.figures["markers_after"] = dict(markers(client.ledger_metadata(ledger.qualified_name)[0]))
        finish(scenario, client, history, [ledger])
    assert scenario.figures["victim_lacked_while_down"] > 0, "the crash left no entry short of a copy"
    assert scenario.figures["markers"] and not scenario.figures["markers_after"]


def test_ens10_control_without_the_marks_the_copies_stay_missing(cluster: LocalCluster, scenario: Scenario) -> None:
    ledger, end, _ = run_crash(cluster, scenario, "ENS-10-control", {**SCRUB_OFF, **MARKS_OFF})
    time.sleep(CONTROL_WAIT_SECONDS)
    with client_for(cluster) as client:
        scenario.figures["thin_entries_after"] = thinly_replicated(cluster, client, ledger, end)
    assert not scenario.figures["markers"]
    assert scenario.figures["thin_entries_after"] > 0, "positive control: without marks nothing restores the copies"


def test_ens10_scrub_finds_what_the_marks_missed(cluster: LocalCluster, scenario: Scenario) -> None:
    ledger, end, history = run_crash(cluster, scenario, "ENS-10-scrub", {**SCRUB_ON, **MARKS_OFF})
    with client_for(cluster) as client:
        scenario.figures["restore_seconds"] = wait_for(
            "the scrub finding the missing copies and the auditor restoring them",
            lambda: thinly_replicated(cluster, client, ledger, end) == 0,
        )
        wait_for("the auditor's published figures", lambda: int(auditor_figures(cluster)["scrub_missing"]) > 0)
        scenario.figures["scrub"] = auditor_figures(cluster)
        finish(scenario, client, history, [ledger])
    assert scenario.figures["victim_lacked_while_down"] > 0 and int(scenario.figures["scrub"]["scrub_missing"]) > 0


def auditor_figures(cluster: LocalCluster) -> dict[str, str]:
    with admin_for(cluster) as admin:
        leader = admin.auditor()
    return {"holder": leader.holder, **dict(leader.properties)}


def rewrite_first_replica(
    cluster: LocalCluster,
    client: QuireClient,
    ledger: LedgerId,
    entry_ids: range,
    rewrite: Callable[[EntryStore, list[int]], None],
) -> None:
    """Change the copies the ledger's first bookie holds of `entry_ids`
    straight in its RocksDB, with the bookie stopped, as a disk or a storage
    bug would; `rewrite` gets the store and the entries that bookie holds."""
    metadata, _ = client.ledger_metadata(ledger.qualified_name)
    ensemble = metadata.ensembles[0].bookie_ids
    bookie_id = ensemble[0]
    name = next(n for n in cluster.bookie_names if cluster.bookie_id(n) == bookie_id)
    cluster.terminate(name)
    store = EntryStore(cluster.data_dir / name / "rocksdb")
    try:
        held = [e for e in entry_ids if bookie_id in [ensemble[(e + i) % 3] for i in range(2)]]
        rewrite(store, held)
    finally:
        store.close()
    cluster.start_process(name)
    cluster.wait_bookies_registered(4)


def delete_copies(cluster: LocalCluster, client: QuireClient, ledger: LedgerId, entry_ids: range) -> None:
    def delete(store: EntryStore, held: list[int]) -> None:
        for entry_id in held:
            store._entries.delete(entry_key(ledger, entry_id))

    rewrite_first_replica(cluster, client, ledger, entry_ids, delete)


def plant_misplaced_copies(
    cluster: LocalCluster, client: QuireClient, ledger: LedgerId, entry_ids: range
) -> list[bytes]:
    """Store under each entry the first bookie holds the copy of the entry it
    holds next: whole, its digest good, but another entry. Returns the copies
    planted."""
    planted: list[bytes] = []

    def misplace(store: EntryStore, held: list[int]) -> None:
        copies: dict[int, bytes] = {}
        for entry_id in held:
            stored = store._entries.get(entry_key(ledger, entry_id))
            assert stored is not None, f"the bookie holds no copy of entry {entry_id}"
            copies[entry_id] = bytes(stored)
        for entry_id, other in zip(held, held[1:] + held[:1], strict=True):
            store._entries.put(entry_key(ledger, entry_id), copies[other])
            planted.append(copies[other])

    rewrite_first_replica(cluster, client, ledger, entry_ids, misplace)
    return planted


def damage(cluster: LocalCluster, client: QuireClient, history: History, seed: int) -> list[tuple[LedgerId, int]]:
    """A closed and an open ledger of 60 entries, each with one replica of
    entries 0..29 damaged and another's copies of 30..59 deleted. Returns
    (ledger, last entry to check): an open ledger's last entry carries the
    LAC before it, so its LAC stands at 58."""
    made = []
    for closed in (True, False):
        ledger = hmac_ledger(client, history, 60)
        corrupt_replicas(client, ledger, range(60), seed, replicas=0)  # every copy good and readable
        corrupt_replicas(client, ledger, range(30), seed, replicas=1)
        delete_copies(cluster, client, ledger, range(30, 60))
        if closed:
            client.close_ledger(ledger.qualified_name)
        made.append((ledger, 59 if closed else 58))
    return made


def test_cor7_scrub_finds_and_repairs_damaged_and_missing_copies(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("COR-7", M=60, ledgers="1 closed, 1 open", damage="30 bit-flipped copies, 30 deleted, each")
    gateway_with(cluster, SCRUB_OFF)
    history = History()
    with client_for(cluster) as client:
        made = damage(cluster, client, history, seed)
        scenario.figures["thin_entries_at_start"] = sum(
            thinly_replicated(cluster, client, ledger, last) for ledger, last in made
        )
        gateway_with(cluster, SCRUB_ON)
        scenario.figures["repair_seconds"] = wait_for(
            "the scrub finding the damaged and missing copies and the auditor repairing them",
            lambda: sum(thinly_replicated(cluster, client, ledger, last) for ledger, last in made) == 0,
        )
        # The holder publishes its figures with each lease renewal (a third of the TTL).
        wait_for("the auditor's published figures", lambda: int(auditor_figures(cluster)["repaired_entries"]) > 0)
        figures = auditor_figures(cluster)
        scenario.figures["scrub"] = figures
    # 30 damaged + 20 deleted of the closed ledger, 30 + 19 up to entry 58 of the open one.
    assert scenario.figures["thin_entries_at_start"] == 99
    assert int(figures["scrub_damaged"]) > 0 and int(figures["scrub_missing"]) > 0
    assert int(figures["repaired_entries"]) > 0


def test_cor7_control_without_the_scrub_the_damage_stays(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("COR-7-control", M=60, scrub="off")
    gateway_with(cluster, SCRUB_OFF)
    history = History()
    with client_for(cluster) as client:
        made = damage(cluster, client, history, seed)
        time.sleep(CONTROL_WAIT_SECONDS)
        scenario.figures["thin_entries_after"] = sum(
            thinly_replicated(cluster, client, ledger, last) for ledger, last in made
        )
    assert scenario.figures["thin_entries_after"] == 99, "positive control: without the scrub nothing finds the damage"


@pytest.mark.parametrize("digest", [DigestType.HMAC, DigestType.CRC32C], ids=["hmac", "crc32c"])
def test_cor8_scrub_finds_a_copy_of_another_entry(
    cluster: LocalCluster, scenario: Scenario, digest: DigestType
) -> None:
    # An HMAC ledger's sample is read back and verified by the gateway (bookies
    # do not hold its key); a CRC32C ledger's is verified on the bookies.
    row = "COR-8" if digest is DigestType.HMAC else "COR-8-crc32c"
    seed = scenario.start(row, M=60, digest=digest.name, damage="a replica of entries 0..29 is another entry's copy")
    gateway_with(cluster, SCRUB_OFF)
    history = History()
    with client_for(cluster) as client:
        if digest is DigestType.HMAC:
            ledger = hmac_ledger(client, history, 60)
            corrupt_replicas(client, ledger, range(60), seed, replicas=0)  # known, good copies
        else:
            metadata = client.create_ledger(
                ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=PASSWORD, digest_type=digest
            )
            ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
            for entry_id in range(60):
                client.add_entry(ledger.qualified_name, f"entry {entry_id}".encode())
        client.close_ledger(ledger.qualified_name)
        planted = plant_misplaced_copies(cluster, client, ledger, range(30))
        digester = Digester(digest, PASSWORD)
        # Positive control: a check of the digest alone passes every planted copy.
        scenario.figures["planted_pass_digest_check"] = sum(1 for data in planted if unpack_entry(data, digester))
        scenario.figures["thin_entries_at_start"] = thinly_replicated(cluster, client, ledger)
        gateway_with(cluster, SCRUB_ON)
        scenario.figures["repair_seconds"] = wait_for(
            "the scrub finding the misplaced copies and the auditor repairing them",
            lambda: thinly_replicated(cluster, client, ledger) == 0,
        )
        wait_for("the auditor's published figures", lambda: int(auditor_figures(cluster)["scrub_damaged"]) > 0)
        scenario.figures["scrub"] = auditor_figures(cluster)
    thin_at_start = scenario.figures["thin_entries_at_start"]
    assert scenario.figures["planted_pass_digest_check"] == len(planted) == thin_at_start > 0


def status(http_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/status", timeout=10) as response:
        return json.loads(response.read())


def holder(cluster: LocalCluster) -> str:
    with grpc.insecure_channel(cluster.registry_target) as channel:
        stub = registry_pb2_grpc.RegistryServiceStub(channel)
        return stub.GetLeader(registry_pb2.GetLeaderRequest(role="auditor"), timeout=10).leader.holder


def test_ops8_one_auditor_and_a_standby_takes_over(cluster: LocalCluster, scenario: Scenario) -> None:
    scenario.start("OPS-8", gateways=3, lease_seconds=3, fault="SIGKILL the gateway holding the auditor role")
    gateway_with(cluster, SCRUB_ON)
    extra = {name: cluster.add_gateway(name) for name in ("gateway-b", "gateway-c")}
    ports = {"gateway": cluster.processes["gateway"].env["QUIRE_GATEWAY_HTTP_PORT"]}
    ports.update({name: cluster.processes[name].env["QUIRE_GATEWAY_HTTP_PORT"] for name in extra})
    try:
        wait_for("a gateway to hold the auditor role", lambda: holder(cluster) != "")

        def active() -> list[str]:
            alive = [name for name in ports if cluster.pid(name) is not None]
            return [name for name in alive if status(int(ports[name]))["auditor"]["active"]]

        wait_for("exactly one gateway to call itself the auditor", lambda: len(active()) == 1)
        first_holder, (first_name,) = holder(cluster), active()
        scenario.figures["holder"] = first_name
        cluster.kill(first_name)
        scenario.figures["takeover_seconds"] = wait_for(
            "a standby to take the auditor role", lambda: holder(cluster) not in ("", first_holder), timeout=60
        )
        wait_for("the new holder to call itself the auditor", lambda: len(active()) == 1)
        (second_name,) = active()
        scenario.figures["new_holder"] = second_name
        shown = subprocess.run(
            [str(Path(sys.executable).parent / "quire"), "--gateway", cluster.gateway_target if second_name == "gateway"
             else extra[second_name], "--registry", cluster.registry_target, "recovery", "status", "--output", "json"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        scenario.figures["recovery_status_holder"] = json.loads(shown)["auditor"]["holder"]
        second_holder = holder(cluster)
    finally:
        for name in extra:
            cluster.terminate(name)
        if cluster.pid("gateway") is None:
            cluster.start_process("gateway")
    assert second_name != first_name
    assert scenario.figures["recovery_status_holder"] == second_holder != first_holder
