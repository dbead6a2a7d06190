"""The telemetry CronJob's image: the stage runs in it as the CronJob runs it
(non-root, read-only root, spans under per-pod directories in /telemetry)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from quire_client.testing.pytest_plugin import require_container_support
from quire_telemetry import synthetic

pytestmark = pytest.mark.container

START_S = 1_767_225_600  # 2026-01-01T00:00:00Z


def test_the_telemetry_stage_runs_in_its_image(tmp_path: Path) -> None:
    import docker
    import docker.errors

    image = os.environ.get("QUIRE_TEST_TELEMETRY_IMAGE", "quire-telemetry:latest")
    require_container_support(image)
    telemetry, reports = tmp_path / "telemetry", tmp_path / "reports"
    # One directory per pod, as the manifests mount them (subPathExpr: $(POD_NAME)).
    synthetic.write(telemetry / "quire-bookie-0" / "bookie-1-spans.0.jsonl", synthetic.records(2, 200, START_S, 600))
    reports.mkdir()
    reports.chmod(0o777)  # the container runs as uid 10001
    client = docker.from_env()
    try:
        output = client.containers.run(
            image,
            ["telemetry", "analyze", "--input", "/telemetry", "--output", "/reports", "--master", "local[1]"],
            volumes={str(telemetry): {"bind": "/telemetry", "mode": "ro"}, str(reports): {"bind": "/reports"}},
            network_mode="host",
            read_only=True,
            user="10001:10001",
            # Spark unpacks native libraries (snappy) into /tmp and loads them from
            # there: Docker mounts tmpfs noexec unless told; a Kubernetes emptyDir allows it.
            tmpfs={"/tmp": "exec,mode=1777"},
            remove=True,
        ).decode()
    except docker.errors.ContainerError as exc:
        pytest.fail(f"the telemetry stage failed in {image}: ...{str(exc)[-3000:]}")
    finally:
        client.close()
    assert (reports / "summary.md").exists(), output
    factors = json.loads((reports / "load_factors.json").read_text())
    assert set(factors) >= {"bookie-0", "bookie-1"}, factors
