"""The image itself: who it runs as, what it leaves out, what its entry point offers."""

from __future__ import annotations

import pytest

from quire_client.testing.pytest_plugin import quire_test_image, require_container_support

pytestmark = pytest.mark.container


def run_in_image(*command: str) -> str:
    import docker

    image = quire_test_image()
    require_container_support(image)
    client = docker.from_env()
    try:
        output: bytes = client.containers.run(image, list(command), network_mode="host", remove=True)
    finally:
        client.close()
    return output.decode()


def test_runs_as_a_non_root_user() -> None:
    assert run_in_image("id", "-u").strip() == "10001"


def test_final_stage_has_no_build_tools() -> None:
    found = run_in_image("sh", "-c", "for tool in gcc cc make g++ apt-get; do command -v $tool; done; true")
    # apt-get comes with Debian's base and stays; compilers never reach the image.
    assert [line for line in found.split() if not line.endswith("/apt-get")] == []


def test_entry_point_lists_its_modes_and_carries_etcd_and_the_cli() -> None:
    usage = run_in_image("help")
    for mode in ("registry", "bookie", "placement", "gateway", "etcd", "standalone", "telemetry", "quire"):
        assert mode in usage
    assert "etcd Version:" in run_in_image("etcd", "--version")
    assert "ledger" in run_in_image("quire", "--help")
