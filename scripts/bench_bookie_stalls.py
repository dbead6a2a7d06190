"""How long a bookie's adds wait behind its other work, in one process.

A Bookie on a temporary directory holds `--entries` entries of 1 KiB in one
ledger. A writer adds one entry every 2 ms to another ledger, each awaited,
while the bookie (a) answers a scrub's check of every one of those entries,
verified, and then (b) deletes that ledger. Prints, for each, how long it took
and the longest add in the meantime, against the longest add before either
(docs/decisions.md, "Reads beside the writer" and "A delete's compaction runs
beside the writer").

    .venv/bin/python scripts/bench_bookie_stalls.py --entries 65000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from quire_api.ids import LedgerId
from quire_bookie.bookie import Bookie
from quire_bookie.storage import Stripes
from quire_common.entry import Digester, DigestType, master_key, pack_entry

KEY = master_key(b"bench")
DIGEST = Digester(DigestType.CRC32C, b"")
HELD, WRITTEN = LedgerId(9, 1), LedgerId(9, 2)
PACE_SECONDS = 0.002


def packed(ledger: LedgerId, entry_id: int, payload: bytes) -> bytes:
    return pack_entry(ledger, entry_id, entry_id - 1, (entry_id + 1) * len(payload), payload, DIGEST)


async def measure(entries: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        bookie = Bookie(Path(directory))
        await bookie.start()
        try:
            payload = os.urandom(1024)
            for first in range(0, entries, 500):
                ids = range(first, min(first + 500, entries))
                await bookie.add_entries(HELD, KEY, [(i, packed(HELD, i, payload)) for i in ids], False)
            waits: list[tuple[float, float]] = []  # (started, seconds) per add
            pacing = True

            async def paced_adds() -> None:
                entry_id = 0
                while pacing:
                    started = time.perf_counter()
                    await bookie.add_entries(WRITTEN, KEY, [(entry_id, packed(WRITTEN, entry_id, payload))], False)
                    waits.append((started, time.perf_counter() - started))
                    entry_id += 1
                    await asyncio.sleep(PACE_SECONDS)

            async def during(what: str, work: Callable[[], Awaitable[object]]) -> None:
                began = time.perf_counter()
                await work()
                ended = time.perf_counter()
                await asyncio.sleep(0.2)  # the adds held by the work end too
                # Every add that was waiting at some point of the work, begun before it or not.
                meanwhile = [seconds for started, seconds in waits if started <= ended and started + seconds >= began]
                longest = max(meanwhile, default=0.0)
                print(
                    f"{what}: {1000 * (ended - began):.0f} ms; {len(meanwhile)} adds meanwhile, "
                    f"the longest {1000 * longest:.1f} ms"
                )

            adding = asyncio.create_task(paced_adds())
            await asyncio.sleep(1.0)
            print(f"before: the longest of {len(waits)} adds {1000 * max(s for _, s in waits):.1f} ms")
            every = Stripes([9], [1], [0], [entries - 1], [1], [1], [0], [0], [entries - 1])
            await during(f"a scrub's check of {entries} entries, all verified", lambda: bookie.check_stripes(every))
            await during(f"a delete of a ledger of {entries} entries", lambda: bookie.delete_ledger(HELD))
            await asyncio.sleep(0.5)
            pacing = False
            await adding
        finally:
            await bookie.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=65_000, help="entries of the checked and deleted ledger")
    asyncio.run(measure(parser.parse_args().entries))


if __name__ == "__main__":
    main()
