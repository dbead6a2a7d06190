"""The Node.js client's QuireContainer (clients/node/src/container.ts) against
the image: started, written and read through, and a broken start reported
with the container's logs; both with the engine on its local socket and
reached over DOCKER_HOST=tcp://127.0.0.1:<port> (conftest.py's relay), where
the container is reached through its published ports. Needs node and npm, a
Docker engine and the image;
skipped otherwise (failed under QUIRE_CONTAINER_TESTS=required when the engine
or image is missing, like the Python container tests)."""

from __future__ import annotations

import pytest

from quire_client.testing.pytest_plugin import quire_test_image, require_container_support
from tests.container.docker_tcp import DockerOverTcp
from tests.node_suite import run_node_tests

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]


@pytest.mark.parametrize("engine", ["local-socket", "tcp"])
def test_node_quire_container(engine: str, request: pytest.FixtureRequest) -> None:
    image = quire_test_image()
    require_container_support(image)
    env = {"QUIRE_CONTAINER_IMAGE": image, "TESTCONTAINERS_RYUK_DISABLED": "true"}
    if engine == "tcp":
        relay: DockerOverTcp = request.getfixturevalue("docker_over_tcp")
        env["DOCKER_HOST"] = relay.docker_host
    output = run_node_tests(["container.test.js"], env)
    assert "# skipped 0" in output, output
    if engine == "tcp":
        assert relay.connections > 0  # node's testcontainers went through the relay
