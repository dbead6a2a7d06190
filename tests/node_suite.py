"""Runs the Node.js client's test files (clients/node) from pytest.

`npm ci` runs once per package-lock.json: its hash is stamped into
node_modules, so later runs (offline included) reuse the installed modules.
Without node or npm the callers skip with the reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "clients" / "node"
_STAMP = PACKAGE / "node_modules" / ".quire-lock-sha256"
_built = False


def _run(args: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def build_node_client() -> None:
    """npm ci (when the lock changed) and tsc, or skip when node/npm are missing."""
    global _built
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the Node.js client's tests need {' and '.join(missing)} on PATH (Node 20 or later)")
    if _built:
        return
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if not _STAMP.exists() or _STAMP.read_text().strip() != lock:
        done = _run(["npm", "ci", "--no-audit", "--no-fund"], timeout=600)
        if done.returncode != 0:
            pytest.fail(f"npm ci failed in {PACKAGE}:\n{done.stdout}\n{done.stderr}")
        _STAMP.write_text(lock + "\n")
    done = _run(["npm", "run", "build"], timeout=300)
    if done.returncode != 0:
        pytest.fail(f"building the Node.js client failed:\n{done.stdout}\n{done.stderr}")
    _built = True


def run_node_tests(files: list[str], env: dict[str, str], timeout: float = 600, test_timeout: float = 180) -> str:
    """Run compiled test files (names under test/, e.g. "cluster.test.js"); fail with node's output.

    node's runner holds back every file's report until the file still running
    ends, so a test that hangs would leave nothing but a timeout; each test's
    own `test_timeout` fails it by name first (a test that sets a longer
    timeout of its own must keep it under `timeout`)."""
    build_node_client()
    paths = [str(Path("dist") / "test" / name) for name in files]
    done = _run(
        [
            "node",
            "--test",
            "--test-concurrency=1",
            f"--test-timeout={int(test_timeout * 1000)}",
            "--test-reporter=tap",
            *paths,
        ],
        timeout=timeout,
        env={**os.environ, **env},
    )
    output = f"{done.stdout}\n{done.stderr}"
    if done.returncode != 0:
        pytest.fail(f"the Node.js client's tests failed ({' '.join(files)}):\n{output}")
    return output
