"""Network rows: routes and qdiscs in the network-namespace lab (netns.py:
NET-1 … NET-5, NET-8, NET-9) and the userspace TCP proxy (NET-6)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from quire_api.ids import LedgerId
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster, grpc_serving
from quire_proto.registry.v1 import registry_pb2
from tests.faults.history import History
from tests.faults.lab import FAST_SETTINGS, fault_cluster, lab_cluster
from tests.faults.netns import NetLab
from tests.faults.proxy import TcpProxy
from tests.faults.report import Scenario
from tests.faults.scenarios import (
    PASSWORD,
    N,
    client_for,
    finish,
    gateway_reaches_all,
    latency_figures,
    metric_sum,
    new_ledger,
    registered_bookies,
    scrape,
    stale_adds_accepted,
    under_replicated,
    writers,
)
from tests.faults.workload import Writer
from tests.waiting import EVENT_DEADLINE_SECONDS, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """On loopback, for the proxy row; function-scoped so it is gone before the lab rows run."""
    with fault_cluster(tmp_path_factory.mktemp("network"), bookies=4) as local:
        yield local


def test_net6_latency_jitter_and_drop(cluster: LocalCluster, scenario: Scenario) -> None:
    """One bookie behind the proxy: 75 ms ± 50 ms per chunk throughout, and 50 %
    of chunks dropped (connection reset) for one second mid-stream."""
    seed = scenario.start("NET-6", N=N, delay_ms=75, jitter_ms=50, drop=0.5, drop_seconds=1)
    history = History()
    name = cluster.bookie_names[0]
    port = cluster.ports.bookies[0]
    process = cluster.processes[name]
    with TcpProxy("127.0.0.1", port, seed=seed) as proxy:
        process.env["QUIRE_BOOKIE_ADVERTISED_PORT"] = str(proxy.listen_port)
        cluster.restart(name)
        cluster.wait_bookies_registered(4)
        try:
            with client_for(cluster) as client:
                ledgers: list[LedgerId] = []
                while len(ledgers) < 2:  # ledgers whose ensemble includes the proxied bookie
                    ledger = new_ledger(client, history)
                    metadata, _ = client.ledger_metadata(ledger.qualified_name)
                    if cluster.bookie_id(name) in metadata.ensembles[0].bookie_ids:
                        ledgers.append(ledger)
                proxy.faults.delay_seconds, proxy.faults.jitter_seconds = 0.075, 0.05
                running = [w.start() for w in writers(cluster, ledgers, history, seed, pace_seconds=0.002)]
                running[0].wait_acked(300)
                proxy.faults.drop = 0.5
                time.sleep(1)
                proxy.faults.drop = 0.0
                for writer in running:
                    writer.join()
                    assert writer.error is None, writer.error
                scenario.figures.update(latency_figures(running))
                scenario.figures["chunks_dropped"] = proxy.dropped
                scenario.figures["chunks_forwarded"] = proxy.chunks
                proxy.faults.delay_seconds = proxy.faults.jitter_seconds = 0.0
                finish(scenario, client, history, ledgers)
        finally:
            del process.env["QUIRE_BOOKIE_ADVERTISED_PORT"]
            cluster.restart(name)


# -- the network-namespace lab ---------------------------------------------------------

# The auditor every second (NET-9 watches under-replication drain); its lost-bookie
# delay stays long, so no row re-replicates.
LAB_SETTINGS = {"QUIRE_AUDITOR_INTERVAL_SECONDS": "1", "QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS": "120"}
ADD_TIMEOUT_SECONDS = float(FAST_SETTINGS["QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS"])
BOOKIE_RETRY_SECONDS = float(FAST_SETTINGS["QUIRE_GATEWAY_BOOKIE_RETRY_SECONDS"])


@dataclass
class Lab:
    net: NetLab
    cluster: LocalCluster

    def registered(self) -> set[str]:
        return {r.bookie_id for r in registered_bookies(self.cluster, registry_pb2.BOOKIE_STATE_WRITABLE)}

    def all_serving(self) -> bool:
        targets = [self.cluster.gateway_target, self.cluster.registry_target, self.cluster.placement_target]
        targets += [self.cluster.bookie_id(n) for n in self.cluster.bookie_names]
        return all(grpc_serving(t) for t in targets)

    def settle(self, timeout: float = 60.0) -> None:
        """After a row: every fault removed, every process running, every bookie serving and registered."""
        self.net.heal()
        for name in self.cluster.processes:
            self.cluster.resume(name)
            self.cluster.start_process(name, timeout)
        deadline = time.monotonic() + timeout
        while not self.all_serving():
            assert time.monotonic() < deadline, "the lab did not return to all SERVING"
            time.sleep(0.2)
        self.cluster.wait_bookies_registered(len(self.cluster.bookie_names), timeout)
        with client_for(self.cluster) as client:
            while not gateway_reaches_all(self.cluster, client):
                assert time.monotonic() < deadline, "the gateway does not reach every bookie again"
                time.sleep(0.2)

    def gateway_metric(self, name: str) -> float:
        return metric_sum(scrape(f"{self.cluster.host('gateway')}:{self.cluster.ports.gateway_http}"), name)


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with lab_cluster(tmp_path_factory.mktemp("netns"), bookies=4, env=LAB_SETTINGS) as (net, local):
        yield Lab(net, local)


@pytest.fixture
def lab(shared_lab: Lab) -> Iterator[Lab]:
    """The shared lab; whatever a row did is undone after it."""
    try:
        yield shared_lab
    finally:
        shared_lab.settle()


def ledgers_on(
    lab: Lab,
    client: QuireClient,
    history: History,
    bookie: str,
    count: int,
    avoid: tuple[str, ...] = (),
    **quorums: int,
) -> list[LedgerId]:
    """`count` new ledgers whose first ensemble includes `bookie` and none of `avoid`."""
    found: list[LedgerId] = []
    for _ in range(50):
        ledger = new_ledger(client, history, **quorums)
        ensemble = client.ledger_metadata(ledger.qualified_name)[0].ensembles[0].bookie_ids
        if lab.cluster.bookie_id(bookie) in ensemble and not any(lab.cluster.bookie_id(a) in ensemble for a in avoid):
            found.append(ledger)
            if len(found) == count:
                return found
        else:
            client.delete_ledger(ledger)  # not left open (under-replicated whenever `bookie` is away)
    raise AssertionError(f"placement never chose {bookie}")


def wait_replaced(client: QuireClient, ledgers: list[LedgerId], bookie_id: str, running: list[Writer]) -> float | None:
    """Seconds until no ledger's last ensemble names `bookie_id` (None: the writers finished first)."""
    started = time.monotonic()
    while True:
        if all(
            bookie_id not in client.ledger_metadata(ledger.qualified_name)[0].ensembles[-1].bookie_ids
            for ledger in ledgers
        ):
            return round(time.monotonic() - started, 2)
        if all(not w.alive for w in running) or time.monotonic() - started > 60:
            return None
        time.sleep(0.05)


