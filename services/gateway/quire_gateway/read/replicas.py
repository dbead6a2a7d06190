"""Reading entries back from their replicas.

For each entry the replicas are its write set in the ensemble that covers it.
Entries are read in chunks: each entry is asked of its next untried replica,
one ReadEntries call per bookie at a time, all bookies in parallel. A replica
that is unreachable, lacks the entry, or returns bytes whose digest does not
check is skipped for the next one. A replica that has not answered within the
speculative delay gets company: the entry is also asked of its next replica,
and the first good copy wins. An entry fails only when every replica has been
tried: DATA_LOSS if some copy was corrupt, NOT_FOUND if every replica said it
has no such entry, UNAVAILABLE otherwise. Copies found damaged (a digest that
does not check, or a bookie's storage failing to read them) are handed to the
caller's `flag_damaged` to be marked for repair: together when the caller
calls `finish()`, and one by one afterwards, for a read left to finish that
answers late that its bookie could not read its copies.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from quire_api.errors import DataLoss, NotFound, QuireError, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_common.entry import parse_header, verified_entry
from quire_common.ledger_secrets import ledger_digester
from quire_common.tasks import let_finish
from quire_common.telemetry import tracer, tracing_enabled
from quire_gateway import metrics
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.quorum_rules import replicas_of
from quire_proto.common.v1 import common_pb2

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

CHUNK_ENTRIES = 512

__all__ = ["EntryReader", "ReadEntry", "ReadSettings", "replicas_of"]


@dataclass(frozen=True)
class ReadSettings:
    # A replica slower than this gets the same entries asked of the next one too.
    speculative_delay_seconds: float = 0.5
    # How long a tail waits for the LAC to move before looking again from the top.
    tail_wait_seconds: float = 5.0
    # Test-only positive control of the fault suite (QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK):
    # hand out payloads without checking their digests. Production never turns this off.
    verify_digests: bool = True
    # A confirmed read (or a tail) past what this gateway knows of a ledger written by another
    # gateway asks that owner for its LAC, and a relayed write's acks teach this gateway what they
    # confirm: an entry acknowledged through any gateway is readable through any gateway. Off only
    # as GWY-3's positive control (QUIRE_GATEWAY_FAULT_UNSAFE_NO_READ_YOUR_WRITES).
    read_your_writes: bool = True
    # How long that ask waits for the owner; then the bookies' LAC stands.
    owner_lac_timeout_seconds: float = 2.0


class ReadEntry(NamedTuple):
    """One entry read, checked. A named tuple: reads make one per entry, and
    it is made in half a frozen dataclass's time (0.24 against 0.45 µs)."""

    entry_id: int
    payload: bytes
    length: int


@dataclass
class _Attempt:
    replicas: list[str]
    asked: int = 0  # replicas asked so far, in write-set order
    outstanding: int = 0  # requests in flight for this entry
    missing: int = 0
    corrupt: int = 0
    errors: list[str] = field(default_factory=list)

    def next_replica(self) -> str | None:
        if self.asked >= len(self.replicas):
            return None
        self.asked += 1
        return self.replicas[self.asked - 1]


