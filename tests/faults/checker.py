"""The checker: runs after every scenario and computes the universal invariants.

- acked_lost: entries acknowledged to a writer that the final read-back lacks
  (or returns beyond the ledger's closed end).
- wrong_bytes: reads (during the run or in the final read-back) that returned
  bytes failing the payload check or belonging to another position.
- beyond_lac_confirmed: confirmed reads that returned an entry past the
  ledger's closed end (a confirmed read must never pass the LAC).
- lac_regressions: an observer saw the LAC go down, or some observed LAC is
  above the ledger's closed end.
- meta_version_regressions: an observer saw a metadata version go down, or two
  different metadata records share one version (a lost update).
- adds_after_fence: acknowledged entries past the end recovery closed the
  ledger at, or entries first invoked after that recovery completed and then acknowledged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from quire_client import QuireClient, QuireClientError
from tests.faults.history import History, check_payload
from tests.faults.workload import observe_metadata


@dataclass
class FinalLedger:
    ledger: str
    last_entry_id: int  # the closed end after recovery
    entries: dict[int, bytes] = field(default_factory=dict)
    error: str = ""


@dataclass
class Verdict:
    acked: int = 0
    acked_lost: int = 0
    wrong_bytes: int = 0
    beyond_lac_confirmed: int = 0
    lac_regressions: int = 0
    meta_version_regressions: int = 0
    adds_after_fence: int = 0
    unknown_adds: int = 0
    ledgers: int = 0
    read_errors: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.acked_lost
            or self.wrong_bytes
            or self.beyond_lac_confirmed
            or self.lac_regressions
            or self.meta_version_regressions
            or self.adds_after_fence
        )

    def figures(self) -> dict[str, object]:
        return asdict(self)


def read_back(client: QuireClient, ledger: str, history: History, password: bytes = b"") -> FinalLedger:
    """Recover (fence and close) the ledger, then read everything it holds."""
    try:
        metadata = client.recover_ledger(ledger, password)
        history.record("fence", "ok", ledger, last_entry_id=metadata.last_entry_id)
        observe_metadata(client, ledger, history)
        final = FinalLedger(ledger, metadata.last_entry_id)
        if metadata.last_entry_id >= 0:
            for entry in client.read(ledger, 0, metadata.last_entry_id):
                final.entries[entry.entry_id] = entry.payload
        return final
    except QuireClientError as exc:
        return FinalLedger(ledger, -1, error=f"{exc.code.name}: {exc}")


def check(history: History, finals: list[FinalLedger]) -> Verdict:
    verdict = Verdict(ledgers=len(finals))
    by_ledger = {f.ledger: f for f in finals}
    fence_done: dict[str, float] = {}
    for event in history.of("fence", "ok"):
        fence_done.setdefault(event.ledger, event.time)
    invoke_time = {(e.ledger, e.value["index"]): e.time for e in history.of("add", "invoke")}

    for event in history.of("add", "ok"):
        verdict.acked += 1
        final = by_ledger.get(event.ledger)
        entry_id = event.value["entry_id"]
        if final is None:
            continue
        if final.error:
            verdict.acked_lost += 1
            continue
        if entry_id > final.last_entry_id:
            verdict.adds_after_fence += 1
        if entry_id not in final.entries:
            verdict.acked_lost += 1
        started = invoke_time.get((event.ledger, event.value["index"]))
        fenced_at = fence_done.get(event.ledger)
        if fenced_at is not None and started is not None and started > fenced_at:
            verdict.adds_after_fence += 1
    verdict.unknown_adds = len(history.of("add", "unknown"))

    for final in finals:
        if final.error:
            verdict.read_errors.append(f"{final.ledger}: {final.error}")
        for entry_id, payload in final.entries.items():
            facts = check_payload(payload)
            if facts is None or facts.index != entry_id:
                verdict.wrong_bytes += 1

    for event in history.of("read", "ok"):
        if not event.value["good"]:
            verdict.wrong_bytes += 1
        final = by_ledger.get(event.ledger)
        if event.value["mode"] == "confirmed" and final is not None and not final.error:
            if event.value["entry_id"] > final.last_entry_id:
                verdict.beyond_lac_confirmed += 1

    last_lac: dict[tuple[str, int], int] = {}
    for event in history.of("lac", "ok"):
        key = (event.ledger, event.process)
        lac = event.value["lac"]
        if lac < last_lac.get(key, -1):
            verdict.lac_regressions += 1
        last_lac[key] = max(lac, last_lac.get(key, -1))
        final = by_ledger.get(event.ledger)
        if final is not None and not final.error and lac > final.last_entry_id:
            verdict.lac_regressions += 1

    last_version: dict[tuple[str, int], int] = {}
    seen: dict[tuple[str, int], bytes] = {}
    for event in history.of("meta", "ok"):
        key = (event.ledger, event.process)
        version = event.value["version"]
        if version < last_version.get(key, -1):
            verdict.meta_version_regressions += 1
        last_version[key] = max(version, last_version.get(key, -1))
        record = event.value["metadata"]
        if seen.setdefault((event.ledger, version), record) != record:
            verdict.meta_version_regressions += 1
    return verdict
