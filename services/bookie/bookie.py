"""The bookie's domain logic: validate requests against entry headers and
ledger state, store through the group committer, read back. No grpc here."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from quire_bookie.journal import FlushStats, GroupCommitter
from quire_bookie.storage import NO_ENTRY, EntryStore, LedgerState
from quire_common.entry import parse_header
from quire_common.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Reason,
    ResourceExhausted,
)
from quire_common.ids import LedgerId

log = logging.getLogger(__name__)

LOAD_WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class BookieInfo:
    total_disk_bytes: int
    free_disk_bytes: int
    read_only: bool
    adds_per_second: float
    add_bytes_per_second: float
    sync_latency_ms: float


class Bookie:
    def __init__(
        self,
        data_dir: Path,
        *,
        max_entry_bytes: int = 5 * 1024 * 1024,
        max_read_bytes: int = 4 * 1024 * 1024,
        max_batch_bytes: int = 4 * 1024 * 1024,
        sync: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.max_entry_bytes = max_entry_bytes
        self.max_read_bytes = max_read_bytes
        self.read_only = False
        self._store = EntryStore(data_dir / "rocksdb", sync=sync)
        self._recent_flushes: deque[FlushStats] = deque(maxlen=10_000)
        self._committer = GroupCommitter(
            self._store,
            self._store.load_states(),
            max_batch_bytes=max_batch_bytes,
            on_flush=self._recent_flushes.append,
        )

    async def start(self) -> None:
        self._committer.start()

    async def close(self) -> None:
        await self._committer.stop()
        self._store.close()

    def _state(self, ledger_id: LedgerId) -> LedgerState | None:
        return self._committer.states.get(ledger_id)

    async def add_entries(
        self, ledger_id: LedgerId, master_key: bytes, entries: list[tuple[int, bytes]], recovery: bool
    ) -> list[int]:
        """Store a batch of packed entries durably; all or nothing."""
        if not entries:
            raise InvalidArgument("an add carries no entries")
        if self.read_only and not recovery:
            raise FailedPrecondition("bookie is read-only; write elsewhere", Reason.BOOKIE_READ_ONLY)
        if len(master_key) != 20:
            raise InvalidArgument(f"master_key must be 20 bytes (SHA-1), got {len(master_key)}")
        checked: list[tuple[int, int, bytes]] = []
        for entry_id, data in entries:
            if len(data) > self.max_entry_bytes:
                raise ResourceExhausted(
                    f"entry {entry_id} is {len(data)} bytes; this bookie takes at most {self.max_entry_bytes}",
                    Reason.ENTRY_TOO_LARGE,
                )
            header = parse_header(data)
            if header.ledger_id != ledger_id or header.entry_id != entry_id:
                raise InvalidArgument(
                    f"entry header says ledger {header.ledger_id} entry {header.entry_id}, "
                    f"the request says ledger {ledger_id} entry {entry_id}",
                    Reason.ENTRY_HEADER_MISMATCH,
                )
            if entry_id < 0:
                raise InvalidArgument(f"entry id {entry_id} is negative")
            checked.append((entry_id, header.last_add_confirmed, data))
        await self._committer.add(ledger_id, master_key, checked, recovery)
        return [entry_id for entry_id, _ in entries]

    async def fence(self, ledger_id: LedgerId, master_key: bytes) -> LedgerState:
        if len(master_key) != 20:
            raise InvalidArgument(f"master_key must be 20 bytes (SHA-1), got {len(master_key)}")
        return await self._committer.fence(ledger_id, master_key)

    async def read_entry(self, ledger_id: LedgerId, entry_id: int) -> tuple[int, bytes]:
        if entry_id == -1:
            last = await asyncio.to_thread(self._store.last_entry, ledger_id)
            if last is None:
                raise NotFound(f"ledger {ledger_id} has no entries on this bookie", Reason.ENTRY_NOT_FOUND)
            return last
        if entry_id < 0:
            raise InvalidArgument(f"entry id {entry_id} is negative (use -1 for the last entry)")
        data = await asyncio.to_thread(self._store.read, ledger_id, entry_id)
        if data is None:
            raise NotFound(f"entry {entry_id} of ledger {ledger_id} is not on this bookie", Reason.ENTRY_NOT_FOUND)
        return entry_id, data

    async def read_entries(
        self, ledger_id: LedgerId, entry_ids: list[int], max_bytes: int
    ) -> tuple[list[tuple[int, bytes]], list[int], bool]:
        if any(entry_id < 0 for entry_id in entry_ids):
            raise InvalidArgument("entry ids must not be negative")
        limit = min(max_bytes or self.max_read_bytes, self.max_read_bytes)
        return await asyncio.to_thread(self._store.read_many, ledger_id, entry_ids, limit)

    def last_add_confirmed(self, ledger_id: LedgerId) -> tuple[int, int, bool]:
        """(LAC, last entry id, fenced) as this bookie knows them."""
        state = self._state(ledger_id)
        if state is None:
            return NO_ENTRY, NO_ENTRY, False
        return max(state.last_add_confirmed, state.explicit_lac), state.last_entry_id, state.fenced

    async def delete_ledger(self, ledger_id: LedgerId) -> int:
        count = await asyncio.to_thread(self._store.delete_ledger, ledger_id)
        self._committer.states.pop(ledger_id, None)
        log.info("deleted ledger %s (%d entries)", ledger_id, count)
        return count

    def info(self) -> BookieInfo:
        usage = shutil.disk_usage(self.data_dir)
        now = time.time()
        recent = [f for f in self._recent_flushes if now - f.at <= LOAD_WINDOW_SECONDS]
        entries = sum(f.entries for f in recent)
        size = sum(f.size_bytes for f in recent)
        sync_ms = 1000 * sum(f.sync_seconds for f in recent) / len(recent) if recent else 0.0
        return BookieInfo(
            usage.total,
            usage.free,
            self.read_only,
            entries / LOAD_WINDOW_SECONDS,
            size / LOAD_WINDOW_SECONDS,
            sync_ms,
        )
