"""Shared steps of the fault scenarios: create ledgers, start writers, and
finish every scenario the same way (read back, check, report)."""

from __future__ import annotations

import statistics
import threading

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client import QuireAdmin, QuireClient, QuireClientError
from quire_client.cluster import LocalCluster, tooling_channel
from quire_common.entry import Digester, DigestType, master_key, pack_entry, verified_entry
from quire_proto.admin.v1 import admin_pb2
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.faults.checker import Verdict, check, read_back
from tests.faults.history import History
from tests.faults.report import Scenario
from tests.faults.workload import Writer, observe_metadata

N = 2000  # entries of 1 KiB per writer, as FAULTS.md's defaults say
PASSWORD = b"faults"


def client_for(cluster: LocalCluster, timeout: float = 30.0) -> QuireClient:
    return QuireClient(cluster.gateway_target, timeout=timeout)


def admin_for(cluster: LocalCluster, timeout: float = 30.0) -> QuireAdmin:
    """QuireAdmin's break-glass route: the registry and placement asked
    themselves, so a fault that leaves no gateway answering does not hide them."""
    return QuireAdmin(
        cluster.gateway_target,
        registry=cluster.registry_target,
        placement=cluster.placement_target,
        timeout=timeout,
        direct=True,
    )


def registered_bookies(
    cluster: LocalCluster, state: int = registry_pb2.BOOKIE_STATE_ALL
) -> list[registry_pb2.BookieRecord]:
    with admin_for(cluster) as admin:
        return admin.list_bookies(state)


def under_replicated(cluster: LocalCluster) -> list[admin_pb2.UnderReplicatedSegment]:
    """The segments waiting for repair ("missing" or "flagged"), as the registry and the ledgers show them."""
    with admin_for(cluster) as admin:
        return list(admin.recovery_status().segments)


def new_ledger(
    client: QuireClient,
    history: History,
    *,
    ensemble: int = 3,
    write_quorum: int = 2,
    ack_quorum: int = 2,
    attempts: int = 3,
) -> LedgerId:
    metadata = client.create_ledger(
        ensemble_size=ensemble,
        write_quorum_size=write_quorum,
        ack_quorum_size=ack_quorum,
        password=PASSWORD,
        attempts=attempts,
    )
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    observe_metadata(client, ledger.qualified_name, history)
    return ledger


def writers(
    cluster: LocalCluster, ledgers: list[LedgerId], history: History, seed: int, count: int = N, **options: object
) -> list[Writer]:
    return [
        Writer(
            cluster.gateway_target,
            cluster.registry_target,
            ledger,
            history,
            count=count,
            seed=seed + index,
            writer_id=index,
            **options,  # type: ignore[arg-type]
        )
        for index, ledger in enumerate(ledgers)
    ]


def closed_ledgers(
    cluster: LocalCluster, client: QuireClient, history: History, seed: int, count: int, ledgers: int = 3
) -> list[LedgerId]:
    """`ledgers` ledgers, `count` entries written to each, then closed."""
    made = [new_ledger(client, history) for _ in range(ledgers)]
    running = [w.start() for w in writers(cluster, made, history, seed, count=count)]
    for writer in running:
        writer.join()
        assert writer.error is None, writer.error
    for ledger in made:
        client.close_ledger(ledger.qualified_name)
    return made


def gateway_reaches_all(cluster: LocalCluster, client: QuireClient) -> bool:
    """Whether an add through the gateway to every bookie at once succeeds without
    an ensemble change (the gateway's own channels may still be backing off after a
    fault or a restart although each bookie answers the test)."""
    every = len(cluster.bookie_names)
    try:
        metadata = client.create_ledger(
            ensemble_size=every, write_quorum_size=every, ack_quorum_size=every, password=PASSWORD
        )
    except QuireClientError:
        return False  # placement or the registry is still coming back
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    try:
        client.append_all(ledger, [b"probe"])
        return len(client.ledger_metadata(ledger)[0].ensembles) == 1
    except QuireClientError:
        return False
    finally:
        client.delete_ledger(ledger)


