"""Reading entries back from their replicas.

For each entry the replicas are its write set in the ensemble that covers it.
Entries are read in chunks: each entry is asked of its next untried replica,
one ReadEntries call per bookie per round, all bookies in parallel. A replica
that is unreachable, lacks the entry, or returns bytes whose digest does not
check is skipped for the next one. An entry fails only when every replica has
been tried: DATA_LOSS if some copy was corrupt, NOT_FOUND if every replica
said it has no such entry, UNAVAILABLE otherwise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from quire.common.v1 import common_pb2
from quire_common.entry import Digester, DigestMismatch, DigestType, unpack_entry
from quire_common.errors import DataLoss, NotFound, QuireError, Reason, Unavailable
from quire_common.ids import LedgerId
from quire_common.telemetry import tracer
from quire_gateway.handle import write_set
from quire_gateway.remote import Remote

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

CHUNK_ENTRIES = 512


@dataclass(frozen=True)
class ReadEntry:
    entry_id: int
    payload: bytes
    length: int


@dataclass
class _Attempt:
    replicas: list[str]
    tried: int = 0
    missing: int = 0
    corrupt: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def current(self) -> str | None:
        return self.replicas[self.tried] if self.tried < len(self.replicas) else None


def replicas_of(metadata: common_pb2.LedgerMetadata, entry_id: int) -> list[str]:
    """The write set of `entry_id` in the ensemble covering it."""
    ensemble = metadata.ensembles[0]
    for candidate in metadata.ensembles:
        if candidate.first_entry_id <= entry_id:
            ensemble = candidate
    return write_set(entry_id, list(ensemble.bookie_ids), metadata.write_quorum_size)


class EntryReader:
    def __init__(self, remote: Remote, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata) -> None:
        self.remote = remote
        self.ledger_id = ledger_id
        self.metadata = metadata
        self.digester = Digester(metadata.digest_type or DigestType.CRC32C, metadata.password)

    async def read(self, first: int, last: int) -> AsyncIterator[list[ReadEntry]]:
        """Yield entries first..last in order, in chunks."""
        for start in range(first, last + 1, CHUNK_ENTRIES):
            end = min(start + CHUNK_ENTRIES - 1, last)
            with _tracer.start_as_current_span(
                "quire.gateway.read_chunk",
                attributes={
                    "quire.ledger": self.ledger_id.qualified_name,
                    "quire.first": start,
                    "quire.last": end,
                },
            ):
                yield await self._read_chunk(start, end)

    async def _read_chunk(self, first: int, last: int) -> list[ReadEntry]:
        attempts = {e: _Attempt(replicas_of(self.metadata, e)) for e in range(first, last + 1)}
        done: dict[int, ReadEntry] = {}
        while len(done) < len(attempts):
            by_bookie: dict[str, list[int]] = {}
            for entry_id, attempt in attempts.items():
                if entry_id in done:
                    continue
                bookie = attempt.current
                if bookie is None:
                    raise self._exhausted(entry_id, attempt)
                by_bookie.setdefault(bookie, []).append(entry_id)
            results = await asyncio.gather(
                *(self._read_from(bookie, ids) for bookie, ids in by_bookie.items()), return_exceptions=True
            )
            for (bookie, ids), result in zip(by_bookie.items(), results, strict=True):
                if isinstance(result, BaseException):
                    if not isinstance(result, QuireError):
                        raise result
                    for entry_id in ids:
                        attempts[entry_id].errors.append(f"{bookie}: {result}")
                        attempts[entry_id].tried += 1
                    continue
                found, missing = result
                for entry_id in ids:
                    attempt = attempts[entry_id]
                    if entry_id in found:
                        try:
                            header, payload = unpack_entry(found[entry_id], self.digester)
                        except DigestMismatch as exc:
                            log.warning("ledger %s entry %d on %s: %s", self.ledger_id, entry_id, bookie, exc)
                            attempt.corrupt += 1
                            attempt.tried += 1
                            continue
                        if header.ledger_id != self.ledger_id or header.entry_id != entry_id:
                            attempt.corrupt += 1
                            attempt.tried += 1
                            continue
                        done[entry_id] = ReadEntry(entry_id, payload, header.length)
                    elif entry_id in missing:
                        attempt.missing += 1
                        attempt.tried += 1
                    # else: cut by the response size limit; ask the same replica again.
        return [done[e] for e in range(first, last + 1)]

    async def _read_from(self, bookie_id: str, entry_ids: list[int]) -> tuple[dict[int, bytes], set[int]]:
        return await self.remote.read_entries(bookie_id, self.ledger_id, entry_ids)

    def _exhausted(self, entry_id: int, attempt: _Attempt) -> QuireError:
        where = f"entry {entry_id} of ledger {self.ledger_id}"
        if attempt.corrupt:
            return DataLoss(f"{where}: no replica holds a copy whose digest checks", Reason.DIGEST_MISMATCH)
        if attempt.missing == len(attempt.replicas):
            return NotFound(f"{where} is not stored on any replica", Reason.ENTRY_NOT_FOUND)
        return Unavailable(
            f"{where}: no replica could be read ({'; '.join(attempt.errors) or 'all unreachable'})",
            Reason.BOOKIE_UNAVAILABLE,
        )


async def read_last_add_confirmed(remote: Remote, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata) -> int:
    """The highest LAC any bookie of the last ensemble reports. (The
    coverage rule that makes this safe against a minority of slow bookies
    belongs to recovery.)"""
    bookies = list(metadata.ensembles[-1].bookie_ids)
    results = await asyncio.gather(
        *(remote.read_last_add_confirmed(b, ledger_id) for b in bookies), return_exceptions=True
    )
    lacs = [r[0] for r in results if not isinstance(r, BaseException)]
    if not lacs:
        raise Unavailable(
            f"ledger {ledger_id}: none of the {len(bookies)} bookies of its last ensemble answered",
            Reason.BOOKIE_UNAVAILABLE,
        )
    return max(lacs)
