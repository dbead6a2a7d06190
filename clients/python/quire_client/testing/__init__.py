"""Quire for your tests: a whole cluster in a container or as local processes.

    from quire_client.testing import QuireContainer, LocalQuireCluster

    with QuireContainer().with_bookies(3) as quire:        # the all-in-one image
        client = QuireClient(quire.get_gateway_target())

    with LocalQuireCluster().with_bookies(3) as quire:     # no Docker: processes on loopback
        ...

Both have the same getters (`get_gateway_target()`, `get_registry_target()`,
`get_placement_target()`, `get_etcd_endpoint()`) and return from `start()` /
`__enter__` only once gRPC health reports SERVING. pytest fixtures for both
live in `quire_client.testing.pytest_plugin`.

`QuireContainer` needs the optional `testcontainers` package
(`pip install 'quire-ledger-client[testing]'`); it is imported only when `QuireContainer` is
used, so `LocalQuireCluster` works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quire_client.testing.health import StartupError, wait_until_serving
from quire_client.testing.local import LocalQuireCluster

if TYPE_CHECKING:
    from quire_client.testing.container import QuireContainer, QuireContainerError

__all__ = [
    "DEFAULT_IMAGE",
    "LocalQuireCluster",
    "QuireContainer",
    "QuireContainerError",
    "StartupError",
    "container_support",
    "wait_until_serving",
]

DEFAULT_IMAGE = "quire:latest"


def container_support(image: str = DEFAULT_IMAGE) -> str | None:
    """Why QuireContainer cannot run here, or None when it can: testcontainers
    is installed, a Docker engine answers, has a bridge network, and `image`
    is present locally."""
    try:
        import docker
        import docker.errors
        import testcontainers  # noqa: F401
    except ImportError:
        return "testcontainers is not installed (pip install 'quire-ledger-client[testing]')"
    try:
        client = docker.from_env(timeout=10)
    except docker.errors.DockerException as exc:
        return f"no Docker engine reachable ({exc}); start one with scripts/docker-engine.sh start"
    try:
        client.ping()
        client.images.get(image)
        if not client.networks.list(names=["bridge"]):
            return (
                "the Docker engine has no bridge network (dockerd --bridge=none), which QuireContainer "
                "publishes its ports on; restart it with one (scripts/docker-engine.sh stop, then start) "
                "or pass host_network=True"
            )
    except docker.errors.ImageNotFound:
        return f"image {image} is not built; run `make image`"
    except docker.errors.DockerException as exc:
        return f"no Docker engine reachable ({exc}); start one with scripts/docker-engine.sh start"
    finally:
        client.close()
    return None


def __getattr__(name: str) -> Any:
    # testcontainers (and the docker SDK) load only when the container is asked for.
    if name in ("QuireContainer", "QuireContainerError"):
        from quire_client.testing import container

        return getattr(container, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
