"""What etcd's memory grows by per ledger: Quire's writes against the least a
store of one record per ledger can ask of etcd, to measure before calling an
etcd memory target out of reach.

    python scripts/floor_etcd_memory.py [--ledgers 100000] [--pattern one-record|quire]

One etcd started as Quire starts it (`etcd_command`: pre-vote, a raft snapshot
every 10,000 writes, history compacted after an hour), written through the
registry's own etcd client, 16 writes in flight. Patterns:

- `one-record`: per ledger one key under /quire/local/ledgers/ and one write
  of a record the size of a parsed-and-trimmed LedgerMetadata (112 bytes): the
  least any design that keeps each ledger's metadata in etcd writes;
- `quire`: what Quire writes for a one-entry ledger (measured from a cluster's
  keys): a create transaction holding the ledger's record (261 bytes) and its
  create-requests key (133 bytes), then the record again at the close.

Printed: etcd's RSS empty and 10 s and 60 s after the last write, its
database size and Go heap in use (etcd's /metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from quire_client.cluster import etcd_command, free_port
from quire_registry.store import EtcdStore, Put

RECORD_BYTES = {"one-record": 112, "quire": 261}
CREATE_REQUEST_BYTES = 133
IN_FLIGHT = 16


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def etcd_figures(port: int) -> dict[str, float]:
    """Database size and Go heap in use, MiB."""
    wanted = {"etcd_mvcc_db_total_size_in_bytes": "db", "go_memstats_heap_inuse_bytes": "go_heap_in_use"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    figures = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            figures[wanted[name]] = round(float(value) / 2**20, 1)
    return figures


async def write_ledger(store: EtcdStore, pattern: str) -> None:
    key = f"/quire/local/ledgers/{uuid.uuid4()}".encode()
    record = os.urandom(RECORD_BYTES[pattern])
    if pattern == "one-record":
        await store.transact([], {}, [Put(key, record)])
        return
    request_key = f"/quire/local/create-requests/{uuid.uuid4()}".encode()
    await store.transact([key, request_key], {}, [Put(key, record), Put(request_key, os.urandom(CREATE_REQUEST_BYTES))])
    await store.transact([], {key: 1}, [Put(key, record)])  # the close


async def fill(port: int, ledgers: int, pattern: str) -> float:
    store = EtcdStore([f"127.0.0.1:{port}"])
    await store.connect()
    try:
        started = time.monotonic()
        left = iter(range(ledgers))

        async def writer() -> None:
            for _ in left:
                await write_ledger(store, pattern)

        await asyncio.gather(*(writer() for _ in range(IN_FLIGHT)))
        return ledgers / (time.monotonic() - started)
    finally:
        await store.close()


def wait_healthy(port: int) -> None:
    for _ in range(200):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("etcd did not become healthy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledgers", type=int, default=100_000)
    parser.add_argument("--pattern", choices=sorted(RECORD_BYTES), default="one-record")
    parser.add_argument("--etcd", default="/usr/bin/etcd")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="floor-etcd-") as data_dir:
        command = etcd_command(args.etcd, "floor", Path(data_dir) / "member", port, free_port())
        etcd = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_healthy(port)
            time.sleep(2)
            print(f"{args.pattern}: empty RSS {rss_mib(etcd.pid):.1f} MiB {etcd_figures(port)}", flush=True)
            rate = asyncio.run(fill(port, args.ledgers, args.pattern))
            print(f"{args.pattern}: {args.ledgers} ledgers written at {rate:.0f}/s", flush=True)
            for wait in (10, 50):
                time.sleep(wait)
                print(f"{args.pattern}: RSS {rss_mib(etcd.pid):.1f} MiB {etcd_figures(port)}", flush=True)
        finally:
            etcd.terminate()
            etcd.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
