"""A bookie's group commit in one process: what each commit costs its writer
thread and its event loop, step by step.

A Bookie on a temporary directory is fed AddStream messages one at a time
(each answer awaited, as a gateway's stream to it at one writer), each of
`--adds` adds of that many ledgers, each add of `--entries` entries of 1 KiB.
Prints the commits per second, the writer thread's and the event loop's user
and system CPU per commit (from /proc), and the writer thread's CPU
(`time.thread_time`) in each step of a commit. With `--no-sync` the WAL is
not synced, which leaves the hand-offs between the two threads and the Python
around them (docs/decisions.md, "Where the rest of a gateway's and a bookie's
time goes").

    .venv/bin/python scripts/bench_commit.py --commits 5000 --adds 1 --no-sync
    .venv/bin/python scripts/bench_commit.py --commits 300 --adds 16 --entries 100 --no-sync
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quire_api.ids import LedgerId
from quire_bookie import journal, storage
from quire_bookie.add_stream import AddStreamCall
from quire_bookie.bookie import Bookie, BookieSettings
from quire_bookie.journal import AddMessage
from quire_bookie.servicer import ReceivedAdds, _AddStreamCodec
from quire_common.entry import Digester, DigestType, pack_entry
from quire_common.service import event_loop_factory
from quire_gateway.write.bookie_streams import _STORED_IDS, AddRequest, add_fields

STEPS = (
    (journal.GroupCommitter, "_drain_inbox"),
    (journal.GroupCommitter, "_flush"),
    (journal.GroupCommitter, "_stage"),
    (storage.EntryStore, "write"),
    (journal.GroupCommitter, "_hand_back"),
)
WARMUP = 100


def timed_steps() -> collections.defaultdict[str, float]:
    """Wrap each step so that the thread CPU it takes is added up by name."""
    spent: collections.defaultdict[str, float] = collections.defaultdict(float)

    def timed(name: str, step: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return step(*args, **kwargs)
            finally:
                spent[name] += time.thread_time() - started

        return run

    for owner, name in STEPS:
        setattr(owner, name, timed(name, getattr(owner, name)))
    return spent


def cpu_ticks(thread_id: int) -> tuple[int, int]:
    """A thread's user and system CPU so far, in clock ticks."""
    stat = Path(f"/proc/self/task/{thread_id}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]), int(fields[12])


def messages(count: int, adds: int, entries: int = 1) -> list[ReceivedAdds]:
    """`count` AddStream messages, each of `adds` adds of as many ledgers, each add of
    `entries` entries of 1 KiB."""
    digester, key, payload = Digester(DigestType.CRC32C), b"k" * 20, b"p" * 1024
    ledgers = [LedgerId(0, 1000 + n) for n in range(adds)]
    fields = {ledger: add_fields(ledger, key) for ledger in ledgers}
    made = []
    for n in range(count):
        pieces: list[bytes] = []
        ids = range(n * entries, (n + 1) * entries)
        for ledger in ledgers:
            packed = [(e, pack_entry(ledger, e, e - 1, 1024 * (e + 1), payload, digester)) for e in ids]
            pieces += AddRequest(ledger, key, packed, fields=fields[ledger]).wire
        made.append(ReceivedAdds.from_wire(b"".join([*pieces, _STORED_IDS])))
    return made


async def measure(
    commits: int, adds: int, entries: int, sync: bool, spent: collections.defaultdict[str, float]
) -> None:
    with tempfile.TemporaryDirectory() as data_dir:  # TMPDIR chooses the disk
        bookie = Bookie(Path(data_dir), BookieSettings(sync=sync))
        await bookie.start()
        try:
            stream = AddStreamCall(bookie, _AddStreamCodec())
            loop = asyncio.get_running_loop()
            answered: asyncio.Future[None] = loop.create_future()

            def deliver(answer: object) -> None:
                if not answered.done():
                    answered.set_result(None)

            stream.deliver = deliver  # type: ignore[method-assign]
            writer = bookie._committer._thread
            assert writer is not None and writer.native_id is not None
            for n, message in enumerate(messages(commits + WARMUP, adds, entries)):
                if n == WARMUP:
                    spent.clear()
                    writer_before, loop_before = cpu_ticks(writer.native_id), cpu_ticks(threading.get_native_id())
                    started = time.perf_counter()
                answered = loop.create_future()
                await bookie.queue_add_message(AddMessage(stream, message, message.size_bytes, time.perf_counter()))
                await answered
            elapsed = time.perf_counter() - started
            writer_after, loop_after = cpu_ticks(writer.native_id), cpu_ticks(threading.get_native_id())
        finally:
            await bookie.close()
    per_commit = 1e6 / os.sysconf("SC_CLK_TCK") / commits
    print(
        f"{commits / elapsed:,.0f} commits/s of {adds} add(s) of {entries} entr{'y' if entries == 1 else 'ies'}, "
        f"sync {'on' if sync else 'off'}; "
        f"µs per commit: writer thread user {(writer_after[0] - writer_before[0]) * per_commit:.0f} "
        f"system {(writer_after[1] - writer_before[1]) * per_commit:.0f}, "
        f"event loop user {(loop_after[0] - loop_before[0]) * per_commit:.0f} "
        f"system {(loop_after[1] - loop_before[1]) * per_commit:.0f}"
    )
    print("writer thread CPU per commit by step (µs): " + ", ".join(
        f"{name} {spent[name] / commits * 1e6:.1f}" for _, name in STEPS
    ))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=5000, help="messages measured (after 100 unmeasured)")
    parser.add_argument("--adds", type=int, default=1, help="adds per message, each of its own ledger")
    parser.add_argument("--entries", type=int, default=1, help="entries per add (1 KiB each)")
    parser.add_argument("--no-sync", action="store_true", help="do not sync the WAL")
    args = parser.parse_args()
    if args.commits < 1 or args.adds < 1 or args.entries < 1:
        parser.error("--commits, --adds and --entries must be at least 1")
    # The services' default loop (QUIRE_EVENT_LOOP): the hand-back to it is uvloop's call_soon_threadsafe.
    with asyncio.Runner(loop_factory=event_loop_factory("uvloop")) as runner:
        runner.run(measure(args.commits, args.adds, args.entries, not args.no_sync, timed_steps()))


if __name__ == "__main__":
    main()
