"""`quire dev smoke`: one quick end-to-end check of a running cluster.

Creates a ledger, adds entries one at a time (timing each), streams more,
reads everything back and compares, recovers and checks the end, stores and
fetches a blob, and deletes the ledger. Any mismatch makes `ok` false (and the
command exit non-zero)."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

from quire_api.ids import LedgerId
from quire_client.client import QuireClient, QuireClientError


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile of `samples` (0 if empty)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


@dataclass
class SmokeReport:
    add_latencies_ms: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [f"  ok  {step}" for step in self.steps]
        lines += [f"  FAIL {problem}" for problem in self.problems]
        lines.append(
            f"add latency: p50 {percentile(self.add_latencies_ms, 0.50):.2f} ms, "
            f"p99 {percentile(self.add_latencies_ms, 0.99):.2f} ms ({len(self.add_latencies_ms)} adds)"
        )
        lines.append("smoke: OK" if self.ok else f"smoke: FAILED ({len(self.problems)} problems)")
        return "\n".join(lines)


def _payload(index: int, size: int) -> bytes:
    seed = hashlib.sha256(index.to_bytes(8, "big")).digest()
    return (seed * (size // len(seed) + 1))[:size]


def run(client: QuireClient, entries: int = 200, size: int = 1024) -> SmokeReport:
    report = SmokeReport()

    def check(condition: bool, step: str) -> None:
        (report.steps if condition else report.problems).append(step)

    password = os.urandom(8)
    metadata = client.create_ledger(password=password)
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    try:
        for i in range(entries):
            started = time.perf_counter()
            entry_id = client.add_entry(ledger, _payload(i, size))
            report.add_latencies_ms.append(1000 * (time.perf_counter() - started))
            if entry_id != i:
                report.problems.append(f"add {i} got entry id {entry_id}")
                break
        last = client.append_all(ledger, (_payload(i, size) for i in range(entries, 2 * entries)))
        check(last == 2 * entries - 1, f"{2 * entries} entries acknowledged")
        read = list(client.read(ledger))
        check(
            [e.payload for e in read] == [_payload(i, size) for i in range(2 * entries)],
            f"{len(read)} entries read back byte for byte",
        )
        recovered = client.recover_ledger(ledger, password)
        check(recovered.last_entry_id == 2 * entries - 1, f"recovery closed the ledger at {recovered.last_entry_id}")
        blob = os.urandom(3 * 1024 * 1024 + 17)
        blob_id = client.put_blob(blob)
        check(client.get_blob(blob_id) == blob, f"blob of {len(blob)} bytes round-tripped")
    except QuireClientError as exc:
        report.problems.append(f"{exc.code.name}: {exc.message}")
    finally:
        try:
            client.delete_ledger(ledger)
            report.steps.append("ledger deleted")
        except QuireClientError as exc:
            report.problems.append(f"delete: {exc.code.name}: {exc.message}")
    return report