def partition_row(
    lab: Lab,
    scenario: Scenario,
    row: str,
    block: Callable[[str], None],
    while_blocked: Callable[[QuireClient, History], list[LedgerId]] | None = None,
    **parameters: object,
) -> None:
    """Two writers on ledgers that include the victim; `block(victim)` after 300 acks;
    figures: time until the victim is out of every ensemble, add latencies, the checker.
    `while_blocked` runs after the writers, with the fault still in place, and may
    return more ledgers for the checker."""
    victim = lab.cluster.bookie_names[0]
    victim_id = lab.cluster.bookie_id(victim)
    seed = scenario.start(row, N=N, E=3, Qw=2, Qa=2, victim=victim_id, **parameters)
    history = History()
    with client_for(lab.cluster) as client:
        ledgers = ledgers_on(lab, client, history, victim, 2)
        changes_before = lab.gateway_metric("quire_gateway_ensemble_changes")
        running = [w.start() for w in writers(lab.cluster, ledgers, history, seed, pace_seconds=0.002)]
        running[0].wait_acked(300)
        block(victim)
        scenario.figures["seconds_to_change"] = wait_replaced(client, ledgers, victim_id, running)
        for writer in running:
            writer.join()
            assert writer.error is None, writer.error
        scenario.figures.update(latency_figures(running))
        scenario.figures["registry_lists_victim"] = victim_id in lab.registered()
        if while_blocked is not None:
            ledgers += while_blocked(client, history)
        scenario.figures["ensemble_changes"] = int(
            lab.gateway_metric("quire_gateway_ensemble_changes") - changes_before
        )
        finish(scenario, client, history, ledgers)
    assert scenario.figures["seconds_to_change"] is not None, "the victim was never replaced"


