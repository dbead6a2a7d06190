"""The container tests: the all-in-one image under testcontainers.

They need a Docker engine and the image (`make image`); without them they are
skipped with the reason (`-ra` prints it), or fail under
QUIRE_CONTAINER_TESTS=required, which .ci/run sets when it built the image.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Ryuk, testcontainers' reaper, is an image from Docker Hub; every container
# here is stopped by its own fixture, so the reaper is not needed.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from quire_client.testing.pytest_plugin import quire_container  # noqa: F401  (the fixture)
from tests.container.docker_tcp import DockerOverTcp, local_engine_socket


@pytest.fixture(scope="module")
def docker_over_tcp() -> Iterator[DockerOverTcp]:
    relay = DockerOverTcp(local_engine_socket())
    try:
        yield relay
    finally:
        relay.close()
