"""Clock rows: a bookie's wall clock jumping five minutes either way (OPS-2)
costs no lease and no write. libfaketime moves the wall clock of two bookies
while they serve; their monotonic clock is left alone, as an NTP step would."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_api.ids import LedgerId
from quire_client.cluster import LocalCluster
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import BookieWatch, N, client_for, finish, latency_figures, new_ledger, writers

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
# Makes time.sleep work under libfaketime (faketime_shim/sitecustomize.py says why).
SLEEP_SHIM = Path(__file__).parent / "faketime_shim"
SKEWED = ("bookie-1", "bookie-2")


def faketime_env(offset_file: Path) -> dict[str, str]:
    offset_file.write_text("+0\n")
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",  # read the offset on every call, so it can jump mid-run
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SLEEP_SHIM), os.environ.get("PYTHONPATH", "")])),
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} is missing: install Debian's faketime (make setup does)")
    data_dir = tmp_path_factory.mktemp("clock")
    bookie_env = {name: faketime_env(data_dir / f"{name}.faketime") for name in SKEWED}
    telemetry = {"QUIRE_TELEMETRY_DIR": str(data_dir / "telemetry")}
    with fault_cluster(data_dir, bookies=3, env=telemetry, bookie_env=bookie_env) as local:
        yield local


def sampled_skew_seconds(telemetry: Path, bookie_id: str, started: float, ended: float) -> tuple[int, int]:
    """How far outside the real [started, ended] window the bookie's own clock
    put its disk samples (taken every 200 ms, stamped with its wall clock)."""
    skews = [0.0]
    for path in telemetry.glob("bookie-*-samples.*.jsonl"):
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            if sample.get("instance") != bookie_id:
                continue
            stamp = sample["time_unix_nano"] / 1e9
            skews.append(stamp - ended if stamp > ended else stamp - started if stamp < started else 0.0)
    return round(min(skews)), round(max(skews))


def test_ops2_wall_clock_jumps_cost_no_lease(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("OPS-2", N=N, ledgers=2, skew_seconds=[300, -300], lease_ttl_seconds=3, bookies=list(SKEWED))
    history = History()
    watch = BookieWatch(cluster)
    offsets = {name: cluster.data_dir / f"{name}.faketime" for name in SKEWED}
    ids = {name: cluster.bookie_id(name) for name in cluster.bookie_names}
    try:
        with client_for(cluster) as client:
            ledgers: list[LedgerId] = [new_ledger(client, history) for _ in range(2)]  # E=3: every bookie
            started = time.time()
            running = [w.start() for w in writers(cluster, ledgers, history, seed, pace_seconds=0.004)]
            # Jump the wall clocks while the writers run, then jump them the other way
            # (each jump is past the 3 s lease), and give each state a few lease periods.
            for first, second in (("+5m", "-5m"), ("-5m", "+5m"), ("+0", "+0")):
                offsets["bookie-1"].write_text(first + "\n")
                offsets["bookie-2"].write_text(second + "\n")
                time.sleep(4)
            for writer in running:
                writer.join()
                assert writer.error is None, writer.error
            ended = time.time()
            scenario.figures.update(latency_figures(running))
            ensemble_changes = 0
            for ledger in ledgers:
                metadata, _ = client.ledger_metadata(ledger.qualified_name)
                ensemble_changes += len(metadata.ensembles) - 1
            finish(scenario, client, history, ledgers)
    finally:
        watch.close()
        for path in offsets.values():
            path.write_text("+0\n")
    time.sleep(1)  # the samples are written as they are taken; let the last ones land
    skews = {name: sampled_skew_seconds(cluster.data_dir / "telemetry", ids[name], started, ended) for name in SKEWED}
    spurious = sum(watch.left.get(ids[name], 0) for name in cluster.bookie_names)
    scenario.figures.update(
        {
            "sampled_wall_clock_skew_seconds_min_max": skews,
            "spurious_lease_losses": spurious,
            "ensemble_changes": ensemble_changes,
        }
    )
    assert all(low <= -240 and high >= 240 for low, high in skews.values()), f"the clocks did not jump: {skews}"
    # The jumps, not the tool that makes them, are the fault: a skewed bookie whose thread died
    # of libfaketime (every time.sleep failing without the shim) would not be a bookie whose
    # clock jumped.
    broken = {name: "Traceback" in cluster.log_path(name).read_text() for name in cluster.bookie_names}
    assert not any(broken.values()), f"a bookie logged a traceback: {broken}"
    assert spurious == 0, watch.left
    assert ensemble_changes == 0
