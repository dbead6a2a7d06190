"""MET-6: the registry's etcd watch falls into a compaction gap. The
registry reaches etcd through a proxy that is cut for longer than the
bookies' leases; meanwhile a bookie dies for good, every lease expires and
etcd compacts its history. After the cut heals, the registry's watch cannot
resume where it was: it relists, and a client watching the registry
converges on exactly the bookies that are registered."""

from __future__ import annotations

import asyncio
import time

import etcd3aio
import pytest

from quire_client import UnavailableError
from tests.faults.lab import fault_cluster
from tests.faults.proxy import TcpProxy
from tests.faults.report import Scenario
from tests.faults.scenarios import BookieWatch, registered_bookies
from tests.waiting import EVENT_DEADLINE_SECONDS

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

CUT_SECONDS = 6  # twice the 3 s lease


def compact(etcd_port: int) -> int:
    async def run() -> int:
        admin = etcd3aio.Etcd3Client([f"127.0.0.1:{etcd_port}"])
        await admin.connect()
        try:
            kv = admin.kv
            assert kv is not None
            revision = int((await kv.get(b"/")).header.revision)
            await kv.compact(revision)
            return revision
        finally:
            await admin.close()

    return asyncio.run(run())


def test_met6_registry_watch_relists_after_a_compaction_gap(
    tmp_path_factory: pytest.TempPathFactory, scenario: Scenario
) -> None:
    seed = scenario.start("MET-6", bookies=3, cut_seconds=CUT_SECONDS, lease_ttl_seconds=3)
    with (
        fault_cluster(tmp_path_factory.mktemp("watch"), bookies=3) as cluster,
        TcpProxy("127.0.0.1", cluster.ports.etcd, seed=seed) as proxy,
    ):
        registry = cluster.processes["registry"]
        registry.env["QUIRE_ETCD_ENDPOINTS"] = proxy.address
        cluster.restart("registry")
        cluster.wait_bookies_registered(3)
        view = BookieWatch(cluster)
        try:
            ids = {name: cluster.bookie_id(name) for name in cluster.bookie_names}
            deadline = time.monotonic() + EVENT_DEADLINE_SECONDS
            while view.snapshot() != set(ids.values()):
                assert time.monotonic() < deadline, f"the watch never showed every bookie: {view.snapshot()}"
                time.sleep(0.1)

            proxy.faults.drop = 1.0  # every chunk dropped and its connection reset: etcd is unreachable
            proxy.reset_all()
            cluster.kill("bookie-3")  # gone for good while the registry cannot see it leave
            time.sleep(CUT_SECONDS)  # every lease expires in etcd meanwhile
            scenario.figures["compacted_at_revision"] = compact(cluster.ports.etcd)
            proxy.faults.drop = 0.0
            healed = time.monotonic()

            expected = {ids["bookie-1"], ids["bookie-2"]}
            while True:
                try:
                    listed = {r.bookie_id for r in registered_bookies(cluster)}
                except UnavailableError:  # the registry is still reconnecting to etcd
                    listed = set()
                watched = view.snapshot()
                if listed == expected and watched == expected:
                    break
                assert time.monotonic() - healed < EVENT_DEADLINE_SECONDS, (
                    f"not converged: listed {listed}, watched {watched}"
                )
                time.sleep(0.2)
            scenario.figures["seconds_to_converge"] = round(time.monotonic() - healed, 2)
            time.sleep(1)  # nothing stale arrives late
            scenario.figures["stale_entries_after_relist"] = len(view.snapshot() ^ expected)
            scenario.figures["watch_events"] = view.events
        finally:
            view.close()
            del registry.env["QUIRE_ETCD_ENDPOINTS"]
        relisted = "relisting" in cluster.log_path("registry").read_text()
        scenario.figures["registry_relisted"] = relisted
    assert scenario.figures["stale_entries_after_relist"] == 0
    assert relisted, "the registry never saw the compaction: the scenario did not hit the gap"
