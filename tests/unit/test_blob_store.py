"""Blob ledgers: chunking into consecutive entries, one put per ledger at a
time, and roll-over by size and age (against a fake of the ledger operations)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from quire_api.ids import LedgerId
from quire_gateway.blobs import BlobSettings, BlobStore, decode_blob_id
from quire_gateway.read.replicas import ReadEntry
from quire_proto.common.v1 import common_pb2


@dataclass
class FakeHandle:
    entries: list[bytes] = field(default_factory=list)
    failed: bool = False


class FakeLedgerOperations:
    def __init__(self) -> None:
        self.handles: dict[LedgerId, FakeHandle] = {}
        self.closed: list[LedgerId] = []
        self.created = 0
        self.reads = self  # LedgerOperations.reads (read/ledger_reads.py): here the same fake

    async def create(self, spec):  # type: ignore[no-untyped-def]
        self.created += 1
        ledger_id = LedgerId(spec.scope_id, self.created)
        self.handles[ledger_id] = FakeHandle()
        return common_pb2.LedgerMetadata(ledger_id=common_pb2.LedgerId(scope_id=spec.scope_id, ledger_id=self.created))

    async def append(self, ledger_id, payloads):  # type: ignore[no-untyped-def]
        handle = self.handles[ledger_id]
        futures = []
        for payload in payloads:
            await asyncio.sleep(0)  # let other puts interleave if they could
            handle.entries.append(payload)
            future = asyncio.get_running_loop().create_future()
            future.set_result(len(handle.entries) - 1)
            futures.append(future)
        return futures

    async def close(self, ledger_id):  # type: ignore[no-untyped-def]
        self.closed.append(ledger_id)
        self.handles.pop(ledger_id)

    async def read(self, ledger_id, first, last, *, confirmed):  # type: ignore[no-untyped-def]
        entries = self.handles[ledger_id].entries
        yield [ReadEntry(e, entries[e], 0) for e in range(first, last + 1)]


async def parts_of(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def test_big_blobs_are_consecutive_chunks_even_with_concurrent_puts():
    operations = FakeLedgerOperations()
    store = BlobStore(operations, BlobSettings(chunk_bytes=10, ledgers_per_scope=1))  # type: ignore[arg-type]
    blobs = [bytes([i]) * (25 + i) for i in range(5)]
    results = await asyncio.gather(*(store.put(0, parts_of(b, 7)) for b in blobs))
    for (blob_id, size), data in zip(results, blobs, strict=True):
        ref = decode_blob_id(blob_id)
        assert size == len(data) and ref.entry_count == 3
        got = b"".join([p async for p in store.get(blob_id)])
        assert got == data


async def test_ledgers_roll_over_by_size_and_old_ones_close():
    operations = FakeLedgerOperations()
    store = BlobStore(operations, BlobSettings(chunk_bytes=100, ledgers_per_scope=1, ledger_max_bytes=250))  # type: ignore[arg-type]
    ids = [(await store.put(9, parts_of(b"x" * 100, 100)))[0] for _ in range(5)]
    ledgers = [decode_blob_id(i).ledger_id for i in ids]
    assert ledgers[0] == ledgers[1] == ledgers[2] and ledgers[3] != ledgers[2]
    await asyncio.sleep(0.01)
    assert operations.closed == [ledgers[0]]


async def test_idle_ledgers_roll_over_by_age():
    operations = FakeLedgerOperations()
    store = BlobStore(operations, BlobSettings(ledgers_per_scope=1, ledger_max_age_seconds=0.05))  # type: ignore[arg-type]
    first = decode_blob_id((await store.put(1, parts_of(b"a", 1)))[0]).ledger_id
    await asyncio.sleep(0.06)
    await store.roll_over_idle()
    await asyncio.sleep(0.01)
    assert operations.closed == [first]
    second = decode_blob_id((await store.put(1, parts_of(b"b", 1)))[0]).ledger_id
    assert second != first


async def test_an_empty_blob_is_one_empty_entry():
    operations = FakeLedgerOperations()
    store = BlobStore(operations)  # type: ignore[arg-type]

    async def nothing() -> AsyncIterator[bytes]:
        return
        yield b""

    blob_id, size = await store.put(0, nothing())
    assert size == 0 and decode_blob_id(blob_id).entry_count == 1
