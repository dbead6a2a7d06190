"""Partitions across the whole mesh (PART rows), in the network lab with
every process in a namespace of its own (netns.py): three etcd members, the
registry, placement, three bookies and three gateways, the test's clients in
the root namespace. One cluster serves the module; each row heals what it cut.

- PART-1: a ledger's owner gateway is cut from the registry and etcd (not from
  its bookies, not from its clients) while its client streams to it; another
  gateway takes the next write once the owner's session has lapsed.
- PART-3: etcd split 1 | 2, first with the registry on the one member's side
  (metadata stops, with nothing half-done; closed ledgers read on from the
  gateways' caches; appends go on), then on the two members' side (metadata
  goes on).
- PART-5: a flapping link between a gateway and one bookie, and between the
  registry and the etcd members.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import grpc
import pytest

from quire.common.v1 import common_pb2
from quire.registry.v1 import registry_pb2, registry_pb2_grpc
from quire_api.ids import LedgerId
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from quire_gateway.ownership.sessions import session_role
from tests.faults.lab import lab_cluster
from tests.faults.netns import NetLab
from tests.faults.owner_writes import OWNER_GONE, StreamingWriter, ledger_on_first_gateway, refusal_after_waiting
from tests.faults.report import Scenario
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

SESSION_SECONDS = 3
IGNORE_FENCE = "QUIRE_BOOKIE_FAULT_UNSAFE_IGNORE_FENCE"
# What a write through another gateway may be answered while the cut owner's session lives.
OWNER_CUT_OFF = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "ERROR_REASON_LEDGER_NOT_WRITABLE_HERE"}
STOPPED = {"ERROR_REASON_LEDGER_FENCED", "ERROR_REASON_LEDGER_CLOSED", OWNER_GONE}


@dataclass
class Mesh:
    net: NetLab
    cluster: LocalCluster

    def session_lease(self, gateway: str) -> int:
        """The lease the registry has the session of gateway process `gateway` on (0: none)."""
        session = self.gateway_status(gateway)["session"]
        name = str(session["name"])  # type: ignore[index]
        with grpc.insecure_channel(self.cluster.registry_target) as channel:
            stub = registry_pb2_grpc.RegistryServiceStub(channel)
            answer = stub.GetLeader(registry_pb2.GetLeaderRequest(role=session_role(name)), timeout=10)
        return answer.lease_id if answer.leader.holder == name else 0

    def gateway_status(self, name: str) -> dict[str, object]:
        address = self.cluster.gateway_http(name)
        with urllib.request.urlopen(f"http://{address}/status", timeout=10) as response:
            return dict(json.loads(response.read()))

    def settle(self) -> None:
        """After a row: every cut healed, every process running, every gateway holding a session."""
        self.net.heal()
        for name in self.cluster.processes:
            self.cluster.resume(name)
            self.cluster.start_process(name)
        for gateway in self.cluster.gateway_names:
            wait_until(f"{gateway} holding a session again", partial(self.session_lease, gateway))


@pytest.fixture(scope="module")
def shared_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    env = {"QUIRE_GATEWAY_SESSION_SECONDS": str(SESSION_SECONDS)}
    with lab_cluster(tmp_path_factory.mktemp("mesh"), gateways=3, etcd_members=3, env=env) as (net, cluster):
        yield Mesh(net, cluster)


@pytest.fixture
def mesh(shared_mesh: Mesh) -> Iterator[Mesh]:
    try:
        yield shared_mesh
    finally:
        shared_mesh.settle()


# -- PART-1: the owner cut from the metadata side ---------------------------------------


def cut_the_owner_from_the_metadata(mesh: Mesh, scenario: Scenario) -> tuple[LedgerId, StreamingWriter, int]:
    """PART-1's fault: a client streams to the ledger's owner; in a burst the
    owner is cut from the registry and every etcd member, and stays cut while
    its session lapses; then another gateway's write recovers the ledger.
    Returns the ledger, the stream's writer and the end the recovery fixed."""
    cluster = mesh.cluster
    ledger = ledger_on_first_gateway(cluster)
    lease = mesh.session_lease("gateway")
    client = QuireClient(cluster.gateway_targets[0], cluster.registry_target, timeout=30, resume_attempts=0)
    writer = StreamingWriter(client, ledger).start()
    writer.wait_for_the_burst()
    mesh.net.isolate("gateway", from_=["registry", *cluster.etcd_names])
    cut_at = time.monotonic()
    scenario.figures["acked_at_cut"] = writer.acked
    # The owner cannot renew; once the registry lets its session go, a write elsewhere recovers the ledger.
    wait_until("the cut owner's session lapsing", lambda: mesh.session_lease("gateway") != lease, deadline_seconds=60)
    scenario.figures["seconds_to_lapse"] = round(time.monotonic() - cut_at, 2)
    answer = refusal_after_waiting(
        cluster.gateway_targets[1], cluster.registry_target, ledger, OWNER_CUT_OFF, 60, call_timeout=5
    )
    writer.join()
    client.close()
    assert answer.reason == OWNER_GONE, answer
    end = int(answer.details["last_entry_id"])
    scenario.figures.update(
        recovered_end=end,
        acked_by_the_old_owner=writer.acked,
        writer_error=writer.error.reason if writer.error else "",
    )
    return ledger, writer, end


