"""Many gateways (GWY rows): a ledger is written by the gateway that created
it; writes through other gateways are relayed to it. A relaying gateway or the
owner itself is SIGKILLed in the middle of a write stream (GWY-1, GWY-2), or
the owner is SIGKILLed and started again under its name (GWY-4, and GWY-5 with
its clients writing through it alone).

These rows count for themselves what the checker counts for the others, from
the client's acknowledgements and a read-back of the closed ledger: every
payload is unique and written in order by one client, so an acknowledged
entry lost and an entry written twice are both plain to see.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from quire_api.ids import LedgerId
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from quire_proto.common.v1 import common_pb2
from tests.faults.lab import fault_cluster
from tests.faults.owner_writes import (
    ENTRIES,
    KILL_AT,
    OWNER_GONE,
    StreamingWriter,
    ledger_on_first_gateway,
    recovered_end,
    refusal_after_waiting,
    tally,
)
from tests.faults.report import Scenario

SESSION_SECONDS = 3
IGNORE_OWNER_SESSION = "QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION"
WAIT_FOR_PREVIOUS_SESSION = "QUIRE_GATEWAY_FAULT_WAIT_FOR_PREVIOUS_SESSION"
IGNORE_FENCE = "QUIRE_BOOKIE_FAULT_UNSAFE_IGNORE_FENCE"
# PART-2's owner stays paused this long: well past its session lease.
PAUSE_SECONDS = SESSION_SECONDS * 3
SESSION = "QUIRE_GATEWAY_SESSION_SECONDS"
# GWY-4's owner holds its session on a lease this long, so that what happens
# before the lease could lapse is told apart from what its lapse would do.
LONG_SESSION_SECONDS = 60
# GWY-5's control waits for the old lease to lapse: a shorter one keeps it quick.
CONTROL_SESSION_SECONDS = 15
# What a write through another gateway is refused with while the owner's session lives:
# after a restart (UNAVAILABLE, or relayed to a session the registry still holds), and
# while the owner is paused (its relayed write waits there until its deadline).
OWNER_ALIVE = {"UNAVAILABLE", "ERROR_REASON_LEDGER_NOT_WRITABLE_HERE"}
OWNER_PAUSED = {"UNAVAILABLE", "DEADLINE_EXCEEDED"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {"QUIRE_GATEWAY_SESSION_SECONDS": str(SESSION_SECONDS)}
    with fault_cluster(tmp_path_factory.mktemp("gateways"), env=env, gateways=3) as local:
        yield local


@pytest.fixture(autouse=True)
def every_gateway_running(cluster: LocalCluster) -> Iterator[None]:
    """Each row kills a gateway; the next starts with all three (and their default settings)."""
    yield
    for name in cluster.gateway_names:
        env = cluster.processes[name].env
        changed = env.pop(IGNORE_OWNER_SESSION, None) is not None
        changed = env.pop(WAIT_FOR_PREVIOUS_SESSION, None) is not None or changed
        if env.get(SESSION) != str(SESSION_SECONDS):
            env[SESSION] = str(SESSION_SECONDS)
            changed = True
        if changed:
            cluster.terminate(name)
        cluster.start_process(name)


def kill_a_relay_mid_stream(cluster: LocalCluster, scenario: Scenario, *, conditional: bool) -> tuple[int, int]:
    ledger = ledger_on_first_gateway(cluster)
    _, relay, other = cluster.gateway_targets
    with QuireClient(relay, timeout=30, gateways=[other], conditional_resume=conditional) as client:
        writer = StreamingWriter(client, ledger).start()
        writer.wait_for_the_burst()
        cluster.kill("gateway-2")
        scenario.figures["acked_at_kill"] = writer.acked
        writer.join()
        assert writer.error is None, writer.error
        scenario.figures.update(
            resumed_through=client.gateway, landed_on_resume=client.landed_on_resume, ack_gaps=writer.gaps
        )
        client.close_ledger(ledger)
        return tally(scenario, client, ledger, writer.acked)


def test_gwy1_a_relaying_gateway_dies_mid_stream(cluster: LocalCluster, scenario: Scenario) -> None:
    """The client writes through a gateway that relays to the owner; that
    gateway is SIGKILLed with entries in flight. The client resumes through a
    third gateway with a conditional append: entries that landed are
    recognised, the rest sent again."""
    scenario.start("GWY-1", gateways=3, entries=ENTRIES, kill_at=KILL_AT, fault="SIGKILL the relaying gateway")
    acked_lost, duplicates = kill_a_relay_mid_stream(cluster, scenario, conditional=True)
    assert scenario.figures["stored"] == ENTRIES and scenario.figures["ack_gaps"] == 0
    assert (acked_lost, duplicates) == (0, 0)


def test_gwy1_control_resuming_without_the_condition_writes_twice(cluster: LocalCluster, scenario: Scenario) -> None:
    """Positive control: the same, but the client resends its unacknowledged
    entries without expected_entry_id (conditional_resume=False); entries that
    had landed are written a second time and the count sees them."""
    scenario.start("GWY-1-control", gateways=3, entries=ENTRIES, kill_at=KILL_AT, conditional_resume=False)
    _, duplicates = kill_a_relay_mid_stream(cluster, scenario, conditional=False)
    assert duplicates > 0, "positive control: resending without the condition must show duplicates"


def add_until_answered(target: str, registry: str, ledger: LedgerId, answers: list[QuireClientError]) -> None:
    """AddEntry through one gateway until it answers something other than UNAVAILABLE."""
    with QuireClient(target, timeout=30) as client:
        for _ in range(60):
            try:
                client.add_entry(ledger, b"concurrent")
            except QuireClientError as exc:
                if exc.code.name != "UNAVAILABLE":
                    answers.append(exc)
                    return
            time.sleep(0.5)


def write_until_the_owner_dies(
    cluster: LocalCluster, scenario: Scenario
) -> tuple[LedgerId, StreamingWriter, list[QuireClientError]]:
    """The owner SIGKILLed in a burst of the client's stream through the
    second gateway, while two more writers keep adding through the second and
    third; returns their final answers too."""
    ledger = ledger_on_first_gateway(cluster)
    _, relay, other = cluster.gateway_targets
    client = QuireClient(relay, timeout=30, gateways=[other], resume_attempts=15)
    writer = StreamingWriter(client, ledger).start()
    writer.wait_for_the_burst()
    cluster.kill("gateway")
    scenario.figures["acked_at_kill"] = writer.acked
    answers: list[QuireClientError] = []
    adders = [
        threading.Thread(target=add_until_answered, args=(target, cluster.registry_target, ledger, answers))
        for target in (relay, other)
    ]
    for adder in adders:
        adder.start()
    writer.join()
    for adder in adders:
        adder.join(120)
    client.close()
    scenario.figures["writer_error"] = writer.error.reason if writer.error else ""
    scenario.figures["other_answers"] = sorted(a.reason for a in answers)
    return ledger, writer, answers


def test_gwy2_the_owner_dies_mid_stream(cluster: LocalCluster, scenario: Scenario) -> None:
    """The owner is SIGKILLed while a client writes through another gateway.
    Once its session lapses, the next write through any gateway recovers the
    ledger and fails LEDGER_OWNER_GONE naming the last entry; the ledger is
    closed there and every acknowledged entry is in it."""
    scenario.start("GWY-2", gateways=3, entries=ENTRIES, kill_at=KILL_AT, session_seconds=SESSION_SECONDS)
    ledger, writer, answers = write_until_the_owner_dies(cluster, scenario)
    assert writer.error is not None and len(answers) == 2
    # The stream and the two adders wrote at the same time through two gateways: whichever came
    # first recovered the ledger (LEDGER_OWNER_GONE); the others saw it gone too, at the same
    # end, or already closed.
    everyone = [writer.error, *answers]
    assert all(a.reason in (OWNER_GONE, "ERROR_REASON_LEDGER_CLOSED") for a in everyone), everyone
    gone = [a for a in everyone if a.reason == OWNER_GONE]
    assert gone and all("create a new ledger" in a.message for a in gone)
    ends = {int(a.details["last_entry_id"]) for a in gone}
    assert len(ends) == 1, ends
    (last,) = ends
    with QuireClient(cluster.gateway_targets[2], timeout=30) as reader:
        metadata, _ = reader.ledger_metadata(ledger)
        assert metadata.state == common_pb2.LEDGER_STATE_CLOSED and metadata.last_entry_id == last
        # Every gateway now agrees: the ledger is closed at that entry.
        with pytest.raises(QuireClientError) as late:
            reader.add_entry(ledger, b"late")
        assert late.value.reason == "ERROR_REASON_LEDGER_CLOSED"
        acked_lost, duplicates = tally(scenario, reader, ledger, writer.acked)
    scenario.figures["closed_at"] = last
    assert (acked_lost, duplicates) == (0, 0) and last + 1 >= writer.acked


def test_gwy2_control_trusting_a_dead_owner_never_closes(cluster: LocalCluster, scenario: Scenario) -> None:
    """Positive control: the relaying gateways take every recorded owner for
    alive (QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION): writes are relayed
    to the dead owner until the client gives up UNAVAILABLE, and the ledger is
    left open with no writer."""
    scenario.start("GWY-2-control", gateways=3, **{IGNORE_OWNER_SESSION: "true"})
    for name in cluster.gateway_names[1:]:
        cluster.processes[name].env[IGNORE_OWNER_SESSION] = "true"
        cluster.restart(name)
    ledger, writer, answers = write_until_the_owner_dies(cluster, scenario)
    assert writer.error is not None and writer.error.reason != OWNER_GONE
    assert answers == []  # UNAVAILABLE all along
    with QuireClient(cluster.gateway_targets[2], timeout=30) as reader:
        metadata, _ = reader.ledger_metadata(ledger)
    scenario.figures["state"] = common_pb2.LedgerState.Name(metadata.state)
    assert metadata.state == common_pb2.LEDGER_STATE_OPEN, "positive control: the dead owner's ledger stays open"


def restart_the_owner_under_its_name(cluster: LocalCluster, scenario: Scenario, settings: dict[str, str]) -> LedgerId:
    """GWY-4's fault: the first gateway, on a LONG_SESSION_SECONDS session,
    creates a ledger and writes to it, is SIGKILLed and started again at once
    under its name (with `settings`). Returns the ledger."""
    owner = cluster.gateway_names[0]
    cluster.processes[owner].env.update({SESSION: str(LONG_SESSION_SECONDS), **settings})
    cluster.restart(owner)
    ledger = ledger_on_first_gateway(cluster)
    with QuireClient(cluster.gateway_targets[0], timeout=30) as client:
        for i in range(10):
            client.add_entry(ledger, b"before the kill %d" % i)
    cluster.kill(owner)
    scenario.figures["killed_at"] = time.monotonic()
    cluster.start_process(owner)
    return ledger


def test_gwy4_a_gateway_restarted_under_its_name_ends_its_previous_session(
    cluster: LocalCluster, scenario: Scenario
) -> None:
    """GWY-4: a gateway SIGKILLed and started again under its name ends its
    previous session as it starts, instead of waiting for that lease to lapse:
    well before the lease could have lapsed, the dead session's ledger is
    recovered by its next write (LEDGER_OWNER_GONE, through another gateway)
    and the restarted gateway creates ledgers of its own."""
    scenario.start("GWY-4", gateways=3, session_seconds=LONG_SESSION_SECONDS)
    ledger = restart_the_owner_under_its_name(cluster, scenario, {})
    answer = refusal_after_waiting(
        cluster.gateway_targets[1], cluster.registry_target, ledger, OWNER_ALIVE, LONG_SESSION_SECONDS
    )
    recovered_after = time.monotonic() - scenario.figures["killed_at"]
    with QuireClient(cluster.gateway_targets[0], timeout=30) as restarted:
        created = restarted.create_ledger()
    created_after = time.monotonic() - scenario.figures["killed_at"]
    scenario.figures.update(
        answer=answer.reason, recovered_after_s=round(recovered_after, 1), created_after_s=round(created_after, 1)
    )
    assert answer.reason == OWNER_GONE, answer
    assert int(answer.details["last_entry_id"]) == 9
    assert created.owner.address == cluster.gateway_targets[0]  # a session of its own again
    # Both before the killed session's lease could have lapsed on its own.
    assert created_after < LONG_SESSION_SECONDS, scenario.figures


def test_gwy4_control_waiting_for_the_previous_session_stalls_its_ledgers(
    cluster: LocalCluster, scenario: Scenario
) -> None:
    """Positive control: with QUIRE_GATEWAY_FAULT_WAIT_FOR_PREVIOUS_SESSION the
    restarted gateway leaves its previous session to lapse: 15 s after the
    restart the killed session's ledger is still refused as written elsewhere
    (or UNAVAILABLE), never recovered, and still open."""
    scenario.start("GWY-4-control", gateways=3, **{WAIT_FOR_PREVIOUS_SESSION: "true"})
    ledger = restart_the_owner_under_its_name(cluster, scenario, {WAIT_FOR_PREVIOUS_SESSION: "true"})
    answer = refusal_after_waiting(cluster.gateway_targets[1], cluster.registry_target, ledger, OWNER_ALIVE, 15)
    scenario.figures["answer"] = answer.reason or answer.code.name
    assert answer.reason != OWNER_GONE, "positive control: the previous session was ended anyway"
    with QuireClient(cluster.gateway_targets[2], timeout=30) as reader:
        metadata, _ = reader.ledger_metadata(ledger)
    assert metadata.state == common_pb2.LEDGER_STATE_OPEN


def old_lease_expiry(cluster: LocalCluster, lease_id: int) -> float:
    """The earliest monotonic time etcd can let `lease_id` lapse, if nobody
    renews it from now on: now plus the TTL etcd says remains (whole seconds,
    rounded down)."""
    asked_at = time.monotonic()
    endpoint = f"--endpoints=127.0.0.1:{cluster.ports.etcd}"
    answer = subprocess.run(
        ["etcdctl", endpoint, "-w", "json", "lease", "timetolive", f"{lease_id:x}"],
        env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    remaining = json.loads(answer.stdout)["ttl"]
    assert remaining > 0, f"the session's lease {lease_id:x} is not live: {answer.stdout}"
    return asked_at + remaining


def first_write_after(target: str, registry: str, deadline_seconds: float = 180) -> float:
    """What a client does once its ledger's writer is gone: create a new ledger
    through the gateway and add to it, trying again while refused for now.
    Returns when the add was acknowledged."""
    deadline = time.monotonic() + deadline_seconds
    with QuireClient(target, timeout=30) as client:
        while True:
            try:
                created = client.create_ledger().ledger_id
                client.add_entry(LedgerId(created.scope_id, created.ledger_id), b"after the restart")
                return time.monotonic()
            except QuireClientError as exc:
                if not exc.retryable or time.monotonic() >= deadline:
                    raise
            time.sleep(0.2)


def restart_a_lone_writer_under_its_name(
    cluster: LocalCluster, scenario: Scenario, settings: dict[str, str]
) -> tuple[LedgerId, int, bool]:
    """GWY-5's fault: a client streams to a ledger through the first gateway
    alone (no other gateway to resume through, as with a single gateway); the
    gateway is SIGKILLed in a burst and started again under its name. Once the
    client's stream has ended it creates a new ledger there and adds to it, as
    an application would. Returns the first ledger, the entries acknowledged
    in it, and whether the first write after the restart was acknowledged
    before the killed session's lease could have lapsed."""
    owner = cluster.gateway_names[0]
    cluster.processes[owner].env.update(settings)
    cluster.restart(owner)
    target = cluster.gateway_targets[0]
    ledger = ledger_on_first_gateway(cluster)
    client = QuireClient(target, timeout=30, resume_attempts=60)
    writer = StreamingWriter(client, ledger).start()
    writer.wait_for_the_burst()
    metadata, _ = client.ledger_metadata(ledger)
    lapses_at = old_lease_expiry(cluster, metadata.owner.session_id)
    cluster.kill(owner)
    killed_at = time.monotonic()
    cluster.start_process(owner)
    writer.join()
    client.close()
    written_at = first_write_after(target, cluster.registry_target)
    scenario.figures.update(
        acked_at_kill=writer.acked,
        stream_ended_with=(writer.error.reason or writer.error.code.name) if writer.error else "",
        old_lease_left_s=round(lapses_at - killed_at, 1),
        first_write_after_kill_s=round(written_at - killed_at, 1),
    )
    return ledger, writer.acked, written_at < lapses_at


