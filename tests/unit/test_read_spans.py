"""A gateway read abandoned by its reader: the read generator is left suspended
between chunks and closed later from another task (as the event loop does for
an async generator nobody iterates any more). Its span must not be open across
that suspension, or OpenTelemetry fails to detach the span's context there
("Failed to detach context")."""

from __future__ import annotations

import asyncio
import logging

from quire_gateway.read.replicas import CHUNK_ENTRIES, EntryReader
from tests.unit.test_reads_and_recovery import LEDGER, stored_ledger


async def test_a_read_abandoned_between_chunks_closes_cleanly_from_another_task(caplog):
    remote = stored_ledger(["a:1", "b:1", "c:1"], 2, 2, CHUNK_ENTRIES + 10)
    # Traced, as a gateway that exports spans reads (untraced, a reader makes no span at all).
    reader = EntryReader(remote, LEDGER, remote.metadata, traced=True)  # type: ignore[arg-type]
    chunks = reader.read(0, CHUNK_ENTRIES + 5)

    async def first_chunk() -> int:
        return len(await anext(chunks))

    assert await asyncio.create_task(first_chunk()) == CHUNK_ENTRIES  # its own task and context, as a call's
    with caplog.at_level(logging.ERROR):
        await asyncio.create_task(chunks.aclose())  # the reader went away
    assert "Failed to detach context" not in caplog.text
