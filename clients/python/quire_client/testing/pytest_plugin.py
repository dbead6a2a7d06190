"""pytest fixtures for a Quire cluster in your tests.

Enable them in your conftest.py:

    pytest_plugins = ["quire_client.testing.pytest_plugin"]

Fixtures (session-scoped: one cluster for the whole run):

- `quire_local_cluster`: a LocalQuireCluster (processes on loopback; needs etcd).
- `quire_container`: a QuireContainer from the image in QUIRE_TEST_IMAGE
  (default quire:latest). Where it cannot run (no testcontainers, no Docker
  engine, image not built) the tests that use it are skipped with the reason;
  with QUIRE_CONTAINER_TESTS=required they fail instead, so CI cannot pass by
  skipping them silently; with QUIRE_CONTAINER_TESTS=off they are skipped
  even where an engine and an image exist (an image left from an older build
  would test old code: CI sets it when it could not build the image).

QUIRE_TEST_BOOKIES (default 3) sets the number of bookies of both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from quire_client.testing import DEFAULT_IMAGE, LocalQuireCluster, container_support


def _bookies() -> int:
    return int(os.environ.get("QUIRE_TEST_BOOKIES", "3"))


def quire_test_image() -> str:
    return os.environ.get("QUIRE_TEST_IMAGE", DEFAULT_IMAGE)


def require_container_support(image: str) -> None:
    """Skip (or, with QUIRE_CONTAINER_TESTS=required, fail) when the container cannot run."""
    if os.environ.get("QUIRE_CONTAINER_TESTS", "").lower() == "off":
        pytest.skip("container tests skipped: QUIRE_CONTAINER_TESTS=off (the image was not built for this run)")
    reason = container_support(image)
    if reason is None:
        return
    if os.environ.get("QUIRE_CONTAINER_TESTS", "").lower() == "required":
        pytest.fail(f"container tests are required here (QUIRE_CONTAINER_TESTS=required) but: {reason}")
    pytest.skip(f"container tests skipped: {reason}")


@pytest.fixture(scope="session")
def quire_local_cluster() -> Iterator[LocalQuireCluster]:
    with LocalQuireCluster(bookies=_bookies()) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def quire_container() -> Iterator[Any]:
    image = quire_test_image()
    require_container_support(image)
    from quire_client.testing.container import QuireContainer

    with QuireContainer(image, bookies=_bookies()) as container:
        yield container