def test_net1_receiver_side_blackhole(lab: Lab, scenario: Scenario) -> None:
    """The bookie's answers to the gateway vanish (a blackhole route in its namespace):
    each call waits for its deadline, then the bookie is replaced; no add waits unbounded."""
    partition_row(
        lab,
        scenario,
        "NET-1",
        lambda victim: lab.net.block_receiver(victim, lab.net.host("gateway")),
        fault="blackhole route to the gateway in the bookie's namespace",
        add_timeout_seconds=ADD_TIMEOUT_SECONDS,
    )
    bound_ms = (ADD_TIMEOUT_SECONDS + BOOKIE_RETRY_SECONDS + scenario.figures["seconds_to_change"]) * 1000
    scenario.figures["add_max_bound_ms"] = bound_ms
    # The deadline, the retry window and the change; slack for a loaded 2-core machine.
    assert scenario.figures["add_max_ms"] <= bound_ms + 5000, scenario.figures


def test_net2_sender_side_blackhole(lab: Lab, scenario: Scenario) -> None:
    """The root namespace's route to the bookie is a blackhole: a new connection fails at
    once; the gateway's established one waits for the add deadline (see below)."""
    partition_row(
        lab,
        scenario,
        "NET-2",
        lab.net.block_sender,
        fault="blackhole route to the bookie in the root namespace",
        bookie_retry_seconds=BOOKIE_RETRY_SECONDS,
    )
    # The gateway's connection to the bookie was established before the route changed: the
    # kernel keeps retransmitting into the blackhole without telling the socket, so an add on it
    # still waits for its deadline. A new connection fails at once (connect: EINVAL).
    started = time.monotonic()
    assert not grpc_serving(lab.cluster.bookie_id(lab.cluster.bookie_names[0]))
    scenario.figures["new_connection_fails_ms"] = round((time.monotonic() - started) * 1000, 1)
    assert scenario.figures["seconds_to_change"] <= ADD_TIMEOUT_SECONDS + BOOKIE_RETRY_SECONDS + 5, scenario.figures
    assert scenario.figures["new_connection_fails_ms"] < 500, scenario.figures


def test_net3_bookie_reaches_the_registry_not_the_gateway(lab: Lab, scenario: Scenario) -> None:
    """Only gateway <-> bookie is cut: the bookie keeps its registration (the registry
    cannot see the partition: documented), so placement may still hand it out; the
    gateway replaces it in the ledgers it writes and, having quarantined it, leaves it
    out of the ledgers it creates."""
    victim_id = lab.cluster.bookie_id(lab.cluster.bookie_names[0])

    def new_ledgers_while_blocked(client: QuireClient, history: History) -> list[LedgerId]:
        # Registered and writable as far as the registry knows, for a whole lease TTL and more.
        time.sleep(2 * float(FAST_SETTINGS["QUIRE_BOOKIE_TTL_SECONDS"]))
        assert victim_id in lab.registered(), "the registry dropped a bookie it can still reach"
        fresh = [new_ledger(client, history) for _ in range(4)]
        named = [
            ledger
            for ledger in fresh
            if victim_id in client.ledger_metadata(ledger.qualified_name)[0].ensembles[0].bookie_ids
        ]
        running = [w.start() for w in writers(lab.cluster, fresh, history, seed=7, count=200)]
        for writer in running:
            writer.join()
            assert writer.error is None, writer.error
        scenario.figures["new_ledgers_naming_victim"] = len(named)
        scenario.figures["new_ledgers_still_on_victim"] = sum(
            victim_id in client.ledger_metadata(ledger.qualified_name)[0].ensembles[-1].bookie_ids for ledger in fresh
        )
        return fresh

    partition_row(
        lab,
        scenario,
        "NET-3",
        lambda victim: lab.net.block_receiver(victim, lab.net.host("gateway")),
        new_ledgers_while_blocked,
        fault="blackhole route to the gateway (not the registry) in the bookie's namespace",
    )
    assert scenario.figures["registry_lists_victim"], "documented: the registry still lists the bookie"
    # The gateway quarantined the victim when it replaced it: new ledgers avoid it.
    assert scenario.figures["new_ledgers_naming_victim"] == 0, scenario.figures
    assert scenario.figures["new_ledgers_still_on_victim"] == 0, scenario.figures


