"""docs/clients.md's Python examples, run as programs: the guide cannot drift
from the clients. Its examples in order against a local cluster of three
gateways; its TLS example against a cluster with mutual TLS and tokens; its
testcontainers example against the all-in-one image, where a Docker engine
and the image exist (skipped, or failed, by the container tests' rule)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_client.cluster import LocalCluster
from quire_client.devcerts import CertBundle, write_dev_certs
from quire_client.testing import DEFAULT_IMAGE
from quire_client.testing.pytest_plugin import require_container_support
from tests.e2e.conftest import running_cluster

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# An example's own call at the end of its block: `asyncio.run(first_program())`, `sync_program()`.
EXAMPLE_CALL = re.compile(r"^(?:asyncio\.run\()?\w+\(\)\)?\n", re.MULTILINE)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("guide"), gateways=3) as local:
        yield local


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, CertBundle]]:
    """One gateway with the defaults of a secure cluster: mutual TLS, roles from tokens."""
    bundle = write_dev_certs(tmp_path_factory.mktemp("guide-certs"))
    with running_cluster(tmp_path_factory.mktemp("guide-tls"), tls=bundle) as local:
        yield local, bundle


def guide_program(gateways: list[str], *, calls: bool = True) -> str:
    """The guide's Python blocks in order; after the first (the example
    addresses), `gateways`. Without `calls`, the examples' own calls are left
    out: the program only defines them, for the caller to run one."""
    blocks = PYTHON_BLOCK.findall(GUIDE.read_text())
    assert len(blocks) >= 5, "the guide's examples were not found"
    assert blocks[0].startswith("GATEWAY = "), "the guide's first example sets the addresses"
    first, *more = gateways
    addresses = f"GATEWAY = {first!r}\nMORE_GATEWAYS = {more!r}\n"
    if not calls:
        blocks = [EXAMPLE_CALL.sub("", block) for block in blocks]
    return "\n\n".join([blocks[0], addresses, *blocks[1:]])


def run(program: str, directory: Path) -> None:
    path = directory / "guide.py"
    path.write_text(program)
    # Ryuk, testcontainers' reaper, is an image from Docker Hub; the example stops its own container.
    env = {"TESTCONTAINERS_RYUK_DISABLED": "true", **os.environ}
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)
    assert ran.returncode == 0, f"docs/clients.md's examples failed:\n{ran.stderr}"


def test_the_client_guide_examples_run(cluster: LocalCluster, tmp_path: Path) -> None:
    run(guide_program(cluster.gateway_targets), tmp_path)


def test_the_examples_calls_are_left_out_when_asked() -> None:
    """The TLS and container tests below rely on it: no example of the
    plaintext cluster runs there (there is none to reach)."""
    assert "asyncio.run(first_program())" in guide_program(["a:1"])
    definitions = guide_program(["a:1"], calls=False)
    assert "async def first_program()" in definitions and "def sync_program()" in definitions
    assert "asyncio.run(first_program())" not in definitions and "\nsync_program()" not in definitions


def test_the_tls_example_runs(tls_cluster: tuple[LocalCluster, CertBundle], tmp_path: Path) -> None:
    local, bundle = tls_cluster
    token = bundle.token("guide", {"*": ["reader", "writer"]})
    call = (
        f"asyncio.run(over_tls(secure_client({local.gateway_target!r}, Path({str(bundle.ca)!r}), "
        f"Path({str(bundle.cert('client-reader'))!r}), Path({str(bundle.key('client-reader'))!r}), {token!r})))\n"
    )
    run(guide_program(["127.0.0.1:1"], calls=False) + "\n\n" + call, tmp_path)


@pytest.mark.container
def test_the_testcontainers_example_runs(tmp_path: Path) -> None:
    require_container_support(DEFAULT_IMAGE)  # the image the example's QuireContainer() starts
    run(guide_program(["127.0.0.1:1"], calls=False) + "\n\nasyncio.run(against_a_container())\n", tmp_path)
