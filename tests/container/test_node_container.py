"""The Node.js client's QuireContainer (clients/node/src/container.ts) against
the image: started, written and read through, and a broken start reported
with the container's logs. Needs node and npm, a Docker engine and the image;
skipped otherwise (failed under QUIRE_CONTAINER_TESTS=required when the engine
or image is missing, like the Python container tests)."""

from __future__ import annotations

import pytest

from quire_client.testing.pytest_plugin import quire_test_image, require_container_support
from tests.node_suite import run_node_tests

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]


def test_node_quire_container() -> None:
    image = quire_test_image()
    require_container_support(image)
    env = {"QUIRE_CONTAINER_IMAGE": image, "TESTCONTAINERS_RYUK_DISABLED": "true"}
    output = run_node_tests(["container.test.js"], env)
    assert "# skipped 0" in output, output
