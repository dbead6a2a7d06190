"""A client's writes to a ledger owned by one of several gateways, as the
rows about gateways and partitions make and count them: every payload is
unique and written in order by one client, so an acknowledged entry lost and
an entry written twice are both plain to see in a read-back."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

from quire_api.ids import LedgerId
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from tests.faults.report import Scenario

ENTRIES = 3000
KILL_AT = 600  # where the burst a fault lands in starts
BURST = 600
OWNER_GONE = "ERROR_REASON_LEDGER_OWNER_GONE"


def payloads() -> list[bytes]:
    return [b"p%06d-" % i + b"x" * 1017 for i in range(ENTRIES)]


def paced(items: list[bytes], burst_sent: threading.Event, pause_seconds: float = 0.002) -> Iterator[bytes]:
    """The stream lasts seconds, with a burst at KILL_AT sent as fast as the
    stream takes it; `burst_sent` is set in its middle, so a kill then finds
    many entries in flight (some stored, not yet acknowledged)."""
    for index, item in enumerate(items):
        if not KILL_AT <= index < KILL_AT + BURST:
            time.sleep(pause_seconds)
        if index == KILL_AT + BURST // 2:
            burst_sent.set()
        yield item


class StreamingWriter:
    """One client's append stream (QuireClient.append, which resumes through
    the other gateways), run in a thread; counts acknowledged entries."""

    def __init__(self, client: QuireClient, ledger: LedgerId) -> None:
        self.client, self.ledger = client, ledger
        self.acked = 0
        self.error: QuireClientError | None = None
        self.burst_sent = threading.Event()
        self.gaps = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            for ack in self.client.append(self.ledger, paced(payloads(), self.burst_sent), batch_size=20):
                if ack.first_entry_id != self.acked:
                    self.gaps += 1  # entries written twice shift the ids of those after them
                self.acked = ack.last_entry_id + 1
        except QuireClientError as exc:
            self.error = exc

    def start(self) -> StreamingWriter:
        self._thread.start()
        return self

    def wait_for_the_burst(self) -> None:
        assert self.burst_sent.wait(120), f"the burst was not sent (acked {self.acked}, error {self.error})"

    def join(self, timeout: float = 300) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the writer did not finish"


def ledger_on_first_gateway(cluster: LocalCluster) -> LedgerId:
    with QuireClient(cluster.gateway_targets[0], timeout=30) as owner:
        created = owner.create_ledger()
    return LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)


def tally(scenario: Scenario, reader: QuireClient, ledger: LedgerId, acked: int) -> tuple[int, int]:
    """(acked_lost, duplicates) from a read-back of the closed ledger."""
    stored = [e.payload for e in reader.read(ledger)]
    sent = payloads()
    counts = Counter(stored)
    acked_lost = sum(1 for payload in sent[:acked] if counts[payload] == 0)
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    scenario.figures.update(acked=acked, stored=len(stored), acked_lost=acked_lost, duplicates=duplicates)
    return acked_lost, duplicates


def refusal_after_waiting(
    target: str, registry: str, ledger: LedgerId, waiting: set[str], seconds: float, call_timeout: float = 30
) -> QuireClientError:
    """AddEntry through one gateway, as a retrying client would, until it is
    refused with something not in `waiting` (status code names or reasons),
    or `seconds` pass: that refusal, or the last one. The ledger's owner is
    dead or paused, so a write accepted fails the test."""
    deadline = time.monotonic() + seconds
    with QuireClient(target, timeout=call_timeout) as client:
        while True:
            try:
                client.add_entry(ledger, b"while the owner is away")
            except QuireClientError as exc:
                if not waiting & {exc.code.name, exc.reason} or time.monotonic() >= deadline:
                    return exc
            else:
                raise AssertionError("a write was accepted for a ledger whose owner is dead or paused")
            time.sleep(0.3)


def recovered_end(scenario: Scenario, client: QuireClient, writer: StreamingWriter, answer: QuireClientError) -> int:
    """After the old owner's fault: its stream finished, the end the other
    gateway's recovery fixed (its LEDGER_OWNER_GONE answer), recorded."""
    writer.join()
    client.close()
    assert answer.reason == OWNER_GONE, answer
    end = int(answer.details["last_entry_id"])
    scenario.figures.update(
        recovered_end=end,
        acked_by_the_old_owner=writer.acked,
        writer_error=writer.error.reason if writer.error else "",
    )
    return end