class EntryReader:
    def __init__(
        self,
        remote: ClusterCalls,
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata,
        settings: ReadSettings | None = None,
        flag_damaged: Callable[[dict[str, tuple[int, int]]], None] | None = None,
        *,
        traced: bool | None = None,
    ) -> None:
        self.remote = remote
        self.ledger_id = ledger_id
        self.metadata = metadata
        self.settings = settings or ReadSettings()
        self.digester = ledger_digester(metadata)
        # bookie -> (first, last) entry ids whose copy there was found damaged
        self.damaged: dict[str, tuple[int, int]] = {}
        self._flag_damaged = flag_damaged
        self._finished = False
        # A span per chunk only while tracing: a no-op span cost a read of one entry about a
        # quarter of its reader's CPU (docs/decisions.md, "Reads the entry cache cannot serve").
        self._traced = tracing_enabled() if traced is None else traced

    def _damaged(self, bookie: str, entry_ids: list[int]) -> None:
        if self._finished:
            if self._flag_damaged is not None:
                self._flag_damaged({bookie: (min(entry_ids), max(entry_ids))})
            return
        first, last = self.damaged.get(bookie, (min(entry_ids), max(entry_ids)))
        self.damaged[bookie] = (min(first, *entry_ids), max(last, *entry_ids))

    def finish(self) -> None:
        """The caller is done reading: hand over the damaged copies found so
        far, in one report; those a read still out finds later follow alone."""
        if self._finished:
            return
        self._finished = True
        if self.damaged and self._flag_damaged is not None:
            self._flag_damaged(dict(self.damaged))

    def _late_answer(self, bookie: str, entry_ids: list[int], call: asyncio.Future[object]) -> None:
        """A read nobody waits for any more still tells of a bookie whose
        storage could not read its copies. (Bytes it returns are not checked:
        another replica's copy was served, and the scrub checks them all.)"""
        if not call.cancelled() and isinstance(call.exception(), DataLoss):
            self._damaged(bookie, entry_ids)

    async def read(self, first: int, last: int) -> AsyncIterator[list[ReadEntry]]:
        """Yield entries first..last in order, in chunks."""
        for start in range(first, last + 1, CHUNK_ENTRIES):
            end = min(start + CHUNK_ENTRIES - 1, last)
            started = time.perf_counter()
            if self._traced:
                # The span ends before the yield: a reader that goes away leaves this
                # generator suspended at the yield, to be closed later from another
                # task, where the span's context could not be detached.
                with _tracer.start_as_current_span(
                    "quire.gateway.read_chunk",
                    attributes={
                        "quire.ledger": self.ledger_id.qualified_name,
                        "quire.first": start,
                        "quire.last": end,
                    },
                ):
                    chunk = await self._read_chunk(start, end)
            else:
                chunk = await self._read_chunk(start, end)
            metrics.read_latency.record(time.perf_counter() - started)
            yield chunk

    async def _read_chunk(self, first: int, last: int) -> list[ReadEntry]:
        attempts = {e: _Attempt(replicas_of(self.metadata, e)) for e in range(first, last + 1)}
        done: dict[int, ReadEntry] = {}
        running: dict[asyncio.Future[tuple[dict[int, bytes], set[int]]], tuple[str, list[int]]] = {}

        def launch(requests: dict[str, list[int]]) -> None:
            for bookie, ids in requests.items():
                for entry_id in ids:
                    attempts[entry_id].outstanding += 1
                task = asyncio.ensure_future(self.remote.read_entries(bookie, self.ledger_id, ids))
                running[task] = (bookie, ids)

        def ask_next(entry_ids: list[int], requests: dict[str, list[int]]) -> None:
            for entry_id in entry_ids:
                bookie = attempts[entry_id].next_replica()
                if bookie is not None:
                    requests.setdefault(bookie, []).append(entry_id)

        try:
            first_round: dict[str, list[int]] = {}
            ask_next(list(attempts), first_round)
            launch(first_round)
            while len(done) < len(attempts):
                if not running:
                    stuck = next(e for e in attempts if e not in done)
                    raise self._exhausted(stuck, attempts[stuck])
                finished, _ = await asyncio.wait(
                    running, timeout=self.settings.speculative_delay_seconds, return_when=asyncio.FIRST_COMPLETED
                )
                follow_up: dict[str, list[int]] = {}
                if not finished:
                    # Every replica asked is slow: ask the next one as well.
                    slow = [e for e, a in attempts.items() if e not in done and a.outstanding]
                    ask_next(slow, follow_up)
                for task in finished:
                    bookie, ids = running.pop(task)
                    for entry_id in ids:
                        attempts[entry_id].outstanding -= 1
                    retry_here = self._take(task, bookie, ids, attempts, done)
                    if retry_here:
                        follow_up.setdefault(bookie, []).extend(retry_here)
                    failed = [e for e in ids if e not in done and e not in retry_here and not attempts[e].outstanding]
                    ask_next(failed, follow_up)
                launch(follow_up)
        finally:
            for call, (bookie, ids) in running.items():
                call.add_done_callback(functools.partial(self._late_answer, bookie, ids))
            let_finish(running)  # speculative reads still out end by their deadlines
        return [done[e] for e in range(first, last + 1)]

    def _take(
        self,
        task: asyncio.Future[tuple[dict[int, bytes], set[int]]],
        bookie: str,
        ids: list[int],
        attempts: dict[int, _Attempt],
        done: dict[int, ReadEntry],
    ) -> list[int]:
        """Record one bookie's answer; return the ids it left out to keep its
        response small (to be asked of it again)."""
        error = task.exception()
        if error is not None:
            if not isinstance(error, QuireError):
                raise error
            for entry_id in ids:
                attempts[entry_id].errors.append(f"{bookie}: {error}")
                if isinstance(error, DataLoss):  # its storage could not read them
                    attempts[entry_id].corrupt += 1
            if isinstance(error, DataLoss):
                self._damaged(bookie, ids)
            return []
        found, missing = task.result()
        cut: list[int] = []
        for entry_id in ids:
            if entry_id in done:
                continue
            attempt = attempts[entry_id]
            if entry_id in found:
                if not self.settings.verify_digests:
                    header = parse_header(found[entry_id])
                    done[entry_id] = ReadEntry(
                        entry_id, found[entry_id][header.size + self.digester.size :], header.length
                    )
                    continue
                try:
                    header, payload = verified_entry(found[entry_id], self.digester, self.ledger_id, entry_id)
                except QuireError as exc:
                    log.warning("ledger %s entry %d on %s: %s", self.ledger_id, entry_id, bookie, exc)
                    attempt.corrupt += 1
                    metrics.digest_mismatches.add(1, {"bookie_id": bookie})
                    self._damaged(bookie, [entry_id])
                    continue
                done[entry_id] = ReadEntry(entry_id, payload, header.length)
            elif entry_id in missing:
                attempt.missing += 1
            else:
                cut.append(entry_id)
        return cut

    def _exhausted(self, entry_id: int, attempt: _Attempt) -> QuireError:
        where = f"entry {entry_id} of ledger {self.ledger_id}"
        if attempt.corrupt:
            why = "; ".join(attempt.errors) or "digest mismatches"
            return DataLoss(
                f"{where}: no replica holds a readable copy whose digest checks ({why})", Reason.DIGEST_MISMATCH
            )
        if attempt.missing == len(attempt.replicas):
            return NotFound(f"{where} is not stored on any replica", Reason.ENTRY_NOT_FOUND)
        return Unavailable(
            f"{where}: no replica could be read ({'; '.join(attempt.errors) or 'all unreachable'})",
            Reason.BOOKIE_UNAVAILABLE,
        )