def percentile_ms(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 2)


def latency_figures(all_writers: list[Writer]) -> dict[str, float]:
    latencies = [v for w in all_writers for v in w.latencies_ms()]
    return {
        "add_p50_ms": percentile_ms(latencies, 0.5),
        "add_p99_ms": percentile_ms(latencies, 0.99),
        "add_max_ms": round(max(latencies), 2) if latencies else 0.0,
        "add_mean_ms": round(statistics.fmean(latencies), 2) if latencies else 0.0,
    }


def finish(
    scenario: Scenario, client: QuireClient, history: History, ledgers: list[LedgerId], *, expect_clean: bool = True
) -> Verdict:
    """Recover and read back every ledger, run the checker, report its figures,
    and (unless this is a positive control) require a clean verdict."""
    finals = [read_back(client, ledger.qualified_name, history, PASSWORD) for ledger in ledgers]
    verdict = check(history, finals)
    scenario.figures.update(verdict.figures())
    if expect_clean:
        assert verdict.clean, verdict
        assert not verdict.read_errors, verdict.read_errors
    return verdict


def scrape(http_target: str) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://{http_target}/metrics", timeout=5) as response:
        return str(response.read().decode())


def metric_sum(text: str, name: str) -> float:
    """The sum of every sample of `name` (any labels) in a Prometheus scrape."""
    total = 0.0
    for line in text.splitlines():
        metric = line.split("{", 1)[0].split(" ", 1)[0]
        if metric in (name, f"{name}_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def histogram_quantile(text: str, name: str, quantile: float) -> float:
    """`quantile` of histogram `name` (its `_bucket` lines, every label set
    summed) in a Prometheus scrape, interpolated within the bucket as
    Prometheus's histogram_quantile does; 0.0 when it has no samples."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            upper = float("inf") if bound == "+Inf" else float(bound)
            buckets[upper] = buckets.get(upper, 0.0) + float(line.rsplit(" ", 1)[1])
    bounds = sorted(buckets)
    if not bounds or not buckets[bounds[-1]]:
        return 0.0
    rank = quantile * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for upper in bounds:
        if buckets[upper] >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - below) / max(buckets[upper] - below, 1e-12)
        lower, below = upper, buckets[upper]
    return lower


def direct_add_accepted(bookie_id: str, ledger: LedgerId, entry_id: int) -> bool:
    """A normal (non-recovery) add straight to a bookie, as a stale writer would send it."""
    packed = pack_entry(ledger, entry_id, entry_id - 1, 1024 * (entry_id + 1), b"z" * 1024, Digester(DigestType.CRC32C))
    with grpc.insecure_channel(bookie_id) as channel:
        try:
            bookie_pb2_grpc.BookieServiceStub(channel).AddEntries(
                bookie_pb2.AddEntriesRequest(
                    ledger_id=ledger_id_to_proto(ledger),
                    master_key=master_key(PASSWORD),
                    entries=[bookie_pb2.PackedEntry(entry_id=entry_id, data=packed)],
                ),
                timeout=10,
            )
            return True
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc
            return False


def stale_adds_accepted(ensemble: list[str], ledger: LedgerId, first_entry_id: int) -> tuple[int, int]:
    """A stale writer's next entries (one per ensemble position), sent straight
    to their write sets (Qw = 2) in its old ensemble. Returns how many were
    accepted by Qa = 2 members (a real acceptance) and how many single-bookie
    acceptances there were (fencing may skip one bookie: the coverage rule)."""
    accepted = single = 0
    for offset in range(len(ensemble)):
        entry_id = first_entry_id + offset
        write_set = [ensemble[(entry_id + i) % len(ensemble)] for i in range(2)]
        taken = sum(direct_add_accepted(bookie, ledger, entry_id) for bookie in write_set)
        single += taken
        accepted += int(taken >= 2)
    return accepted, single


def thinly_replicated(cluster: LocalCluster, client: QuireClient, ledger: LedgerId, last: int | None = None) -> int:
    """Entries (up to `last`, by default a closed ledger's end) with fewer
    than Qw good copies (digest and header checked) on the bookies the
    metadata names."""
    metadata, _ = client.ledger_metadata(ledger.qualified_name)
    digester = Digester(metadata.digest_type or DigestType.CRC32C, PASSWORD)
    registered = {r.bookie_id for r in registered_bookies(cluster)}
    expected: dict[str, list[int]] = {}
    last = metadata.last_entry_id if last is None else last
    for entry_id in range(last + 1):
        ensemble = [e for e in metadata.ensembles if e.first_entry_id <= entry_id][-1].bookie_ids
        for i in range(metadata.write_quorum_size):
            expected.setdefault(ensemble[(entry_id + i) % len(ensemble)], []).append(entry_id)
    good: dict[int, int] = dict.fromkeys(range(last + 1), 0)
    for bookie_id, entry_ids in expected.items():
        if bookie_id not in registered:
            continue
        with grpc.insecure_channel(bookie_id) as channel:
            stub = bookie_pb2_grpc.BookieServiceStub(channel)
            for start in range(0, len(entry_ids), 200):
                response = stub.ReadEntries(
                    bookie_pb2.ReadEntriesRequest(
                        ledger_id=ledger_id_to_proto(ledger), entry_ids=entry_ids[start : start + 200]
                    ),
                    timeout=10,
                )
                for entry in response.entries:
                    try:
                        verified_entry(entry.data, digester, ledger, entry.entry_id)
                    except Exception:
                        continue
                    good[entry.entry_id] += 1
    return sum(1 for copies in good.values() if copies < metadata.write_quorum_size)


class HealthWatch:
    """Records the statuses one grpc.health.v1 service goes through (OBS-3),
    from a Watch stream in a thread, until close()."""

    def __init__(self, target: str, service: str, *, wait_for_ready: bool = False) -> None:
        self.statuses: list[str] = []
        self._channel = grpc.insecure_channel(target)
        stub = health_pb2_grpc.HealthStub(self._channel)
        # wait_for_ready: a server not listening yet is waited for, not an error.
        self._stream = stub.Watch(health_pb2.HealthCheckRequest(service=service), wait_for_ready=wait_for_ready)
        self._names = health_pb2.HealthCheckResponse.ServingStatus.Name
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for response in self._stream:
                status = self._names(response.status)
                if not self.statuses or self.statuses[-1] != status:
                    self.statuses.append(status)
        except grpc.RpcError:
            return  # cancelled by close(), or the server went away

    def close(self) -> list[str]:
        self._stream.cancel()
        self._channel.close()
        self._thread.join(timeout=10)
        return self.statuses


class BookieWatch:
    """A client of the registry's WatchBookies, in a thread: the bookies it
    shows registered, how often each one left, and how many events came."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.bookies: set[str] = set()
        self.left: dict[str, int] = {}
        self.events = 0
        self._lock = threading.Lock()
        self._channel = tooling_channel(cluster.registry_target, cluster.tls)
        self._stream = registry_pb2_grpc.RegistryServiceStub(self._channel).WatchBookies(
            registry_pb2.WatchBookiesRequest()
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._stream:
                with self._lock:
                    self.events += 1
                    bookie_id = event.record.bookie_id
                    if event.type == registry_pb2.BOOKIE_EVENT_TYPE_LEFT:
                        self.bookies.discard(bookie_id)
                        self.left[bookie_id] = self.left.get(bookie_id, 0) + 1
                    elif event.type != registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE:
                        self.bookies.add(bookie_id)
        except grpc.RpcError:
            return  # cancelled by close(), or the registry went away

    def snapshot(self) -> set[str]:
        with self._lock:
            return set(self.bookies)

    def close(self) -> None:
        self._stream.cancel()
        self._channel.close()
        self._thread.join(timeout=10)
