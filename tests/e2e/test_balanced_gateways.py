"""Three gateways behind a real L4 balancer (HAProxy, round robin), as a
Kubernetes Service puts them: every new connection may land on another
gateway, so the README's command-line flow, run as separate commands, crosses
gateways at every step, and a client whose gateway dies reconnects through
the balancer to another."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from quire_api.ids import LedgerId, ledger_id_from_proto
from quire_client import OutOfRangeError, QuireClient
from quire_client.client import QuireClientError
from quire_client.cluster import LocalCluster
from quire_proto.common.v1 import common_pb2
from tests.e2e.conftest import HAPROXY_INSTALLED, NO_HAPROXY, running_cluster
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not HAPROXY_INSTALLED, reason=NO_HAPROXY),
]

OWNER_GONE = "ERROR_REASON_LEDGER_OWNER_GONE"
EXPLICIT_LAC = "QUIRE_GATEWAY_EXPLICIT_LAC_SECONDS"
NO_READ_YOUR_WRITES = "QUIRE_GATEWAY_FAULT_UNSAFE_NO_READ_YOUR_WRITES"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # A killed owner's ledgers are recovered sooner with short gateway sessions.
    with running_cluster(
        tmp_path_factory.mktemp("balanced"), gateways=3, balancer=True, QUIRE_GATEWAY_SESSION_SECONDS="3"
    ) as local:
        yield local


@pytest.fixture(autouse=True)
def every_gateway_running(cluster: LocalCluster) -> Iterator[None]:
    """Tests kill gateways or change their settings; the next one starts with
    all three again, as configured by the fixture."""
    yield
    for name in cluster.gateway_names:
        env = cluster.processes[name].env
        changed = [env.pop(setting, None) for setting in (EXPLICIT_LAC, NO_READ_YOUR_WRITES)]
        if any(value is not None for value in changed):
            cluster.terminate(name)
        cluster.start_process(name, timeout=120)


def quire(cluster: LocalCluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """One `quire` command: its own process, its own connection to the balancer."""
    env = {**os.environ, "QUIRE_GATEWAY": cluster.gateway_target, "QUIRE_REGISTRY": cluster.registry_target}
    return subprocess.run(
        [sys.executable, "-m", "quire_client.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args[3:]} exited {result.returncode}: {result.stderr}"
    return result.stdout


def balanced_client(cluster: LocalCluster) -> tuple[QuireClient, str]:
    """A client connected through the balancer, and the gateway its connection landed on."""
    assert cluster.balancer is not None
    for _ in range(10):
        before = cluster.balancer.connections_per_backend()
        client = QuireClient(cluster.gateway_target, timeout=30, resume_attempts=60)
        list(client.list_ledgers(0, page_size=1))
        after = cluster.balancer.connections_per_backend()
        landed = [name for name in after if after[name] > before[name]]
        if len(landed) == 1:
            return client, landed[0]
        client.close()  # another connection (a client of an earlier test reconnecting) came through too
    raise AssertionError(f"could not tell which gateway a new connection landed on: {before} -> {after}")


def ledger_owned_by(cluster: LocalCluster, name: str) -> LedgerId:
    target = cluster.gateway_targets[cluster.gateway_names.index(name)]
    with QuireClient(target, timeout=30) as owner:
        created = owner.create_ledger()
    assert created.owner.address == target
    return ledger_id_from_proto(created.ledger_id)


def test_the_balancer_spreads_connections_over_every_gateway(cluster: LocalCluster) -> None:
    assert cluster.balancer is not None and cluster.balancer.running()
    before = cluster.balancer.connections_per_backend()
    for _ in range(6):
        ok(quire(cluster, "ledger", "list"))
    after = cluster.balancer.connections_per_backend()
    assert set(after) == set(cluster.gateway_names)
    assert all(after[name] > before[name] for name in after), (before, after)


def test_the_readme_flow_as_separate_commands(cluster: LocalCluster) -> None:
    created = ok(quire(cluster, "ledger", "create", "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2"))
    ledger = created.strip()
    assert ok(quire(cluster, "ledger", "append", ledger, "hello", "world")).strip() == "last entry id 1"
    assert ok(quire(cluster, "ledger", "append", ledger, stdin="from\nstdin\n")).strip() == "last entry id 3"
    ok(quire(cluster, "ledger", "append", ledger, "--count", "300"))
    assert ok(quire(cluster, "ledger", "read", ledger, "--from", "0", "--to", "3")).splitlines() == [
        "0\thello",
        "1\tworld",
        "2\tfrom",
        "3\tstdin",
    ]
    # Through a gateway that does not write the ledger, the LAC comes from the bookies: the owner
    # wrote it there explicitly once the appends paused.
    assert '"last_add_confirmed": 303' in ok(quire(cluster, "ledger", "info", ledger))
    assert "at entry 303" in ok(quire(cluster, "ledger", "close", ledger))
    assert "CLOSED" in ok(quire(cluster, "ledger", "meta", ledger))
    ok(quire(cluster, "ledger", "delete", ledger, "--force"))


def test_python_clients_on_different_gateways_write_one_ledger(cluster: LocalCluster) -> None:
    # One client per gateway, addressed directly: what three processes behind the balancer may get.
    # (Clients in one process share their connection to the balancer, so they would land on one.)
    clients = [QuireClient(target, timeout=60) for target in cluster.gateway_targets]
    try:
        ledger = ledger_id_from_proto(clients[0].create_ledger().ledger_id)
        ids = [clients[i % 3].add_entry(ledger, f"entry {i}".encode()) for i in range(9)]
        assert ids == list(range(9))
        assert clients[1].append_all(ledger, (f"entry {i}".encode() for i in range(9, 500))) == 499
        assert clients[2].close_ledger(ledger).last_entry_id == 499
        read = [entry.payload for entry in clients[2].read(ledger, 0, 499)]
        assert read == [f"entry {i}".encode() for i in range(500)]
    finally:
        for client in clients:
            client.close()


def test_a_blob_put_through_the_balancer_is_read_through_every_gateway(cluster: LocalCluster) -> None:
    data = hashlib.sha256(b"blob").digest() * (3 * 1024 * 1024 // 32)
    with QuireClient(cluster.gateway_target, timeout=60) as writer:
        blob_id = writer.put_blob(data, part_bytes=256 * 1024)
    for target in cluster.gateway_targets:
        with QuireClient(target, timeout=60) as reader:
            assert reader.get_blob(blob_id) == data


def read_back(reader: QuireClient, ledger: LedgerId, entry_id: int, method: int) -> bytes:
    """Entry `entry_id` by one of the confirmed reads: ReadEntry, ReadEntries
    or ReadEntryStream. OUT_OF_RANGE is raised as OutOfRangeError."""
    if method == 0:
        return reader.read_entry(ledger, entry_id).payload
    if method == 1:
        (entry,) = list(reader.read(ledger, entry_id, entry_id))
        return entry.payload
    (answer,) = list(reader.read_entries_by_id(ledger, [entry_id]))
    if isinstance(answer, QuireClientError):
        raise answer
    return answer.payload


class TailFromEntry:
    """A tail from `entry_id` in a thread; `first` is set once it has
    delivered that entry. A tail held up past the LAC ends when the next
    write (or the close) moves it."""

    def __init__(self, reader: QuireClient, ledger: LedgerId, entry_id: int) -> None:
        self.payload: bytes | None = None
        self.first = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(reader, ledger, entry_id), daemon=True)
        self._thread.start()

    def _run(self, reader: QuireClient, ledger: LedgerId, entry_id: int) -> None:
        for entry in reader.tail(ledger, entry_id):
            self.payload = entry.payload
            self.first.set()
            return

    def join(self) -> None:
        self._thread.join(120)
        assert not self._thread.is_alive(), "a tail never delivered its first entry"


# GWY-3 checks a tail every this many rounds (through the third gateway).
TAIL_EVERY = 50


def write_then_read_everywhere(cluster: LocalCluster, rounds: int, tail_wait_seconds: float = 120) -> list[str]:
    """GWY-3's workload: each round appends one entry through a gateway that
    relays it to the ledger's owner (unary AddEntry and a one-entry
    AppendEntries stream in turn) and, once it is acknowledged, reads it back
    at once through each of the three gateways and through the balancer,
    with ReadEntry, ReadEntries and ReadEntryStream in turn; every TAIL_EVERY
    rounds a tail through the third gateway starts at the new entry first.
    Every read must return the entry's bytes; returns the reads that failed
    OUT_OF_RANGE ("round R, <gateway>: ...") and the tails that did not
    deliver within `tail_wait_seconds` ("round R, tail through ...")."""
    ledger = ledger_owned_by(cluster, "gateway")
    balanced, landed = balanced_client(cluster)
    clients = [QuireClient(target, timeout=60) for target in cluster.gateway_targets]
    readers = [*zip(cluster.gateway_names, clients, strict=True), (f"balancer to {landed}", balanced)]
    failed: list[str] = []
    tails: list[TailFromEntry] = []
    try:
        relay = clients[1]
        for round_ in range(rounds):
            payload = b"read your writes %d" % round_
            if round_ % 2:
                entry_id = relay.append_all(ledger, [payload])
            else:
                entry_id = relay.add_entry(ledger, payload)
            if round_ % TAIL_EVERY == 0:  # first, before a read teaches the third gateway the LAC
                tail = TailFromEntry(clients[2], ledger, entry_id)
                tails.append(tail)
                if not tail.first.wait(tail_wait_seconds):
                    failed.append(f"round {round_}, tail through {cluster.gateway_names[2]}: nothing delivered")
            for index, (name, reader) in enumerate(readers):
                try:
                    assert read_back(reader, ledger, entry_id, (round_ + index) % 3) == payload, (round_, name)
                except OutOfRangeError as exc:
                    failed.append(f"round {round_}, {name}: {exc}")
        relay.close_ledger(ledger)  # ends any tail still held up past the LAC
        for tail in tails:
            tail.join()
        assert all(tail.payload is not None for tail in tails)
    finally:
        for client in [*clients, balanced]:
            client.close()
    return failed


def without_the_explicit_lac_on_the_owner(cluster: LocalCluster) -> None:
    """GWY-3 runs with the owner's explicit LAC off: the bookies then trail
    the last acknowledged entry until the next write, however late a read
    comes, so only the protection under test makes it readable elsewhere."""
    cluster.processes["gateway"].env[EXPLICIT_LAC] = "0"
    cluster.restart("gateway", timeout=120)


def test_gwy3_an_acknowledged_entry_reads_at_once_through_every_gateway(cluster: LocalCluster) -> None:
    """GWY-3: 1,000 entries acknowledged through a relaying gateway, each read
    right after its ack through the owner, the relay, the third gateway and
    the balancer, and tails started at it: the relay knows the LAC from the
    acks it relayed, the third gateway asks the owner."""
    without_the_explicit_lac_on_the_owner(cluster)
    assert write_then_read_everywhere(cluster, 1000) == []


def test_gwy3_control_without_read_your_writes_a_fresh_entry_reads_out_of_range(cluster: LocalCluster) -> None:
    """Positive control: with QUIRE_GATEWAY_FAULT_UNSAFE_NO_READ_YOUR_WRITES on
    the relay and the third gateway they know only the bookies' LAC, which
    trails the last acknowledged entry, and refuse to read it; a tail there
    waits for the next write. (The owner knows its own LAC: no switch there.)"""
    without_the_explicit_lac_on_the_owner(cluster)
    for name in cluster.gateway_names[1:]:
        cluster.processes[name].env[NO_READ_YOUR_WRITES] = "true"
        cluster.restart(name, timeout=120)
    failed = write_then_read_everywhere(cluster, 50, tail_wait_seconds=5)
    for name in cluster.gateway_names[1:]:
        assert [f for f in failed if f", {name}:" in f], f"the control read every fresh entry through {name}"
    assert [f for f in failed if ", tail through" in f], "the control's tail delivered the fresh entry at once"
    assert not [f for f in failed if ", gateway:" in f], "the owner itself always knows its own LAC"


def tail_a_burst_elsewhere(cluster: LocalCluster, wait_seconds: float) -> tuple[bool, list[bytes]]:
    """200 entries appended through their owner while a tail follows them
    through another gateway: whether the tail delivered all of them within
    `wait_seconds` (before the close), and what it delivered in the end. The
    tail has caught up (delivered the first entry, spending its one ask of
    the owner) before the other 199 are appended, so what it learns of them
    comes from the bookies."""
    ledger = ledger_owned_by(cluster, "gateway")
    received: list[bytes] = []
    caught_up = threading.Event()
    everything = threading.Event()
    with (
        QuireClient(cluster.gateway_targets[0], timeout=60) as owner,
        QuireClient(cluster.gateway_targets[2], timeout=60) as other,
    ):

        def follow() -> None:
            for entry in other.tail(ledger, 0):
                received.append(entry.payload)
                caught_up.set()
                if len(received) == 200:
                    everything.set()

        owner.add_entry(ledger, b"burst 0")
        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        assert caught_up.wait(60), "the tail never delivered the first entry"
        assert owner.append_all(ledger, (b"burst %d" % i for i in range(1, 200))) == 199
        before_the_close = everything.wait(wait_seconds)
        owner.close_ledger(ledger)
        follower.join(60)
    return before_the_close, received


def test_a_tail_through_another_gateway_gets_the_last_entry_of_a_burst_before_the_close(
    cluster: LocalCluster,
) -> None:
    """The entries of a burst carry the LAC as it was when they were sent; the
    owner writes the final LAC to the bookies once the writes pause (explicit
    LAC), so a tail elsewhere delivers the burst's last entry without waiting
    for another."""
    before_the_close, received = tail_a_burst_elsewhere(cluster, wait_seconds=60)
    assert before_the_close, f"the tail stopped at {len(received)} of 200 entries"
    assert received == [b"burst %d" % i for i in range(200)]


def test_control_without_the_explicit_lac_a_tail_elsewhere_waits_for_the_close(cluster: LocalCluster) -> None:
    """Positive control: with QUIRE_GATEWAY_EXPLICIT_LAC_SECONDS=0 on the owner
    the burst's last entries stay unreadable elsewhere until the close."""
    cluster.processes["gateway"].env[EXPLICIT_LAC] = "0"
    cluster.restart("gateway", timeout=120)
    before_the_close, received = tail_a_burst_elsewhere(cluster, wait_seconds=5)
    assert not before_the_close
    assert received == [b"burst %d" % i for i in range(200)]  # the close settles it