def test_gwy5_a_lone_gateway_restarted_under_its_name_writes_before_its_old_lease_lapses(
    cluster: LocalCluster, scenario: Scenario
) -> None:
    """GWY-5: a gateway whose client writes through it alone is SIGKILLed and
    started again under its name. It knows its previous session is dead: the
    client's broken stream ends with its ledger recovered (closed at one end,
    every acknowledged entry in it), and the client's first write after the
    restart, to a new ledger, is acknowledged while the killed session's lease
    (60 s) still had time to run."""
    scenario.start("GWY-5", gateways=1, session_seconds=LONG_SESSION_SECONDS)
    ledger, acked, before_the_lapse = restart_a_lone_writer_under_its_name(
        cluster, scenario, {SESSION: str(LONG_SESSION_SECONDS)}
    )
    assert before_the_lapse, f"the first write waited for the dead session's lease: {scenario.figures}"
    assert scenario.figures["stream_ended_with"] in (OWNER_GONE, "ERROR_REASON_LEDGER_CLOSED"), scenario.figures
    with QuireClient(cluster.gateway_targets[0], timeout=30) as reader:
        closed, _ = reader.ledger_metadata(ledger)
        assert closed.state == common_pb2.LEDGER_STATE_CLOSED and closed.last_entry_id + 1 >= acked
        assert tally(scenario, reader, ledger, acked) == (0, 0)


