"""Identity rows: a legacy bookie registered with an empty BookieServiceInfo
(ENS-9) is still written to and read from, through the endpoint its
host:port BookieId names (BP-38)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_api.ids import LedgerId
from quire_client.cluster import LocalCluster, StandaloneBookie, tooling_channel
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import client_for, finish, latency_figures, new_ledger, writers

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

ENTRIES = 500


class LegacyRegistration:
    """Holds a RegisterBookie session open for a bookie id with an empty
    service info, heartbeating, the way an old bookie would; ends on close()."""

    def __init__(self, registry_target: str, bookie_id: str, cluster: LocalCluster) -> None:
        self._requests: queue.Queue[registry_pb2.RegisterBookieRequest | None] = queue.Queue()
        self._request = registry_pb2.RegisterBookieRequest(
            bookie_id=bookie_id, service_info=common_pb2.BookieServiceInfo()
        )
        self.first: queue.Queue[object] = queue.Queue()
        self._channel = tooling_channel(registry_target, cluster.tls)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._heartbeat = threading.Thread(target=self._beat, daemon=True)
        self._heartbeat.start()

    def _iterate(self) -> Iterator[registry_pb2.RegisterBookieRequest]:
        while (request := self._requests.get()) is not None:
            yield request

    def _run(self) -> None:
        stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        try:
            for response in stub.RegisterBookie(self._iterate()):
                if self.first.empty():
                    self.first.put(response)
        except Exception as exc:  # the session ends with the channel
            if self.first.empty():
                self.first.put(exc)

    def _beat(self) -> None:
        while not self._stopped.is_set():
            self._requests.put(self._request)
            self._stopped.wait(1.0)

    def close(self) -> None:
        self._stopped.set()
        self._requests.put(None)
        self._channel.close()
        self._thread.join(timeout=10)


@pytest.fixture
def legacy_bookie(tmp_path: Path) -> Iterator[StandaloneBookie]:
    with StandaloneBookie(tmp_path / "legacy") as bookie:
        yield bookie


def test_ens9_empty_service_info_uses_the_id_as_endpoint(
    tmp_path_factory: pytest.TempPathFactory, legacy_bookie: StandaloneBookie, scenario: Scenario
) -> None:
    seed = scenario.start("ENS-9", N=ENTRIES, ledgers=2, bookies="2 + 1 legacy", E=3, Qw=2, Qa=2)
    history = History()
    with fault_cluster(tmp_path_factory.mktemp("legacy"), bookies=2) as cluster:
        registration = LegacyRegistration(cluster.registry_target, legacy_bookie.target, cluster)
        try:
            registered = registration.first.get(timeout=30)
            assert isinstance(registered, registry_pb2.RegisterBookieResponse), registered
            with tooling_channel(cluster.registry_target, cluster.tls) as channel:
                info = registry_pb2_grpc.RegistryServiceStub(channel).GetBookieServiceInfo(
                    registry_pb2.GetBookieServiceInfoRequest(bookie_id=legacy_bookie.target), timeout=5
                )
            assert not info.record.service_info.endpoints, "the stored record stays empty"
            effective = [(e.protocol, e.host, e.port) for e in info.effective_service_info.endpoints]
            scenario.figures["effective_endpoints"] = [f"{proto} {h}:{p}" for proto, h, p in effective]
            assert effective == [("bookie-rpc", "127.0.0.1", legacy_bookie.port)]

            with client_for(cluster) as client:
                # E=3 on three bookies: every ledger's ensemble holds the legacy one.
                ledgers: list[LedgerId] = [new_ledger(client, history) for _ in range(2)]
                for ledger in ledgers:
                    metadata, _ = client.ledger_metadata(ledger.qualified_name)
                    assert legacy_bookie.target in metadata.ensembles[0].bookie_ids
                running = [w.start() for w in writers(cluster, ledgers, history, seed, count=ENTRIES)]
                for writer in running:
                    writer.join()
                    assert writer.error is None, writer.error
                scenario.figures.update(latency_figures(running))
                for ledger in ledgers:
                    metadata, _ = client.ledger_metadata(ledger.qualified_name)
                    assert len(metadata.ensembles) == 1, "no ensemble change: the legacy bookie took its writes"
                verdict = finish(scenario, client, history, ledgers)
                scenario.figures["reads_failing"] = len(verdict.read_errors)
        finally:
            registration.close()
