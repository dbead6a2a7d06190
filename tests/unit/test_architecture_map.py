"""The map at the top of docs/architecture.md names files that exist, so it
stays true as modules move."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def map_rows() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Map", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| concept")]


def test_every_concept_in_the_map_names_at_least_one_file():
    rows = map_rows()
    assert len(rows) >= 12
    for row in rows:
        assert re.search(r"`[^`]+\.py`", row), row


def test_every_path_in_the_map_exists():
    paths = {path for row in map_rows() for path in re.findall(r"`([^`]+\.py)`", row)}
    missing = sorted(path for path in paths if not (ROOT / path).is_file())
    assert missing == []