def test_a_tail_through_another_gateway_follows_the_writer_to_the_close(cluster: LocalCluster) -> None:
    ledger = ledger_owned_by(cluster, "gateway")
    with (
        QuireClient(cluster.gateway_targets[0], timeout=60) as owner,
        QuireClient(cluster.gateway_targets[1], timeout=60) as other,
    ):
        tail = other.tail(ledger, 0)
        for i in range(50):
            owner.add_entry(ledger, f"live {i}".encode())
        owner.close_ledger(ledger)
        assert [entry.payload for entry in tail] == [f"live {i}".encode() for i in range(50)]


# -- a stream through the balancer while a gateway is killed -------------------------------------


ENTRIES = 2000
KILL_AFTER = 500


class BalancedWriter:
    """QuireClient.append through the balancer, in a thread: paced so that it
    is mid-stream when a gateway is killed; records acknowledged entries."""

    def __init__(self, client: QuireClient, ledger: LedgerId, prefix: str) -> None:
        self.client, self.ledger = client, ledger
        self.payloads = [f"{prefix}-{i:06d}-".encode() + b"x" * 1000 for i in range(ENTRIES)]
        self.acked = 0
        self.error: QuireClientError | None = None
        self.halfway = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _paced(self) -> Iterator[bytes]:
        """Paced, but sent as fast as the stream takes them around KILL_AFTER,
        so that a fault there finds entries in flight (stored, not yet acknowledged)."""
        for index, payload in enumerate(self.payloads):
            if index == KILL_AFTER:
                self.halfway.set()
            if not KILL_AFTER - 200 <= index < KILL_AFTER + 200:
                time.sleep(0.002)
            yield payload

    def _run(self) -> None:
        try:
            for ack in self.client.append(self.ledger, self._paced(), batch_size=20):
                self.acked = ack.last_entry_id + 1
        except QuireClientError as exc:
            self.error = exc

    def join(self) -> None:
        self._thread.join(300)
        assert not self._thread.is_alive(), "the writer did not finish"