def test_net4_bookie_reaches_the_gateway_not_the_registry(lab: Lab, scenario: Scenario) -> None:
    """Only bookie <-> registry is cut: the lease expires and the registry drops the bookie,
    while the gateway still reaches it. A recovery then fences the ledger; nothing the old
    writer sends after the fence is accepted."""
    victim = lab.cluster.bookie_names[0]
    victim_id = lab.cluster.bookie_id(victim)
    ttl = float(FAST_SETTINGS["QUIRE_BOOKIE_TTL_SECONDS"])
    seed = scenario.start(
        "NET-4", N=N, E=3, Qw=2, Qa=2, victim=victim_id, lease_ttl_seconds=ttl,
        fault="blackhole route to the registry in the bookie's namespace",
    )  # fmt: skip
    history = History()
    with client_for(lab.cluster) as client:
        (ledger,) = ledgers_on(lab, client, history, victim, 1)
        (writer,) = writers(lab.cluster, [ledger], history, seed, pace_seconds=0.005)
        writer.start().wait_acked(300)
        lab.net.block_receiver(victim, lab.net.host("registry"))
        blocked = time.monotonic()
        wait_until(
            "the registry dropping a bookie whose lease cannot be renewed",
            lambda: victim_id not in lab.registered(),
        )
        scenario.figures["seconds_to_drop"] = round(time.monotonic() - blocked, 2)
        scenario.figures["writer_running_at_fence"] = writer.alive
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        ensemble = list(metadata.ensembles[-1].bookie_ids)  # the old writer's, before recovery
        started = time.monotonic()
        closed = client.recover_ledger(ledger.qualified_name, PASSWORD)
        history.record("fence", "ok", ledger.qualified_name, last_entry_id=closed.last_entry_id)
        scenario.figures["recovery_seconds"] = round(time.monotonic() - started, 2)
        writer.join()
        scenario.figures["writer_error"] = writer.error.code.name if writer.error else None
        scenario.figures["writer_acked"] = writer.acked
        scenario.figures["closed_at"] = closed.last_entry_id
        scenario.figures["victim_replaced_by_recovery"] = victim_id not in closed.ensembles[-1].bookie_ids
        # A stale writer's next entries, straight to their write sets in its ensemble: one counts
        # as accepted only if Qa members take it. The isolated bookie is unregistered, so the
        # gateway cannot resolve it and recovery goes on without it (the coverage rule): it is
        # not fenced and takes single adds, reported apart (as in FEN-8).
        accepted, single = stale_adds_accepted(ensemble, ledger, closed.last_entry_id + 1)
        scenario.figures["fenced_ledger_writes_accepted"] = accepted
        scenario.figures["single_bookie_stale_acceptances"] = single
        lab.net.heal()
        healed = time.monotonic()
        wait_until("the bookie registering again after the heal", lambda: victim_id in lab.registered())
        scenario.figures["seconds_to_register_again"] = round(time.monotonic() - healed, 2)
        verdict = finish(scenario, client, history, [ledger])
    assert verdict.adds_after_fence == 0
    assert closed.last_entry_id >= writer.acked
    assert accepted == 0, scenario.figures


