"""Workloads that record every operation into a History.

`Writer` streams N self-checking payloads into one fresh ledger and records
each entry's invoke and its ok (acknowledged) or unknown (the session broke
before its ack). `read_all` and `observe_lac` record reads and LAC
observations, validating each payload as it comes back.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator

from quire_api.ids import LedgerId
from quire_client import QuireClient, QuireClientError
from tests.faults.history import History, check_payload, make_payload


class Writer:
    """One writer thread appending `count` entries to `ledger` in one session."""

    def __init__(
        self,
        target: str,
        registry: str,
        ledger: LedgerId,
        history: History,
        *,
        count: int,
        seed: int,
        writer_id: int = 0,
        batch_size: int = 20,
        size_bytes: int = 1024,
        pace_seconds: float = 0.0,
        timeout_seconds: float = 30.0,
    ) -> None:
        self.target, self.registry = target, registry
        self.ledger = ledger
        self.name = ledger.qualified_name
        self.history = history
        self.count = count
        self.rng = random.Random(seed)
        self.writer_id = writer_id
        self.batch_size = batch_size
        self.size_bytes = size_bytes
        self.pace_seconds = pace_seconds
        self.timeout_seconds = timeout_seconds
        self.acked = -1  # the highest index acknowledged
        self.invoked = 0
        self.error: QuireClientError | None = None
        self.stop = threading.Event()
        self.ack_times: dict[int, float] = {}
        self.invoke_times: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, name=f"writer-{writer_id}", daemon=True)

    def _payloads(self) -> Iterator[bytes]:
        for index in range(self.count):
            if self.stop.is_set():
                return
            if self.pace_seconds:
                time.sleep(self.pace_seconds)
            payload = make_payload(
                self.rng, self.writer_id, self.ledger.scope_id, self.ledger.ledger_id, index, self.size_bytes
            )
            self.invoke_times[index] = time.monotonic()
            self.history.record("add", "invoke", self.name, self.writer_id, index=index)
            self.invoked = index + 1
            yield payload

    def _run(self) -> None:
        with QuireClient(self.target, timeout=self.timeout_seconds) as client:
            try:
                for ack in client.append(self.ledger, self._payloads(), batch_size=self.batch_size):
                    now = time.monotonic()
                    for entry_id in range(ack.first_entry_id, ack.last_entry_id + 1):
                        # One writer per fresh ledger: entry id == index.
                        self.history.record("add", "ok", self.name, self.writer_id, index=entry_id, entry_id=entry_id)
                        self.ack_times[entry_id] = now
                    self.acked = ack.last_entry_id
                    self.history.record("lac", "ok", self.name, self.writer_id, lac=ack.last_add_confirmed)
            except QuireClientError as exc:
                self.error = exc
        for index in range(self.acked + 1, self.invoked):
            self.history.record("add", "unknown", self.name, self.writer_id, index=index, error=str(self.error))

    def start(self) -> Writer:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float = 120.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"writer {self.writer_id} did not finish within {timeout}s"

    def wait_acked(self, index: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.acked < index and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.01)
        assert self.acked >= index, f"writer {self.writer_id} reached only {self.acked} (wanted {index}): {self.error}"

    def latencies_ms(self) -> list[float]:
        return sorted(
            (self.ack_times[i] - self.invoke_times[i]) * 1000 for i in self.ack_times if i in self.invoke_times
        )


def read_all(
    client: QuireClient, ledger: str, history: History, *, first: int = 0, last: int = -1, unconfirmed: bool = False
) -> list[int]:
    """Read and record; returns the entry ids read."""
    mode = "unconfirmed" if unconfirmed else "confirmed"
    history.record("read", "invoke", ledger, mode=mode, first=first, last=last)
    ids = []
    try:
        for entry in client.read(ledger, first, last, unconfirmed=unconfirmed):
            facts = check_payload(entry.payload)
            good = (
                facts is not None
                and facts.index == entry.entry_id
                and LedgerId(facts.scope, facts.ledger) == (LedgerId.parse(ledger))
            )
            history.record("read", "ok", ledger, mode=mode, entry_id=entry.entry_id, good=good)
            ids.append(entry.entry_id)
    except QuireClientError as exc:
        history.record("read", "fail", ledger, mode=mode, code=exc.code.name, error=str(exc))
        raise
    return ids


def observe_metadata(client: QuireClient, ledger: str, history: History) -> None:
    metadata, version = client.ledger_metadata(ledger)
    history.record("meta", "ok", ledger, version=version, metadata=metadata.SerializeToString(deterministic=True))


READER_PROCESS = 1000  # observers other than the writers (LAC is checked per observer)


def observe_lac(client: QuireClient, ledger: str, history: History, process: int = READER_PROCESS) -> int:
    lac = client.last_add_confirmed(ledger)
    history.record("lac", "ok", ledger, process, lac=lac)
    return lac


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started
