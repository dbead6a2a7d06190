"""Blobs stored as entries of blob ledgers (BP-5's use case).

A blob is cut into chunks of at most `chunk_bytes`, written as consecutive
entries of one open blob ledger. Consecutive matters, so a blob ledger serves
one PutBlob at a time: each scope has a small pool of ledger slots, and a put
takes a slot for its duration. A slot's ledger is rolled over (closed, and a
new one created) once it is too big or too old. GetBlob reads with
read-unconfirmed semantics, so a blob is readable as soon as PutBlob returns
even though its ledger is still open.

The blob id is URL-safe base64 (no padding) of a small versioned struct:
version(1) | scope(8) | ledger(8) | first entry(8) | entry count(4), all
big-endian. Clients treat it as opaque.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import struct
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from quire_api.errors import InvalidArgument, QuireError, Reason
from quire_api.ids import LedgerId
from quire_gateway.ledgers import CreateSpec, LedgerOperations

log = logging.getLogger(__name__)

BLOB_ID_VERSION = 1
_BLOB_ID = struct.Struct(">BQQQI")
BLOB_LEDGER_PROPERTY = "quire.blob-ledger"


@dataclass(frozen=True)
class BlobRef:
    """Where a blob lives: entries first..first+count-1 of a ledger."""

    ledger_id: LedgerId
    first_entry_id: int
    entry_count: int


def encode_blob_id(ref: BlobRef) -> str:
    packed = _BLOB_ID.pack(
        BLOB_ID_VERSION, ref.ledger_id.scope_id, ref.ledger_id.ledger_id, ref.first_entry_id, ref.entry_count
    )
    return base64.urlsafe_b64encode(packed).rstrip(b"=").decode("ascii")


def decode_blob_id(blob_id: str) -> BlobRef:
    text = blob_id.strip()
    try:
        packed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"malformed blob id {blob_id!r}") from None
    if len(packed) != _BLOB_ID.size or packed[0] != BLOB_ID_VERSION:
        raise InvalidArgument(f"malformed blob id {blob_id!r}")
    _, scope_id, ledger_id, first, count = _BLOB_ID.unpack(packed)
    if count < 1 or first > 2**63 - 1 - count:
        raise InvalidArgument(f"malformed blob id {blob_id!r}")
    return BlobRef(LedgerId(scope_id, ledger_id), first, count)


@dataclass(frozen=True)
class BlobSettings:
    chunk_bytes: int = 1024 * 1024
    ledgers_per_scope: int = 2
    ledger_max_bytes: int = 1024 * 1024 * 1024
    ledger_max_age_seconds: float = 3600.0


@dataclass
class _BlobLedger:
    ledger_id: LedgerId
    created_at: float  # time.monotonic()
    size_bytes: int = 0


class BlobStore:
    def __init__(self, ledgers: LedgerOperations, settings: BlobSettings | None = None) -> None:
        self.ledgers = ledgers
        self.settings = settings or BlobSettings()
        # Per scope, the slots not in use; None is a slot without a ledger yet.
        self._free: dict[int, asyncio.Queue[_BlobLedger | None]] = {}

    def _slots(self, scope_id: int) -> asyncio.Queue[_BlobLedger | None]:
        queue = self._free.get(scope_id)
        if queue is None:
            queue = self._free[scope_id] = asyncio.Queue()
            for _ in range(self.settings.ledgers_per_scope):
                queue.put_nowait(None)
        return queue

    def _expired(self, ledger: _BlobLedger) -> bool:
        return (
            ledger.size_bytes >= self.settings.ledger_max_bytes
            or time.monotonic() - ledger.created_at >= self.settings.ledger_max_age_seconds
        )

    async def _usable(self, slot: _BlobLedger | None, scope_id: int) -> _BlobLedger:
        if slot is not None:
            handle = self.ledgers.handles.get(slot.ledger_id)
            if handle is not None and not handle.failed and not self._expired(slot):
                return slot
            self._retire(slot)
        metadata = await self.ledgers.create(
            CreateSpec(scope_id=scope_id, custom_metadata={BLOB_LEDGER_PROPERTY: str(BLOB_ID_VERSION)})
        )
        ledger_id = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
        log.info("scope %d: new blob ledger %s", scope_id, ledger_id)
        return _BlobLedger(ledger_id, time.monotonic())

    def _retire(self, ledger: _BlobLedger) -> None:
        """Close a rolled-over blob ledger in the background; its blobs stay readable."""

        async def close() -> None:
            try:
                await self.ledgers.close(ledger.ledger_id)
            except QuireError as exc:
                log.warning("blob ledger %s not closed: %s", ledger.ledger_id, exc)

        task = asyncio.ensure_future(close())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def put(self, scope_id: int, parts: AsyncIterator[bytes]) -> tuple[str, int]:
        """Store the blob whose bytes `parts` yields; its id and size."""
        slots = self._slots(scope_id)
        taken = await slots.get()
        slot: _BlobLedger | None = None
        try:
            slot = await self._usable(taken, scope_id)
            ledger_id = slot.ledger_id
            futures: list[asyncio.Future[int]] = []
            buffer = bytearray()
            size = 0
            chunk = self.settings.chunk_bytes
            async for part in parts:
                buffer += part
                size += len(part)
                while len(buffer) >= chunk:
                    futures.extend(await self.ledgers.append(ledger_id, [bytes(buffer[:chunk])]))
                    del buffer[:chunk]
            if buffer or not futures:
                futures.extend(await self.ledgers.append(ledger_id, [bytes(buffer)]))
            entry_ids = await asyncio.gather(*futures)
            slot.size_bytes += size
            # The slot was ours alone, so the entries are consecutive.
            assert entry_ids == list(range(entry_ids[0], entry_ids[0] + len(entry_ids))), entry_ids
            return encode_blob_id(BlobRef(ledger_id, entry_ids[0], len(entry_ids))), size
        finally:
            slots.put_nowait(slot)

    async def get(self, blob_id: str) -> AsyncIterator[bytes]:
        ref = decode_blob_id(blob_id)
        last = ref.first_entry_id + ref.entry_count - 1
        try:
            async for chunk in self.ledgers.reads.read(ref.ledger_id, ref.first_entry_id, last, confirmed=False):
                for entry in chunk:
                    yield entry.payload
        except QuireError as exc:
            if exc.code == "NOT_FOUND":
                raise type(exc)(f"blob {blob_id} not found: {exc}", Reason.ENTRY_NOT_FOUND) from None
            raise

    async def roll_over_idle(self) -> None:
        """Close idle blob ledgers that have grown too old (run periodically),
        so a quiet scope does not keep a ledger open for ever."""
        for slots in self._free.values():
            kept: list[_BlobLedger | None] = []
            while not slots.empty():
                slot = slots.get_nowait()
                if slot is not None and self._expired(slot):
                    self._retire(slot)
                    slot = None
                kept.append(slot)
            for slot in kept:
                slots.put_nowait(slot)