class RssSampler:
    """Samples a process's VmRSS every `interval` seconds in a thread; also reads VmHWM."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.samples_kib: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def status_kib(self, field: str) -> int:
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
        raise KeyError(field)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples_kib.append(self.status_kib("VmRSS"))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(5)


def test_net5_slow_link(lab: Lab, scenario: Scenario) -> None:
    """`tc tbf rate 1mbit` toward one bookie, Qw=3 Qa=2: the other two satisfy Qa; the
    gateway's in-flight bound keeps its memory flat while the slow bookie lags."""
    victim = lab.cluster.bookie_names[0]
    victim_id = lab.cluster.bookie_id(victim)
    shaping = {"rate": "1mbit", "burst": "32kbit", "latency": "400ms"}
    seed = scenario.start("NET-5", N=N, E=3, Qw=3, Qa=2, victim=victim_id, **shaping)
    history = History()
    gateway_pid = lab.cluster.pid("gateway")
    assert gateway_pid is not None
    with client_for(lab.cluster) as client:
        ledgers = ledgers_on(lab, client, history, victim, 2, write_quorum=3, ack_quorum=2)
        changes_before = lab.gateway_metric("quire_gateway_ensemble_changes")
        lab.net.shape(victim, **shaping)
        with RssSampler(gateway_pid) as rss:
            before_kib = rss.status_kib("VmRSS")
            running = [w.start() for w in writers(lab.cluster, ledgers, history, seed)]
            for writer in running:
                writer.join()
                assert writer.error is None, writer.error
        scenario.figures.update(latency_figures(running))
        scenario.figures["gateway_rss_before_mib"] = round(before_kib / 1024, 1)
        scenario.figures["gateway_rss_max_mib"] = round(max(rss.samples_kib) / 1024, 1)
        scenario.figures["gateway_vmhwm_mib"] = round(rss.status_kib("VmHWM") / 1024, 1)
        scenario.figures["ensemble_changes"] = int(
            lab.gateway_metric("quire_gateway_ensemble_changes") - changes_before
        )
        finish(scenario, client, history, ledgers)
    # Bounded: at most the gateway's in-flight limit (64 MiB) above where it started.
    assert max(rss.samples_kib) - before_kib < 96 * 1024, scenario.figures


def gateway_status(lab: Lab) -> dict[str, object]:
    target = f"{lab.cluster.host('gateway')}:{lab.cluster.ports.gateway_http}"
    with urllib.request.urlopen(f"http://{target}/status", timeout=5) as response:
        return dict(json.loads(response.read()))


def timed_create(client: QuireClient, history: History) -> tuple[float, str]:
    """Seconds a create took, and its outcome ("OK" or the error code)."""
    started = time.monotonic()
    try:
        new_ledger(client, history, attempts=1)  # one call's answer, not the client's retries
        outcome = "OK"
    except QuireClientError as exc:
        outcome = exc.code.name
    return round(time.monotonic() - started, 2), outcome


def wait_dependency(lab: Lab, name: str, state: str, timeout: float = 30.0) -> float:
    """Seconds until the gateway's /status shows dependency `name` in `state`."""
    started = time.monotonic()
    while True:
        dependencies = gateway_status(lab)["dependencies"]
        assert isinstance(dependencies, dict)
        if dependencies[name]["state"] == state:
            return round(time.monotonic() - started, 2)
        assert time.monotonic() - started < timeout, f"{name} never showed {state}: {dependencies}"
        time.sleep(0.1)


