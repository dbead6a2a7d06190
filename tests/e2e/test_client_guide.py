"""docs/clients.md's Python examples, run as one program against a local
cluster of three gateways: the guide cannot drift from the clients."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_client.cluster import LocalCluster
from tests.e2e.conftest import running_cluster

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("guide"), gateways=3) as local:
        yield local


def guide_program(cluster: LocalCluster) -> str:
    """The guide's Python blocks in order; after the first (the example
    addresses), the cluster's own addresses."""
    blocks = PYTHON_BLOCK.findall(GUIDE.read_text())
    assert len(blocks) >= 5, "the guide's examples were not found"
    assert blocks[0].startswith("GATEWAY = "), "the guide's first example sets the addresses"
    first, *more = cluster.gateway_targets
    addresses = f"GATEWAY = {first!r}\nMORE_GATEWAYS = {more!r}\n"
    return "\n\n".join([blocks[0], addresses, *blocks[1:]])


def test_the_client_guide_examples_run(cluster: LocalCluster, tmp_path: Path) -> None:
    program = tmp_path / "guide.py"
    program.write_text(guide_program(cluster))
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, f"docs/clients.md's examples failed:\n{run.stderr}"