def stored(client: QuireClient, ledger: LedgerId) -> list[bytes]:
    return [entry.payload for entry in client.read(ledger)]


@contextmanager
def a_stream_and_a_kill(
    cluster: LocalCluster, prefix: str, *, kill_the_owner: bool
) -> Iterator[tuple[QuireClient, LedgerId, BalancedWriter]]:
    """A client's append stream through the balancer, landed on a gateway
    that does not own the ledger; mid-stream that gateway (or the owner) is
    SIGKILLed. Yields the client, the ledger and the finished writer."""
    client, landed = balanced_client(cluster)
    owner = next(name for name in cluster.gateway_names if name != landed)
    ledger = ledger_owned_by(cluster, owner)
    with client:
        writer = BalancedWriter(client, ledger, prefix)
        assert writer.halfway.wait(120), writer.error
        cluster.kill(owner if kill_the_owner else landed)
        writer.join()
        yield client, ledger, writer


def test_a_stream_survives_the_death_of_the_gateway_it_came_through(cluster: LocalCluster) -> None:
    """SIGKILL the non-owner the client's connection landed on, mid-stream: the
    client reconnects through the balancer to another gateway and resumes with
    a conditional append; nothing acknowledged is lost, nothing is written twice."""
    with a_stream_and_a_kill(cluster, "relayed", kill_the_owner=False) as (client, ledger, writer):
        assert writer.error is None, writer.error
        assert writer.acked == ENTRIES
        client.close_ledger(ledger)
        assert stored(client, ledger) == writer.payloads  # acked_lost = 0, no duplicate, in order