def test_net8_gateway_dependencies_down(lab: Lab, scenario: Scenario) -> None:
    """Placement killed, then the registry too: once the gateway's health checks see a
    dependency down (/status names it), creates fail UNAVAILABLE at once instead of waiting
    out their deadline; appends to an open ledger go on; after a restart creates work again."""
    seed = scenario.start("NET-8", N=500, fault="SIGKILL placement, then the registry; restart both")
    history = History()
    with client_for(lab.cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(lab.cluster, [ledger], history, seed, count=500, pace_seconds=0.01)
        writer.start().wait_acked(50)
        lab.cluster.kill("placement")
        scenario.figures["seconds_to_show_placement_down"] = wait_dependency(lab, "placement", "UNREACHABLE")
        seconds, outcome = timed_create(client, history)
        scenario.figures["create_seconds_placement_down"] = seconds
        scenario.figures["create_outcome_placement_down"] = outcome
        lab.cluster.kill("registry")
        scenario.figures["seconds_to_show_registry_down"] = wait_dependency(lab, "registry", "UNREACHABLE")
        seconds, outcome = timed_create(client, history)
        scenario.figures["create_seconds_both_down"] = seconds
        scenario.figures["create_outcome_both_down"] = outcome
        dependencies = gateway_status(lab)["dependencies"]
        assert isinstance(dependencies, dict)
        scenario.figures["status_both_down"] = {name: state["state"] for name, state in dependencies.items()}
        scenario.figures["writer_acked_while_down"] = writer.acked
        lab.cluster.start_process("registry")
        lab.cluster.start_process("placement")
        restarted = time.monotonic()  # both answer health checks again
        wait_until(
            "creates working again after the restart",
            lambda: timed_create(client, history)[1] == "OK",
            poll_seconds=0.05,
        )
        scenario.figures["seconds_to_recover"] = round(time.monotonic() - restarted, 2)
        writer.join()
        assert writer.error is None, writer.error
        finish(scenario, client, history, [ledger])
    for key in ("create_outcome_placement_down", "create_outcome_both_down"):
        assert scenario.figures[key] == "UNAVAILABLE", scenario.figures
    for key in ("create_seconds_placement_down", "create_seconds_both_down"):
        # At once rather than after the 10 s call deadline; well under it even on a busy machine.
        assert scenario.figures[key] < 9, scenario.figures


def test_net9_heal(lab: Lab, scenario: Scenario) -> None:
    """Faults of every kind at once (a sender-side blackhole to one bookie, tbf on a
    second, a third cut from the registry, which makes ledgers on it under-replicated),
    then every one removed: the time until every service is SERVING, every bookie is
    registered and reached by the gateway, and under-replication has drained
    (`quire recovery status` empty, the gauge at 0)."""
    cut_off, blackholed, shaped = lab.cluster.bookie_names[:3]
    seed = scenario.start(
        "NET-9", N=N,
        faults=f"blackhole to {blackholed} (sender side), tbf 1mbit to {shaped}, {cut_off} cut from the registry",
    )  # fmt: skip
    history = History()
    with client_for(lab.cluster) as client:
        stored = ledgers_on(lab, client, history, cut_off, 2)
        for writer in writers(lab.cluster, stored, history, seed, count=200):
            writer.start().join()
        for ledger in stored:
            client.close_ledger(ledger)
        # Writing throughout on the cut-off bookie and the one left alone (E = 2: with three of
        # four bookies hurt, a ledger needing a replacement would find none).
        (ledger,) = ledgers_on(
            lab, client, history, cut_off, 1, avoid=(blackholed, shaped), ensemble=2, write_quorum=2, ack_quorum=2
        )
        (writer,) = writers(lab.cluster, [ledger], history, seed + 10, pace_seconds=0.005)
        writer.start().wait_acked(100)
        lab.net.block_sender(blackholed)
        lab.net.shape(shaped)
        lab.net.block_receiver(cut_off, lab.net.host("registry"))
        wait_until(
            "the cut-off bookie's ledgers showing as under-replicated",
            lambda: under_replicated(lab.cluster) and lab.gateway_metric("quire_gateway_under_replicated_segments"),
            poll_seconds=0.2,
        )
        scenario.figures["under_replicated_segments"] = len(under_replicated(lab.cluster))
        scenario.figures["faults_removed"] = lab.net.heal()
        healed = time.monotonic()
        every = set(lab.cluster.bookie_id(n) for n in lab.cluster.bookie_names)
        all_serving_at = drained_at = None
        while all_serving_at is None or drained_at is None:
            now = time.monotonic() - healed
            assert now < EVENT_DEADLINE_SECONDS, (
                f"no steady state after the heal (serving {all_serving_at}, drained {drained_at})"
            )
            if all_serving_at is None and lab.all_serving() and lab.registered() == every:
                all_serving_at = round(now, 2)
            if drained_at is None and not under_replicated(lab.cluster):
                if not lab.gateway_metric("quire_gateway_under_replicated_segments"):
                    drained_at = round(now, 2)
            time.sleep(0.1)
        wait_until(
            "the gateway reaching every bookie after the heal",
            lambda: gateway_reaches_all(lab.cluster, client),
            poll_seconds=0.2,
        )
        scenario.figures["seconds_to_all_serving"] = all_serving_at
        scenario.figures["seconds_to_drained"] = drained_at
        scenario.figures["seconds_to_steady_state"] = round(time.monotonic() - healed, 2)
        writer.join()
        assert writer.error is None, writer.error
        scenario.figures.update(latency_figures([writer]))
        finish(scenario, client, history, [*stored, ledger])
