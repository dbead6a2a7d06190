import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _differences(left: Path, right: Path) -> list[str]:
    comparison = filecmp.dircmp(left, right, ignore=["__pycache__"])
    found = [str(left / n) for n in comparison.left_only + comparison.right_only + comparison.diff_files]
    for name in comparison.common_dirs:
        found += _differences(left / name, right / name)
    return found


def test_generated_code_matches_the_protos(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos.py"), str(tmp_path / "gen")], check=True)
    assert _differences(tmp_path / "gen", ROOT / "api" / "python" / "generated") == [], (
        "generated code is stale: run `make gen` and commit"
    )


def test_protos_pass_buf_lint():
    buf = ROOT / ".tools" / "node_modules" / ".bin" / "buf"
    if not buf.exists():
        buf_path = shutil.which("buf")
        if buf_path is None:
            pytest.skip("buf is not installed (make setup installs it with npm)")
        buf = Path(buf_path)
    result = subprocess.run([str(buf), "lint"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