def test_gwy5_control_waiting_for_the_previous_session_writes_only_after_the_lapse(
    cluster: LocalCluster, scenario: Scenario
) -> None:
    """Positive control: with QUIRE_GATEWAY_FAULT_WAIT_FOR_PREVIOUS_SESSION the
    restarted gateway takes its killed session for alive until that lease
    (15 s here) lapses, so the first write after the restart comes only then."""
    scenario.start("GWY-5-control", gateways=1, session_seconds=CONTROL_SESSION_SECONDS)
    settings = {SESSION: str(CONTROL_SESSION_SECONDS), WAIT_FOR_PREVIOUS_SESSION: "true"}
    _, _, before_the_lapse = restart_a_lone_writer_under_its_name(cluster, scenario, settings)
    assert not before_the_lapse, f"positive control: the first write did not wait for the lease: {scenario.figures}"


def pause_the_owner_past_its_lease(cluster: LocalCluster, scenario: Scenario) -> tuple[LedgerId, StreamingWriter, int]:
    """PART-2's fault: a client streams to the ledger's owner directly; the
    owner is SIGSTOPped in a burst (entries in flight), stays stopped past its
    session lease while another client writes through the second gateway, which
    recovers the ledger (LEDGER_OWNER_GONE), and is then continued with the
    stream still open. Returns the ledger, the stream's writer and the end the
    recovery fixed."""
    ledger = ledger_on_first_gateway(cluster)
    client = QuireClient(cluster.gateway_targets[0], timeout=30, resume_attempts=0)
    writer = StreamingWriter(client, ledger).start()
    writer.wait_for_the_burst()
    cluster.pause("gateway")
    paused_at = time.monotonic()
    scenario.figures["acked_at_pause"] = writer.acked
    try:
        # While the paused owner's lease lives, the write is relayed to it and waits there
        # until its deadline; once the lease lapses, it recovers the ledger.
        answer = refusal_after_waiting(
            cluster.gateway_targets[1], cluster.registry_target, ledger, OWNER_PAUSED, 60, call_timeout=3
        )
        time.sleep(max(0.0, PAUSE_SECONDS - (time.monotonic() - paused_at)))
    finally:
        cluster.resume("gateway")
    return ledger, writer, recovered_end(scenario, client, writer, answer)


