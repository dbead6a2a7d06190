"""The telemetry stage on a real standalone Spark cluster (a master and two
one-core workers, tests/telemetry/standalone.py), submitted with the very
spark-submit command docs/telemetry.md gives, over the telemetry of a real
Quire cluster, publishing to that cluster's registry.

Batch: the same report and load factors as a local run on the same input, with
tasks run by executors on both workers. Follow: the stream goes on, and keeps
publishing, after one worker is SIGKILLed with its executor.

The follow test kills a worker of the module's Spark cluster, so it comes last.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from quire_client import QuireClient
from quire_client.cluster import LocalCluster, Ports
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from quire_telemetry.stage import analyze
from tests.telemetry.standalone import (
    Daemon,
    StandaloneSpark,
    documented_submit_command,
    java_missing_reason,
    spark_env,
)
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(java_missing_reason() is not None, reason=java_missing_reason() or ""),
    # Several JVMs on a busy two-core machine: deadlines, never speed, decide.
    pytest.mark.timeout(900),
]

SLOW = "bookie-3"


@dataclass
class ObservedRun:
    cluster: LocalCluster
    telemetry: Path  # a copy of the files as they were after the writes: a fixed input

    def files_of(self, name: str) -> list[Path]:
        """The telemetry files process `name` wrote (`<service>-<pid>-<kind>.<n>.jsonl`)."""
        pid = self.cluster.pid(name)
        return sorted(self.telemetry.glob(f"{name.split('-')[0]}-{pid}-*.jsonl"))


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    spark = StandaloneSpark(tmp_path_factory.mktemp("spark-standalone"))
    spark.start()
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObservedRun]:
    """A Quire cluster with one slow bookie after some writes; it keeps running
    as the registry the stage publishes to."""
    data = tmp_path_factory.mktemp("quire")
    cluster = LocalCluster(
        data,
        Ports.free(bookies=3),
        extra_env={
            "QUIRE_TELEMETRY_DIR": str(data / "telemetry"),
            "QUIRE_BOOKIE_TTL_SECONDS": "3",
            "QUIRE_BOOKIE_DISK_CHECK_INTERVAL_SECONDS": "0.5",  # disk samples enough for a trend
        },
        bookie_env={SLOW: {"QUIRE_BOOKIE_FAULT_SYNC_DELAY_SECONDS": "0.03"}},
    )
    cluster.start()
    try:
        with QuireClient(cluster.gateway_target, timeout=30) as client:
            for _ in range(4):
                metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2)
                ledger = f"{metadata.ledger_id.scope_id}:{metadata.ledger_id.ledger_id}"
                for _ in range(20):
                    client.append_all(ledger, [b"q" * 1024] * 5)
        # Spans are exported every half second; bookies sample their disks as they go.
        samples = data / "telemetry"
        wait_until("every bookie's disk samples", lambda: len(list(samples.glob("bookie-*-samples.*.jsonl"))) == 3)
        time.sleep(1.5)
        frozen = data / "telemetry-copy"
        shutil.copytree(data / "telemetry", frozen)
        yield ObservedRun(cluster, frozen)
    finally:
        cluster.stop()


def stored_weights(registry: str) -> dict[str, registry_pb2.LoadWeight]:
    with grpc.insecure_channel(registry) as channel:
        response = registry_pb2_grpc.RegistryServiceStub(channel).ListLoadWeights(
            registry_pb2.ListLoadWeightsRequest(), timeout=10
        )
    return {w.bookie_id: w for w in response.weights}


def submit(
    tmp_path: Path, spark: StandaloneSpark, telemetry: Path, reports: Path, registry: str, *extra: str
) -> Daemon:
    """Run the documented command in a shell of its own session, its output to
    `submit.log`; the event log of the application goes to `events/`."""
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    # Through spark-defaults.conf, as a cluster's operator would set it, so the
    # command itself stays exactly the documented one.
    (tmp_path / "events").mkdir(exist_ok=True)
    (conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\n"
        f"spark.eventLog.dir file://{tmp_path / 'events'}\n"
        # One plain JSON-lines file per application (Spark 4 rolls and compresses by default).
        "spark.eventLog.rolling.enabled false\n"
        "spark.eventLog.compress false\n"
    )
    env = spark_env(conf)
    env.update(SPARK_MASTER=spark.url, TELEMETRY=str(telemetry), REPORTS=str(reports), REGISTRY=registry)
    command = documented_submit_command().rstrip() + "".join(f" {arg}" for arg in extra)
    log = tmp_path / "submit.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Daemon("spark-submit", process, log)


def tasks_per_executor(events: Path) -> tuple[str, dict[str, int]]:
    """From the one event log in `events`: the application id, and successful
    tasks per executor id."""
    (log,) = list(events.iterdir())
    app_id, done = "", {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event["Event"] == "SparkListenerApplicationStart":
            app_id = event["App ID"]
        elif event["Event"] == "SparkListenerTaskEnd" and event["Task End Reason"]["Reason"] == "Success":
            executor = event["Task Info"]["Executor ID"]
            done[executor] = done.get(executor, 0) + 1
    return app_id, done


def test_a_batch_run_on_two_workers_equals_a_local_run_and_publishes(spark, spark_cluster, observed, tmp_path):
    assert len(spark_cluster.alive_workers()) == 2
    registry = observed.cluster.registry_target
    reports = tmp_path / "reports"
    driver = submit(tmp_path, spark_cluster, observed.telemetry, reports, registry)
    try:
        code = driver.process.wait(timeout=600)
    finally:
        driver.stop()
    assert code == 0, driver.log.read_text(errors="replace")[-5000:]
    assert f"published 3 load factors to the registry at {registry}" in driver.log.read_text()

    # What the issue lists: Parquet, the summary, the charts and the factors.
    for dataset in ("bookie_windows", "cluster_windows"):
        assert list((reports / dataset).glob("date=*/*.parquet")), dataset
    assert list((reports / "disk_trend.parquet").glob("*.parquet"))
    for chart in ("add_latency_p99.png", "free_disk.png"):
        assert (reports / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    factors = json.loads((reports / "load_factors.json").read_text())
    slow_id = observed.cluster.bookie_id(SLOW)
    assert set(factors) == {observed.cluster.bookie_id(name) for name in observed.cluster.bookie_names}

    # The same input in one local process: the same report, to the digit.
    local = analyze(observed.telemetry, tmp_path / "local", spark=spark)
    assert factors == local.load_factors
    assert (reports / "summary.md").read_text() == (tmp_path / "local" / "summary.md").read_text()
    assert factors[slow_id] < 1.0, factors  # the slow bookie shows: the factors are not trivially equal

    stored = stored_weights(registry)
    assert {b: w.factor for b, w in stored.items()} == factors

    # Executors on both workers ran tasks, and the package reached both.
    app_id, done = tasks_per_executor(tmp_path / "events")
    per_worker = spark_cluster.executor_dirs(app_id)
    for worker, executors in per_worker.items():
        assert executors, f"worker {worker} started no executor for {app_id}"
        assert sum(done.get(e.name, 0) for e in executors) > 0, (worker, done)
        assert all((e / "quire_telemetry.zip").is_file() for e in executors), executors


def test_follow_goes_on_publishing_after_a_worker_is_killed(spark_cluster, observed, tmp_path):
    """The stream starts on two workers without bookie-3's files; one worker is
    SIGKILLed with its executor, bookie-3's files arrive, and the factors
    published next include bookie-3."""
    assert len(spark_cluster.alive_workers()) == 2
    registry = observed.cluster.registry_target
    late = observed.files_of(SLOW)
    assert late, "bookie-3 wrote no telemetry"
    growing = tmp_path / "telemetry"
    growing.mkdir()
    for path in sorted(set(observed.telemetry.glob("*.jsonl")) - set(late)):
        shutil.copy(path, growing / path.name)
    early_ids = {observed.cluster.bookie_id(n) for n in observed.cluster.bookie_names if n != SLOW}

    started = time.time()
    driver = submit(
        tmp_path, spark_cluster, growing, tmp_path / "reports", registry, "--follow", "--trigger-seconds", "2"
    )
    try:

        def published_since(moment: float, bookie_ids: set[str]) -> bool:
            assert driver.alive(), driver.log.read_text(errors="replace")[-5000:]
            fresh = {b for b, w in stored_weights(registry).items() if w.computed_at.ToMicroseconds() / 1e6 >= moment}
            return bookie_ids <= fresh

        wait_until("the first trigger's factors in the registry", lambda: published_since(started, early_ids))

        spark_cluster.kill_worker(2)
        killed = time.time()
        wait_until("the master to see one worker alive", lambda: len(spark_cluster.alive_workers()) == 1)
        for path in late:  # written aside and renamed in: the stream never sees half a file
            shutil.copy(path, growing / f"{path.name}.part")
            (growing / f"{path.name}.part").rename(growing / path.name)

        slow_id = observed.cluster.bookie_id(SLOW)
        wait_until("factors with bookie-3 after the kill", lambda: published_since(killed, early_ids | {slow_id}))
        assert driver.alive()
    finally:
        driver.stop(signum=signal.SIGINT)  # Ctrl-C: the driver stops its query and session
