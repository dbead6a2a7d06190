"""Scenario records: one JSON line per scenario in build/faults/results.jsonl,
and a Markdown table rendered from them (build/faults/results.md)."""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parents[2] / "build" / "faults"
RESULTS_FILE = RESULTS_DIR / "results.jsonl"
TABLE_FILE = RESULTS_DIR / "results.md"


def seed_for(row: str) -> int:
    """QUIRE_FAULTS_SEED replays a run; otherwise a stable seed per row."""
    override = os.environ.get("QUIRE_FAULTS_SEED")
    return int(override) if override else zlib.crc32(row.encode())


@dataclass
class Scenario:
    test: str
    row: str = ""
    seed: int = 0
    parameters: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def start(self, row: str, **parameters: Any) -> int:
        """Name the matrix row and its parameters; returns the seed to use."""
        self.row = row
        self.seed = seed_for(row)
        self.parameters = parameters
        return self.seed

    def record(self, passed: bool) -> dict[str, Any]:
        return {
            "id": self.row or self.test,
            "test": self.test,
            "seed": self.seed,
            "parameters": self.parameters,
            "figures": self.figures,
            "duration_seconds": round(time.monotonic() - self.started, 2),
            "pass": passed,
        }


def append_record(record: dict[str, Any]) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with RESULTS_FILE.open("a") as out:
        out.write(json.dumps(record, default=str, sort_keys=True) + "\n")


def _figure_text(figures: dict[str, Any]) -> str:
    shown = {k: v for k, v in figures.items() if k not in ("read_errors",) and v not in (None, [], {})}
    return ", ".join(f"{k}={round(v, 3) if isinstance(v, float) else v}" for k, v in shown.items())


def write_table() -> None:
    if not RESULTS_FILE.exists():
        return
    records = [json.loads(line) for line in RESULTS_FILE.read_text().splitlines() if line.strip()]
    lines = [
        "# Fault suite results",
        "",
        "| Row | Test | Pass | Seconds | Seed | Figures |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: r["id"]):
        lines.append(
            f"| {r['id']} | `{r['test']}` | {'yes' if r['pass'] else '**NO**'} | {r['duration_seconds']} "
            f"| {r['seed']} | {_figure_text(r['figures'])} |"
        )
    TABLE_FILE.write_text("\n".join(lines) + "\n")
