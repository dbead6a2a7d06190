"""Each atheris target for a bounded time (CI); `make fuzz` runs longer.
Reports executions and coverage (libFuzzer's edge count) per target."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

SECONDS = int(os.environ.get("QUIRE_FUZZ_SECONDS", "8"))
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(SECONDS * 4 + 120)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_runs_without_a_crash(name: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "tests.fuzz.run_atheris", name,
            f"-max_total_time={SECONDS}", f"-artifact_prefix={tmp_path}/", "-print_final_stats=1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SECONDS * 4 + 60,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{name} crashed:\n{output[-4000:]}"
    runs = re.search(r"Done (\d+) runs", output)
    coverage = re.findall(r"cov: (\d+)", output)
    assert runs is not None and int(runs.group(1)) > 0, output[-2000:]
    edges = int(coverage[-1]) if coverage else 0
    print(f"fuzz {name}: {runs.group(1)} executions in {SECONDS}s, coverage {edges} edges")
    # One JSON line per target run, for CI to keep (build/ is not committed).
    report = ROOT / "build" / "fuzz-report.jsonl"
    report.parent.mkdir(exist_ok=True)
    with report.open("a") as out:
        out.write(json.dumps({"target": name, "seconds": SECONDS, "executions": int(runs.group(1)), "edges": edges}))
        out.write("\n")