def test_a_stream_survives_the_death_of_the_ledgers_owner_on_a_new_ledger(cluster: LocalCluster) -> None:
    """SIGKILL the ledger's owner mid-stream (the client writes through another
    gateway): once the owner's session lapses the ledger is recovered and closed
    (LEDGER_OWNER_GONE, naming its last entry), every acknowledged entry is in
    it, and the writer goes on in a new ledger through the balancer."""
    with a_stream_and_a_kill(cluster, "first", kill_the_owner=True) as (client, ledger, writer):
        assert writer.error is not None and writer.error.reason == OWNER_GONE, writer.error
        last = int(writer.error.details["last_entry_id"])
        metadata, _ = client.ledger_metadata(ledger)
        assert metadata.state == common_pb2.LEDGER_STATE_CLOSED and metadata.last_entry_id == last
        kept = stored(client, ledger)
        counts = Counter(kept)
        acked_lost = sum(1 for payload in writer.payloads[: writer.acked] if counts[payload] == 0)
        assert acked_lost == 0 and max(counts.values()) == 1
        assert kept == writer.payloads[: len(kept)] and len(kept) >= writer.acked

        # The writer's way on: a new ledger, through the same balancer address.
        next_ledger = ledger_id_from_proto(client.create_ledger().ledger_id)
        rest = writer.payloads[len(kept) :]
        assert client.append_all(next_ledger, rest) == len(rest) - 1
        assert kept + stored(client, next_ledger) == writer.payloads