def test_part2_an_owner_paused_past_its_lease_is_fenced_out(cluster: LocalCluster, scenario: Scenario) -> None:
    """PART-2 (the "GC pause"): no entry the old owner acknowledged lies past
    the end the recovery fixed, its stream is refused once it runs again, the
    ledger is closed at one end that every gateway reads alike, and the old
    owner no longer takes writes for it."""
    scenario.start("PART-2", gateways=3, session_seconds=SESSION_SECONDS, pause_seconds=PAUSE_SECONDS)
    ledger, writer, end = pause_the_owner_past_its_lease(cluster, scenario)
    assert writer.acked - 1 <= end, "an entry acknowledged by the paused owner lies past the recovered end"
    assert writer.error is not None, "the old owner's stream went on after it was recovered out"
    stopped = {"ERROR_REASON_LEDGER_FENCED", "ERROR_REASON_LEDGER_CLOSED", OWNER_GONE}
    assert writer.error.reason in stopped | {"ERROR_REASON_LEDGER_NOT_WRITABLE_HERE"}, writer.error
    lengths = set()
    for target in cluster.gateway_targets:
        with QuireClient(target, timeout=30) as reader:
            metadata, _ = reader.ledger_metadata(ledger)
            assert metadata.state == common_pb2.LEDGER_STATE_CLOSED and metadata.last_entry_id == end
            lengths.add(sum(1 for _ in reader.read(ledger)))
    assert lengths == {end + 1}
    with QuireClient(cluster.gateway_targets[0], timeout=30) as old_owner:
        with pytest.raises(QuireClientError) as refused:
            old_owner.add_entry(ledger, b"after the pause")
    scenario.figures["old_owner_answer"] = refused.value.reason
    assert refused.value.reason in stopped, refused.value


def test_part2_control_without_fencing_the_paused_owner_acknowledges_past_the_end(
    cluster: LocalCluster, scenario: Scenario
) -> None:
    """Positive control: with QUIRE_BOOKIE_FAULT_UNSAFE_IGNORE_FENCE the
    bookies take the continued owner's adds after the recovery, and it
    acknowledges entries past the end the recovery fixed."""
    scenario.start("PART-2-control", gateways=3, **{IGNORE_FENCE: "true"})
    for name in cluster.bookie_names:
        cluster.processes[name].env[IGNORE_FENCE] = "true"
        cluster.restart(name)
    try:
        _, writer, end = pause_the_owner_past_its_lease(cluster, scenario)
    finally:
        for name in cluster.bookie_names:
            del cluster.processes[name].env[IGNORE_FENCE]
            cluster.restart(name)
    assert writer.acked - 1 > end, "positive control: without fencing the old owner was still stopped"