def test_part1_an_owner_cut_from_the_metadata_is_fenced_out(mesh: Mesh, scenario: Scenario) -> None:
    """PART-1: no entry the cut owner acknowledged lies past the end the
    recovery fixed; its stream is refused and its client learns it; the
    ledger is closed at one end that every gateway reads alike (the cut owner
    too, once healed); after the heal the old owner holds a new session and
    refuses the ledger's writes."""
    scenario.start("PART-1", gateways=3, etcd_members=3, session_seconds=SESSION_SECONDS)
    cluster = mesh.cluster
    ledger, writer, end = cut_the_owner_from_the_metadata(mesh, scenario)
    assert writer.acked - 1 <= end, "an entry acknowledged by the cut owner lies past the recovered end"
    assert writer.error is not None, "the cut owner's stream went on after it was recovered out"
    assert writer.error.reason in STOPPED | {"ERROR_REASON_LEDGER_NOT_WRITABLE_HERE"}, writer.error
    old_lease = mesh.session_lease("gateway")
    mesh.net.heal()
    wait_until("the old owner holding a session again", lambda: mesh.session_lease("gateway") not in {0, old_lease})
    lengths = set()
    for target in cluster.gateway_targets:
        with QuireClient(target, cluster.registry_target, timeout=30) as reader:
            metadata = wait_until(f"{target} reading the ledger closed", partial(closed, reader, ledger))
            assert metadata.last_entry_id == end
            lengths.add(sum(1 for _ in reader.read(ledger)))
    assert lengths == {end + 1}
    with QuireClient(cluster.gateway_targets[0], cluster.registry_target, timeout=30) as old_owner:
        with pytest.raises(QuireClientError) as refused:
            old_owner.add_entry(ledger, b"after the heal")
    scenario.figures["old_owner_answer"] = refused.value.reason
    assert refused.value.reason in STOPPED, refused.value
    handles = mesh.gateway_status("gateway").get("open_write_handles")
    scenario.figures["old_owner_open_write_handles"] = handles
    assert handles == 0, "the old owner still holds a write handle for the recovered ledger"


def closed(reader: QuireClient, ledger: LedgerId) -> common_pb2.LedgerMetadata | None:
    metadata, _ = reader.ledger_metadata(ledger)
    return metadata if metadata.state == common_pb2.LEDGER_STATE_CLOSED else None


def test_part1_control_without_fencing_the_cut_owner_acknowledges_past_the_end(mesh: Mesh, scenario: Scenario) -> None:
    """Positive control: with QUIRE_BOOKIE_FAULT_UNSAFE_IGNORE_FENCE the
    bookies take the cut owner's adds after the recovery, and it acknowledges
    entries past the end the recovery fixed."""
    scenario.start("PART-1-control", gateways=3, **{IGNORE_FENCE: "true"})
    cluster = mesh.cluster
    for name in cluster.bookie_names:
        cluster.processes[name].env[IGNORE_FENCE] = "true"
        cluster.restart(name)
    try:
        _, writer, end = cut_the_owner_from_the_metadata(mesh, scenario)
    finally:
        for name in cluster.bookie_names:
            del cluster.processes[name].env[IGNORE_FENCE]
            cluster.restart(name)
    assert writer.acked - 1 > end, "positive control: without fencing the cut owner acknowledged no more"
