"""A client-only install: quire-ledger-api and quire-ledger-client, built from their folders
into a fresh virtualenv at the lock file's versions, talk to a cluster (run
from the dev virtualenv) without any of the services' dependencies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_client.cluster import LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
# Distributions only the services need; none may come with the client.
SERVER_DISTRIBUTIONS = {
    "quire-ledger",
    "rocksdict",
    "etcd3aio",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "cryptography",
    "pyjwt",
    "prometheus-client",
    "google-crc32c",
    "testcontainers",
}
SERVER_MODULES = [
    "quire_common",
    "quire_bookie",
    "quire_gateway",
    "quire_telemetry",
    "rocksdict",
    "cryptography",
    "jwt",
    "etcd3aio",
]

CLIENT_SCRIPT = """
import json, sys
import quire_client, quire_client.cli, quire_client.testing, quire_client.smoke, quire_client.bench
from quire_api.ids import LedgerId
from quire_client import QuireClient

gateway, registry = sys.argv[1:3]
with QuireClient(gateway, timeout=30) as quire:
    metadata = quire.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    quire.append_all(ledger, [b"a", b"b", b"c"])
    payloads = [entry.payload.decode() for entry in quire.read(ledger)]
    quire.close_ledger(ledger)
loaded = sorted(name for name in sys.modules if name.split(".")[0] in set(sys.argv[3].split(",")))
print(json.dumps({"ledger": str(ledger), "payloads": payloads, "server_modules_loaded": loaded}))
"""

INSTALLED_SCRIPT = """
import importlib.metadata, json
print(json.dumps(sorted(d.metadata["Name"].lower().replace("_", "-") for d in importlib.metadata.distributions())))
"""


def _copy_source(name: str, destination: Path) -> Path:
    """The folder as a fresh checkout has it: a build leaves nothing in the work tree."""
    target = destination / name.replace("/", "-")
    shutil.copytree(ROOT / name, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    return target


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    workdir = tmp_path_factory.mktemp("client-only")
    api, client = _copy_source("api/python", workdir), _copy_source("clients/python", workdir)
    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(LOCK), str(api), str(client)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, f"pip install failed:\n{install.stdout}\n{install.stderr}"
    yield venv


def run_in(venv: Path, program: str, *args: str) -> subprocess.CompletedProcess[str]:
    # Outside the work tree, so nothing in it (an old *.egg-info, say) is on the path.
    return subprocess.run(
        [str(venv / "bin" / program), *args], capture_output=True, text=True, timeout=300, cwd=venv.parent
    )


def test_client_install_brings_no_server_dependency(client_venv: Path) -> None:
    installed = set(json.loads(run_in(client_venv, "python", "-c", INSTALLED_SCRIPT).stdout))
    assert {"quire-ledger-api", "quire-ledger-client", "grpcio", "protobuf", "click"} <= installed
    assert installed & SERVER_DISTRIBUTIONS == set()
    for module in SERVER_MODULES:
        probe = run_in(client_venv, "python", "-c", f"import {module}")
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr, module
    # The generated API is quire_proto; `quire` is other projects' import name and no wheel of ours has it.
    assert run_in(client_venv, "python", "-c", "import quire_proto.gateway.v1.ledger_pb2").returncode == 0
    old_name = run_in(client_venv, "python", "-c", "import quire")
    assert old_name.returncode != 0 and "ModuleNotFoundError" in old_name.stderr


def test_client_only_install_writes_and_reads_a_ledger(client_venv: Path, cluster: LocalCluster) -> None:
    result = run_in(
        client_venv,
        "python",
        "-c",
        CLIENT_SCRIPT,
        cluster.gateway_target,
        cluster.registry_target,
        ",".join(SERVER_MODULES),
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["payloads"] == ["a", "b", "c"]
    assert report["server_modules_loaded"] == []


def test_client_only_command_line(client_venv: Path, cluster: LocalCluster) -> None:
    version = run_in(client_venv, "quire", "--version")
    assert version.returncode == 0 and version.stdout.strip() == "quire 0.1.0", version.stderr
    addresses = ["--gateway", cluster.gateway_target, "--registry", cluster.registry_target]
    created = run_in(client_venv, "quire", *addresses, "ledger", "create", "-o", "json")
    assert created.returncode == 0, created.stderr
    ledger = json.loads(created.stdout)["ledger"]
    appended = run_in(client_venv, "quire", *addresses, "ledger", "append", ledger, "hello", "world")
    assert appended.returncode == 0 and appended.stdout.strip() == "last entry id 1", appended.stderr
    read = run_in(client_venv, "quire", *addresses, "ledger", "read", ledger)
    assert read.returncode == 0 and read.stdout.splitlines() == ["0\thello", "1\tworld"], read.stderr


def test_commands_that_need_the_server_name_the_package(client_venv: Path, tmp_path: Path) -> None:
    # Usage errors (exit 2) with one line naming what to install, never a traceback.
    up = run_in(client_venv, "quire", "cluster", "up", "--data-dir", str(tmp_path / "data"))
    assert up.returncode == 2 and "pip install 'quire-ledger'" in up.stderr and "Traceback" not in up.stderr
    inspect = run_in(client_venv, "quire", "bookie", "inspect", "--data-dir", str(tmp_path))
    assert inspect.returncode == 2 and "pip install 'quire-ledger'" in inspect.stderr
    assert "Traceback" not in inspect.stderr
    certs = run_in(client_venv, "quire", "dev", "certs", "--out", str(tmp_path / "certs"))
    assert certs.returncode == 2 and "pip install 'quire-ledger-client[certs]'" in certs.stderr
    assert "Traceback" not in certs.stderr
    standalone = run_in(client_venv, "python", "-m", "quire_client.standalone")
    assert standalone.returncode == 2 and "pip install 'quire-ledger'" in standalone.stderr
    assert "Traceback" not in standalone.stderr