@contextmanager
def a_stream_and_a_cut(
    cluster: LocalCluster, prefix: str, *, conditional: bool
) -> Iterator[tuple[QuireClient, LedgerId, BalancedWriter]]:
    """PART-4's fault: a client's append stream through the balancer, landed
    on a gateway that does not own the ledger; mid-burst the balancer cuts the
    client off from that gateway, which runs on. Yields the client (resuming
    with a conditional append, or not), the ledger and the finished writer."""
    assert cluster.balancer is not None
    client, landed = balanced_client(cluster)
    client.conditional_resume = conditional
    owner = next(name for name in cluster.gateway_names if name != landed)
    ledger = ledger_owned_by(cluster, owner)
    with client:
        writer = BalancedWriter(client, ledger, prefix)
        assert writer.halfway.wait(120), writer.error
        cluster.balancer.cut(landed)
        try:
            writer.join()
        finally:
            cluster.balancer.heal(landed)
        yield client, ledger, writer


def test_part4_a_stream_cut_from_its_gateway_resumes_elsewhere_without_gap_or_duplicate(
    cluster: LocalCluster,
) -> None:
    """PART-4: mid-stream, the balancer cuts the client off from the gateway
    its connection landed on (a non-owner, which runs on): the client
    reconnects through the balancer to another gateway and resumes with a
    conditional append; every payload is stored once, in order."""
    with a_stream_and_a_cut(cluster, "cut", conditional=True) as (client, ledger, writer):
        assert writer.error is None, writer.error
        assert writer.acked == ENTRIES
        assert client.resumed_writes >= 1, "the cut did not end the client's stream"
        client.close_ledger(ledger)
        assert stored(client, ledger) == writer.payloads  # no gap, no duplicate, in order


def test_part4_control_resuming_without_the_condition_writes_twice(cluster: LocalCluster) -> None:
    """Positive control: the same cut with a client that resumes without a
    conditional append (`conditional_resume=False`) writes again the entries
    that were stored but not acknowledged when the connection went."""
    with a_stream_and_a_cut(cluster, "uncut", conditional=False) as (client, ledger, writer):
        assert writer.error is None, writer.error
        client.close_ledger(ledger)
        kept = stored(client, ledger)
    duplicates = sum(n - 1 for n in Counter(kept).values())
    assert duplicates > 0, "positive control: the unconditional resume wrote nothing twice"


