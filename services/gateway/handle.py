"""The write handle: one open ledger being written through this gateway.

Entry e goes to the ensemble members (e + i) mod E for i in 0..W-1 (DESIGN
section 6). An entry completes when A of its write set have it durably AND
every earlier entry has completed; the LAC then moves to it. Each entry is
packed (format V2, the ledger's digest) with the LAC as it stood when packed.
Entries are batched: one AddEntries call per bookie per submitted batch.

In-flight bytes are bounded: `submit` waits for room, so a slow bookie slows
its writers instead of growing memory without bound.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from quire.common.v1 import common_pb2
from quire_common.entry import V2_HEADER_SIZE, Digester, DigestType, master_key, pack_entry
from quire_common.errors import (
    Aborted,
    FailedPrecondition,
    PermissionDenied,
    QuireError,
    Reason,
    ResourceExhausted,
    Unavailable,
)
from quire_common.ids import LedgerId
from quire_common.telemetry import tracer
from quire_gateway.remote import Remote

log = logging.getLogger(__name__)
_tracer = tracer(__name__)


@dataclass
class _Pending:
    length: int  # the ledger's cumulative length including this entry
    size_bytes: int
    future: asyncio.Future[int]
    acks: set[str] = field(default_factory=set)
    failures: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class WriteSettings:
    max_inflight_bytes: int = 64 * 1024 * 1024
    max_entry_bytes: int = 5 * 1024 * 1024 - 1024
    # How long a bookie may stay unreachable before its entries fail.
    bookie_retry_seconds: float = 5.0


def write_set(entry_id: int, ensemble: list[str], write_quorum: int) -> list[str]:
    """The bookies that store entry `entry_id` (DESIGN section 6 striping)."""
    size = len(ensemble)
    return [ensemble[(entry_id + i) % size] for i in range(write_quorum)]


class WriteHandle:
    def __init__(
        self,
        remote: Remote,
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata,
        version: int,
        settings: WriteSettings,
    ) -> None:
        self.remote = remote
        self.ledger_id = ledger_id
        self.metadata = metadata
        self.version = version
        self.settings = settings
        self.ensemble = list(metadata.ensembles[-1].bookie_ids)
        self.write_quorum = metadata.write_quorum_size
        self.ack_quorum = metadata.ack_quorum_size
        self.digester = Digester(metadata.digest_type or DigestType.CRC32C, metadata.password)
        self.master_key = master_key(metadata.password)
        self.next_entry_id = 0
        self.last_add_confirmed = -1
        self.length = 0  # cumulative length of every entry submitted
        self.confirmed_length = 0  # cumulative length up to the LAC
        self.closed = False
        self._pending: dict[int, _Pending] = {}
        self._inflight_bytes = 0
        self._room = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._failure: QuireError | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def _check_writable(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self.closed:
            raise FailedPrecondition(f"ledger {self.ledger_id} is closed", Reason.LEDGER_CLOSED)

    async def submit(self, payloads: list[bytes]) -> list[asyncio.Future[int]]:
        """Assign ids to `payloads`, send them, and return one future per entry
        that resolves to its id once it is confirmed (or fails)."""
        self._check_writable()
        for payload in payloads:
            if len(payload) > self.settings.max_entry_bytes:
                raise ResourceExhausted(
                    f"entry payload is {len(payload)} bytes; the limit is {self.settings.max_entry_bytes}",
                    Reason.ENTRY_TOO_LARGE,
                )
        size = sum(len(p) + V2_HEADER_SIZE for p in payloads)
        while self._inflight_bytes and self._inflight_bytes + size > self.settings.max_inflight_bytes:
            self._room.clear()
            await self._room.wait()
            self._check_writable()
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[int]] = []
        per_bookie: dict[str, list[tuple[int, bytes]]] = {}
        for payload in payloads:
            entry_id = self.next_entry_id
            self.next_entry_id += 1
            self.length += len(payload)
            packed = pack_entry(self.ledger_id, entry_id, self.last_add_confirmed, self.length, payload, self.digester)
            future: asyncio.Future[int] = loop.create_future()
            self._pending[entry_id] = _Pending(self.length, len(packed), future)
            self._inflight_bytes += len(packed)
            futures.append(future)
            for bookie_id in write_set(entry_id, self.ensemble, self.write_quorum):
                per_bookie.setdefault(bookie_id, []).append((entry_id, packed))
        self._idle.clear()
        for bookie_id, entries in per_bookie.items():
            task = asyncio.create_task(self._send(bookie_id, entries))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return futures

    async def _send(self, bookie_id: str, entries: list[tuple[int, bytes]]) -> None:
        deadline = asyncio.get_running_loop().time() + self.settings.bookie_retry_seconds
        delay = 0.05
        while True:
            try:
                with _tracer.start_as_current_span(
                    "quire.gateway.bookie_add",
                    attributes={
                        "quire.ledger": self.ledger_id.qualified_name,
                        "quire.bookie": bookie_id,
                        "quire.entries": len(entries),
                    },
                ):
                    await self.remote.add_entries(bookie_id, self.ledger_id, self.master_key, entries)
                break
            except Unavailable as exc:
                if asyncio.get_running_loop().time() + delay > deadline:
                    self._bookie_failed(bookie_id, [e for e, _ in entries], exc)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            except QuireError as exc:
                self._bookie_failed(bookie_id, [e for e, _ in entries], exc)
                return
        for entry_id, _ in entries:
            pending = self._pending.get(entry_id)
            if pending is not None:
                pending.acks.add(bookie_id)
        self._advance()

    def _bookie_failed(self, bookie_id: str, entry_ids: list[int], error: QuireError) -> None:
        log.warning("ledger %s: bookie %s failed %d entries: %s", self.ledger_id, bookie_id, len(entry_ids), error)
        for entry_id in entry_ids:
            pending = self._pending.get(entry_id)
            if pending is None:
                continue
            pending.failures.add(bookie_id)
            if self.write_quorum - len(pending.failures) < self.ack_quorum:
                # Entries complete in order, so nothing after this one can either.
                if isinstance(error, FailedPrecondition | PermissionDenied):
                    self._fail(error)
                else:
                    self._fail(
                        Unavailable(
                            f"ledger {self.ledger_id}: entry {entry_id} cannot reach its ack quorum of "
                            f"{self.ack_quorum}: bookie {bookie_id} failed ({error})",
                            Reason.BOOKIE_UNAVAILABLE,
                        )
                    )
                return
        self._advance()

    def _advance(self) -> None:
        """Move the LAC over every consecutive entry that has its ack quorum."""
        while True:
            pending = self._pending.get(self.last_add_confirmed + 1)
            if pending is None or len(pending.acks) < self.ack_quorum:
                break
            self.last_add_confirmed += 1
            self.confirmed_length = pending.length
            del self._pending[self.last_add_confirmed]
            self._inflight_bytes -= pending.size_bytes
            if not pending.future.done():
                pending.future.set_result(self.last_add_confirmed)
        self._room.set()
        if not self._pending:
            self._idle.set()

    def _fail(self, error: QuireError) -> None:
        """The handle cannot go on: fail every pending entry."""
        if self._failure is None:
            self._failure = error
            log.error("ledger %s write handle failed: %s", self.ledger_id, error)
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(error)
        self._pending.clear()
        self._inflight_bytes = 0
        self._room.set()
        self._idle.set()

    async def close(self) -> common_pb2.LedgerMetadata:
        """Stop taking entries, wait for those in flight, then record the end
        (the LAC) in the metadata with compare-and-swap."""
        self.closed = True
        await self._idle.wait()
        metadata, version = self.metadata, self.version
        while True:
            if metadata.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
                raise FailedPrecondition(f"ledger {self.ledger_id} is being recovered", Reason.LEDGER_FENCED)
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                if metadata.last_entry_id != self.last_add_confirmed:
                    raise FailedPrecondition(
                        f"ledger {self.ledger_id} was closed elsewhere at entry {metadata.last_entry_id}",
                        Reason.LEDGER_CLOSED,
                    )
                return metadata
            updated = common_pb2.LedgerMetadata()
            updated.CopyFrom(metadata)
            updated.state = common_pb2.LEDGER_STATE_CLOSED
            updated.last_entry_id = self.last_add_confirmed
            updated.length = self.confirmed_length
            try:
                with _tracer.start_as_current_span(
                    "quire.gateway.close_metadata", attributes={"quire.ledger": self.ledger_id.qualified_name}
                ):
                    self.version = await self.remote.update_ledger_metadata(self.ledger_id, updated, version)
                self.metadata = updated
                log.info("ledger %s closed at entry %d", self.ledger_id, self.last_add_confirmed)
                return updated
            except Aborted:
                metadata, version = await self.remote.get_ledger_metadata(self.ledger_id)

    def abandon(self, error: QuireError) -> None:
        """Fail whatever is pending and stop (the ledger was deleted)."""
        self.closed = True
        self._fail(error)
