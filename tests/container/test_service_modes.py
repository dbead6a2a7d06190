"""The image's per-service modes, run the way the Kubernetes manifests run them:
one container per service, non-root, read-only root filesystem, settings from
QUIRE_* variables, the bookie named like a StatefulSet pod; then the init Job's
own script from the manifest, a ledger through the gateway from the host, and a
graceful stop of every container."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from quire_api.ids import LedgerId
from quire_client import QuireClient
from quire_client.cluster import free_port
from quire_client.testing.health import wait_until_serving
from quire_client.testing.pytest_plugin import quire_test_image, require_container_support

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]


class PodLikeContainers:
    """Starts containers like pods (host network, read-only root, uid 10001) and removes them."""

    def __init__(self, image: str) -> None:
        import docker

        self.image = image
        self.client = docker.from_env()
        self.containers: list[Any] = []

    def run(self, name: str, args: list[str], env: dict[str, str], writable: tuple[str, ...] = ()) -> Any:
        container = self.client.containers.run(
            self.image,
            args,
            # Plaintext, as the dev overlay runs them (TLS is tested in tests/e2e/test_security.py).
            environment={"QUIRE_INSECURE_PLAINTEXT_DEV": "true", **env},
            network_mode="host",
            read_only=True,
            user="10001:10001",
            tmpfs={"/tmp": "", **{path: "uid=10001,gid=10001" for path in writable}},
            labels={"quire.test": name},
            detach=True,
        )
        self.containers.append(container)
        return container

    def logs(self) -> str:
        return "\n".join(
            f"--- {c.labels.get('quire.test')} ---\n{c.logs(tail=20).decode(errors='replace')}" for c in self.containers
        )

    def stop_all(self) -> dict[str, int]:
        """SIGTERM in reverse start order, as a rollout would; exit codes by name."""
        codes = {}
        for container in reversed(self.containers):
            container.stop(timeout=30)
            container.reload()
            codes[container.labels["quire.test"]] = container.attrs["State"]["ExitCode"]
        return codes

    def remove_all(self) -> None:
        for container in self.containers:
            container.remove(force=True)
        self.containers.clear()
        self.client.close()


@pytest.fixture
def pods() -> Iterator[PodLikeContainers]:
    image = quire_test_image()
    require_container_support(image)
    containers = PodLikeContainers(image)
    try:
        yield containers
    finally:
        containers.remove_all()


def init_job_script() -> str:
    job = next(yaml.safe_load_all((ROOT / "deploy/kubernetes/base/init-job.yaml").read_text()))
    return str(job["spec"]["template"]["spec"]["containers"][0]["args"][0])


def test_services_in_their_own_containers_form_a_cluster(pods: PodLikeContainers) -> None:
    etcd, etcd_peer, registry, placement, gateway = (free_port() for _ in range(5))
    registry_http, placement_http, gateway_http = (free_port() for _ in range(3))
    bookie_ports, bookie_http_ports = [free_port(), free_port()], [free_port(), free_port()]
    pods.run(
        "etcd",
        [
            "etcd",
            "--name=quire-etcd-0",
            "--data-dir=/var/lib/etcd/data",
            f"--listen-client-urls=http://127.0.0.1:{etcd}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=quire-etcd-0=http://127.0.0.1:{etcd_peer}",
        ],
        {},
        writable=("/var/lib/etcd",),
    )
    pods.run(
        "registry",
        ["registry"],
        {
            "QUIRE_REGISTRY_ADDRESS": f"0.0.0.0:{registry}",
            "QUIRE_REGISTRY_HTTP_PORT": str(registry_http),
            "QUIRE_ETCD_ENDPOINTS": f"127.0.0.1:{etcd}",
        },
    )
    try:
        wait_until_serving([f"127.0.0.1:{registry}"], 60)
        for index, (port, http_port) in enumerate(zip(bookie_ports, bookie_http_ports, strict=True)):
            pods.run(
                f"bookie-{index}",
                ["bookie"],
                {
                    "QUIRE_BOOKIE_ID": f"quire-bookie-{index}",  # the pod name, as the downward API gives it
                    "QUIRE_BOOKIE_ADVERTISED_HOST": "localhost",
                    "QUIRE_BOOKIE_LISTEN_HOST": "0.0.0.0",
                    "QUIRE_BOOKIE_PORT": str(port),
                    "QUIRE_BOOKIE_HTTP_PORT": str(http_port),
                    "QUIRE_BOOKIE_DATA_DIR": "/data/bookie",
                    "QUIRE_REGISTRY_TARGET": f"127.0.0.1:{registry}",
                },
                writable=("/data",),
            )
        pods.run(
            "placement",
            ["placement"],
            {
                "QUIRE_PLACEMENT_ADDRESS": f"0.0.0.0:{placement}",
                "QUIRE_PLACEMENT_HTTP_PORT": str(placement_http),
                "QUIRE_REGISTRY_TARGET": f"127.0.0.1:{registry}",
            },
        )
        pods.run(
            "gateway",
            ["gateway"],
            {
                "QUIRE_GATEWAY_ADDRESS": f"0.0.0.0:{gateway}",
                "QUIRE_GATEWAY_HTTP_PORT": str(gateway_http),
                "QUIRE_REGISTRY_TARGET": f"127.0.0.1:{registry}",
                "QUIRE_PLACEMENT_TARGET": f"127.0.0.1:{placement}",
            },
        )
        wait_until_serving([f"127.0.0.1:{p}" for p in [*bookie_ports, placement, gateway]], 60)
    except TimeoutError as exc:
        pytest.fail(f"{exc}\n{pods.logs()}")

    # The init Job's script, verbatim from the manifest, run as the Job runs it.
    init = pods.client.containers.run(
        pods.image,
        ["-c", init_job_script()],
        entrypoint="/bin/sh",
        environment={
            "QUIRE_REGISTRY": f"127.0.0.1:{registry}",
            "QUIRE_GATEWAY": f"127.0.0.1:{gateway}",
            "QUIRE_INIT_MIN_BOOKIES": "2",
        },
        network_mode="host",
        read_only=True,
        user="10001:10001",
        remove=True,
    ).decode()
    assert "quire-init: registry" in init and "2 writable bookies" in init
    assert "quire-bookie-0" in init and "quire-bookie-1" in init

    with QuireClient(f"127.0.0.1:{gateway}", timeout=30) as quire:
        metadata = quire.create_ledger(ensemble_size=2, write_quorum_size=2, ack_quorum_size=2)
        ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
        quire.append_all(ledger, [b"one", b"two"])
        assert [entry.payload for entry in quire.read(ledger)] == [b"one", b"two"]
        quire.close_ledger(ledger)

    # The admin endpoints Prometheus scrapes (the manifests' prometheus.io/port).
    for http_port in [registry_http, placement_http, gateway_http, *bookie_http_ports]:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as response:
            assert response.status == 200

    # SIGTERM drains every service; none needs the SIGKILL that follows the grace period.
    assert set(pods.stop_all().values()) == {0}
