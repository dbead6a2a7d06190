"""Shared fixtures: a real etcd subprocess for the session."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Set before gRPC loads (quire_client imports it): gRPC core's fork handlers stay out of the
# way of the subprocesses these tests start. With them on, pyspark's launch of its Java
# gateway (a fork with a preexec_fn, while grpc.aio threads of earlier tests were in gRPC)
# once printed "skipping fork() handlers" and an EventEngine poller's EBADF, and the gateway
# exited before it started. Nothing here forks a process that goes on using gRPC.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from quire_client.cluster import etcd_command, etcd_healthy, free_port

# In-process servers in these tests run in plaintext development mode; the
# security tests (tests/e2e/test_security.py) start TLS clusters explicitly.
os.environ.setdefault("QUIRE_INSECURE_PLAINTEXT_DEV", "true")


class EtcdProcess:
    def __init__(self, data_dir: Path) -> None:
        binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not Path(binary).exists():
            pytest.fail("etcd is not installed: run `make setup` (it installs Debian's etcd-server)")
        self.port, peer_port = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.log = (data_dir / "etcd.log").open("wb")
        self.process = subprocess.Popen(
            etcd_command(binary, "test", data_dir / "etcd", self.port, peer_port),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if etcd_healthy(self.port):
                return
            time.sleep(0.1)
        self.stop()
        pytest.fail("etcd did not become healthy within 30s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    process = EtcdProcess(tmp_path_factory.mktemp("etcd"))
    try:
        yield process
    finally:
        process.stop()
