"""The image's HEALTHCHECK (deploy/image/quire-image-entrypoint healthcheck), run
as Docker runs it: a separate process told nothing but the container's
environment, against a real listening socket and a closed port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ENTRYPOINT = Path(__file__).resolve().parents[2] / "deploy" / "image" / "quire-image-entrypoint"


def run(mode_file: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        env={"PATH": os.environ["PATH"], "QUIRE_IMAGE_MODE_FILE": str(mode_file), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_started_mode_is_recorded_for_the_healthcheck(tmp_path: Path) -> None:
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed")
    mode_file = tmp_path / "mode"
    assert run(mode_file, "etcd", "--version").returncode == 0
    assert mode_file.read_text().strip() == "etcd"
    assert run(mode_file, "healthcheck").returncode == 0  # etcd has its own probes: nothing checked here


@pytest.mark.parametrize(
    ("mode", "address_env"),
    [
        ("gateway", lambda port: {"QUIRE_GATEWAY_ADDRESS": f"0.0.0.0:{port}"}),
        ("registry", lambda port: {"QUIRE_REGISTRY_ADDRESS": f"127.0.0.1:{port}"}),
        ("placement", lambda port: {"QUIRE_PLACEMENT_ADDRESS": f"127.0.0.1:{port}"}),
        ("bookie", lambda port: {"QUIRE_BOOKIE_LISTEN_HOST": "0.0.0.0", "QUIRE_BOOKIE_PORT": str(port)}),
        ("standalone", lambda port: {"QUIRE_STANDALONE_GATEWAY_PORT": str(port)}),
    ],
)
def test_healthy_while_the_service_accepts_connections_and_not_after(
    tmp_path: Path, listening: int, mode: str, address_env
) -> None:
    mode_file = tmp_path / "mode"
    mode_file.write_text(f"{mode}\n")
    healthy = run(mode_file, "healthcheck", **address_env(listening))
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    down = run(mode_file, "healthcheck", **address_env(closed_port()))
    assert down.returncode == 1
    assert f"quire {mode} at" in down.stdout and "not accepting connections" in down.stdout
    assert "Traceback" not in down.stdout + down.stderr


def test_modes_without_a_service_are_healthy(tmp_path: Path) -> None:
    assert run(tmp_path / "never-written", "healthcheck").returncode == 0
