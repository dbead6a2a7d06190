"""The Node.js client's QuireContainer (clients/node/src/container.ts) against
the image: started, written and read through, and a broken start reported with
the container's logs; with the engine on its local socket and reached over
DOCKER_HOST=tcp://127.0.0.1:<port> or tcp://<this machine's name>:<port>
(docker_tcp.py's relay), where the container answers on its published ports.
Needs node and npm, a Docker engine and the image; skipped otherwise (failed
under QUIRE_CONTAINER_TESTS=required when the engine or image is missing, like
the Python container tests)."""

from __future__ import annotations

import pytest

from quire_client.testing.pytest_plugin import quire_test_image, require_container_support
from tests.container.docker_tcp import ENGINES, DockerOverTcp, engine_docker_host
from tests.node_suite import run_node_tests

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]


@pytest.mark.parametrize("engine", ENGINES)
def test_node_quire_container(engine: str, request: pytest.FixtureRequest) -> None:
    image = quire_test_image()
    require_container_support(image)
    env = {"QUIRE_CONTAINER_IMAGE": image, "TESTCONTAINERS_RYUK_DISABLED": "true"}
    docker_host = engine_docker_host(engine, request)
    if docker_host is not None:
        env["DOCKER_HOST"] = docker_host
    output = run_node_tests(["container.test.js"], env)
    assert "# skipped 0" in output, output
    if docker_host is not None:
        relay: DockerOverTcp = request.getfixturevalue("docker_over_tcp")
        assert relay.connections > 0  # node's testcontainers went through the relay
