"""requirements/lock.txt against the three distributions' ranges (scripts/check_lock.py, run by `make lint`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_lock.py"


def _check_lock():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("check_lock", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_lock_satisfies_every_range():
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_a_pin_outside_a_range_or_of_quire_itself_is_reported(tmp_path):
    lock = tmp_path / "lock.txt"
    text = (ROOT / "requirements" / "lock.txt").read_text()
    pin = next(line for line in text.splitlines() if line.startswith("protobuf=="))
    lock.write_text(text.replace(pin, "protobuf==6.33.0") + "quire-ledger-api==0.1.0\n")
    found = _check_lock().problems(lock)
    assert any("protobuf" in problem and "6.33.0" in problem for problem in found), found
    assert any("pins quire-ledger-api" in problem for problem in found), found
