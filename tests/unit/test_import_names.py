"""The generated API's import name: the project imports `quire_proto` only;
the old name `quire` resolves, in the development environment alone, to the
very same modules (for tools written against it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["api/python/quire_api", "services", "clients/python", "tests", "scripts", "deploy"]


def old_name_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "quire":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        elif isinstance(node, ast.Import):
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for a in node.names if a.name.split(".")[0] == "quire"]
    return found


def test_no_module_of_the_project_imports_the_old_name() -> None:
    files = [path for source in SOURCES for path in (ROOT / source).rglob("*.py") if "node_modules" not in path.parts]
    assert len(files) > 100
    assert [place for path in files for place in old_name_imports(path)] == []


def test_the_old_name_is_the_same_modules_in_the_development_environment() -> None:
    program = (
        "from quire.gateway.v1 import ledger_pb2 as old\n"
        "import quire_proto.gateway.v1.ledger_pb2 as new\n"
        "assert old is new, (old, new)\n"
        "from quire.common.v1.common_pb2 import LedgerMetadata\n"
        "assert LedgerMetadata.__module__ == 'quire_proto.common.v1.common_pb2'\n"
    )
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