def test_part4_a_tail_cut_from_its_gateway_resumes_elsewhere_without_gap_or_duplicate(cluster: LocalCluster) -> None:
    """PART-4 for a reader: a tail through the balancer is cut off from its
    gateway mid-ledger and goes on through another from the next entry.

    The ledger stays open until after the cut, so the tail's call cannot have
    ended before it: with the ledger closed first, the gateway may send every
    entry and the call's end into the client's buffers before the cut, which
    then has nothing to break."""
    assert cluster.balancer is not None
    client, landed = balanced_client(cluster)
    owner = next(name for name in cluster.gateway_names if name != landed)
    ledger = ledger_owned_by(cluster, owner)
    payloads = [b"tail %06d-" % i + b"t" * 1000 for i in range(600)]
    before_cut, after_cut = payloads[:300], payloads[300:]
    owner_target = cluster.gateway_targets[cluster.gateway_names.index(owner)]
    with client, QuireClient(owner_target, timeout=30) as writer:
        writer.append_all(ledger, before_cut, batch_size=20)
        seen: list[bytes] = []
        try:
            for entry in client.tail(ledger, 0):
                seen.append(entry.payload)
                if len(seen) == 100:
                    cluster.balancer.cut(landed)
                    writer.append_all(ledger, after_cut, batch_size=20)
                    writer.close_ledger(ledger)
        finally:
            cluster.balancer.heal(landed)
        assert client.resumed_reads >= 1, "the cut did not end the client's tail"
    assert seen == payloads


def test_a_read_through_the_balancer_survives_the_death_of_its_gateway(cluster: LocalCluster) -> None:
    """SIGKILL the gateway a read landed on, mid-stream: the client reads on
    from the next entry through the balancer (another gateway), every entry
    once and in order."""
    client, landed = balanced_client(cluster)
    owner = next(name for name in cluster.gateway_names if name != landed)
    ledger = ledger_owned_by(cluster, owner)
    payloads = [b"%06d-" % i + b"b" * (64 * 1024 - 7) for i in range(600)]
    with client:
        client.append_all(ledger, payloads, batch_size=20)  # relayed to the owner
        client.close_ledger(ledger)
        # The landed gateway learns of the relayed close from its metadata watch, a moment later;
        # until then it may report an older LAC (a read would stop there).
        deadline = time.monotonic() + 60
        while client.last_add_confirmed(ledger) != len(payloads) - 1:
            assert time.monotonic() < deadline, "the landed gateway never saw the ledger closed"
            time.sleep(0.1)
        seen: list[bytes] = []
        for entry in client.read(ledger):
            seen.append(entry.payload)
            if len(seen) == 50:
                cluster.kill(landed)
        assert client.resumed_reads >= 1
    assert seen == payloads


def test_cluster_status_lists_every_gateway_and_a_dead_one_as_unreachable(cluster: LocalCluster) -> None:
    """`quire cluster status` through one gateway checks every gateway holding a
    session (found in the registry), not only the one it asked."""
    asked = cluster.gateway_targets[0]

    def status() -> tuple[int, dict[str, dict[str, str]]]:
        shown = quire(cluster, "--gateway", asked, "cluster", "status", "-o", "json")
        assert shown.returncode in (0, 1), shown.stderr
        report = json.loads(shown.stdout)
        return shown.returncode, {s["address"]: s for s in report["services"] if s["service"] == "gateway"}

    code, gateways = status()
    assert code == 0 and sorted(gateways) == sorted(cluster.gateway_targets), gateways
    assert all(g["health"] == "SERVING" and g["version"] for g in gateways.values()), gateways

    dead = cluster.gateway_targets[2]
    cluster.kill(cluster.gateway_names[2])
    seen: list[tuple[int, str]] = []

    def no_longer_serving() -> bool:
        code, gateways = status()
        if dead in gateways:
            seen.append((code, gateways[dead]["health"]))
        return dead not in gateways or gateways[dead]["health"] != "SERVING"

    wait_until("the dead gateway is no longer reported serving", no_longer_serving, poll_seconds=0.2)
    # Listed while its session lives on (until its lease lapses), then gone; while listed, unreachable
    # and the cluster degraded.
    assert all(entry == (1, "UNREACHABLE") for entry in seen if entry[1] != "SERVING"), seen
