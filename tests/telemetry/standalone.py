"""A real standalone Spark cluster on 127.0.0.1, from the pyspark distribution
itself: one master and workers of one core each, every one a `spark-class`
process with its own work directory.

Each daemon is started in a session of its own, so its process group id is its
PID and takes in what it starts: a worker's executors are in the worker's group.
Stopping (or losing) a worker by its group ends its executors with it, as losing
its machine would; nothing is found or killed by name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quire_client.cluster import free_port
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def documented_submit_command() -> str:
    """The spark-submit block of docs/telemetry.md, as written there: what the
    tests run and the Kubernetes CronJob's script holds."""
    text = (ROOT / "docs" / "telemetry.md").read_text()
    blocks = [
        b for b in re.findall(r"```sh\n(.*?)```", text, re.DOTALL) if 'spark-submit --master "$SPARK_MASTER"' in b
    ]
    assert len(blocks) == 1, "docs/telemetry.md should give exactly one spark-submit block"
    return blocks[0]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env(conf_dir: Path | None = None) -> dict[str, str]:
    """The environment for spark-class, spark-submit and what they start:
    loopback only, this virtualenv's Python (and its bin, with spark-submit)
    first on PATH, for the driver and the executors alike."""
    env = dict(os.environ)
    env["SPARK_HOME"] = str(spark_home())
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # The daemons only route work; the default 1 GiB heap each is more than they use.
    env["SPARK_DAEMON_MEMORY"] = "256m"
    if conf_dir is not None:
        env["SPARK_CONF_DIR"] = str(conf_dir)
    return env


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass  # the whole group has already gone

    def stop(self, timeout: float = 20.0, signum: int = signal.SIGTERM) -> None:
        """`signum` to the group, SIGKILL to it if the daemon outlives `timeout`."""
        self.signal_group(signum)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        # Also reaps anything of the group that ignored SIGTERM (an executor mid-task).
        self.signal_group(signal.SIGKILL)
        self.process.wait(timeout=10)


class StandaloneSpark:
    """Master and `workers` workers (1 core, `worker_memory` each) on 127.0.0.1."""

    def __init__(self, root: Path, workers: int = 2, worker_memory: str = "1g") -> None:
        self.root = root
        self.port = free_port()
        self.webui_port = free_port()
        self.worker_count = workers
        self.worker_memory = worker_memory
        self.master: Daemon | None = None
        self.workers: list[Daemon] = []
        self.work_dirs: list[Path] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> Daemon:
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=spark_env(),
                cwd=self.root,
                start_new_session=True,
            )
        return Daemon(name, process, log)

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self.master = self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(self.webui_port),
            )  # fmt: skip
            for i in range(1, self.worker_count + 1):
                work_dir = self.root / f"worker-{i}"
                work_dir.mkdir(exist_ok=True)
                self.work_dirs.append(work_dir)
                self.workers.append(
                    self._start(
                        f"worker-{i}",
                        "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1",
                        "--webui-port", str(free_port()),
                        "--cores", "1",
                        "--memory", self.worker_memory,
                        "--work-dir", str(work_dir),
                        self.url,
                    )
                )  # fmt: skip
            wait_until(f"{self.worker_count} workers alive at the Spark master", self._all_alive)
        except BaseException:
            self.stop()
            raise

    def _all_alive(self) -> bool:
        for daemon in [self.master, *self.workers]:
            assert daemon is not None
            if not daemon.alive():
                tail = daemon.log.read_text(errors="replace")[-3000:]
                raise AssertionError(f"Spark {daemon.name} exited {daemon.process.returncode}:\n{tail}")
        try:
            return len(self.alive_workers()) == self.worker_count
        except OSError:
            return False  # the master's web UI is not up yet

    def status(self) -> dict[str, Any]:
        """The master's JSON status page: workers, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as response:
            status: dict[str, Any] = json.load(response)
        return status

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.status()["workers"] if w["state"] == "ALIVE"]

    def executor_dirs(self, app_id: str) -> dict[int, list[Path]]:
        """Per worker (1, 2, ...): the executor directories it made for `app_id`
        (`<work dir>/<app id>/<executor id>`)."""
        return {
            i: sorted(p for p in (work_dir / app_id).glob("*") if p.is_dir())
            for i, work_dir in enumerate(self.work_dirs, start=1)
        }

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker `index` (1-based) and its executors: a lost machine."""
        worker = self.workers[index - 1]
        worker.signal_group(signal.SIGKILL)
        worker.process.wait(timeout=10)

    def stop(self) -> None:
        for daemon in [*reversed(self.workers), self.master]:
            if daemon is not None:
                daemon.stop()


def java_missing_reason() -> str | None:
    """Why the Spark tests cannot run here, or None. Only a missing Java runtime
    is a reason: `make setup` installs one (scripts/setup.sh)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (java not on PATH, JAVA_HOME unset): `make setup` installs openjdk-17-jre-headless"
    return None
