"""The registry's etcd watches across an etcd restart: they go on delivering,
and leave no task pending nor async generator half-closed behind them (a long
soak found both in the registry's log after every etcd restart)."""

from __future__ import annotations

import asyncio
import gc
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_client.cluster import etcd_command, etcd_healthy, free_port
from quire_proto.registry.v1 import registry_pb2
from quire_registry.ledger_records import IdMode
from quire_registry.registry import Registry
from quire_registry.store import EtcdStore
from tests.integration.test_registry_etcd import metadata, two_endpoints

pytestmark = pytest.mark.integration


class RestartableEtcd:
    """An etcd of this test's own, restarted on the same ports and data."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port, self.peer_port = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("etcd") or "/usr/bin/etcd"
        with (self.data_dir / "etcd.log").open("ab") as log:
            self.process = subprocess.Popen(
                etcd_command(binary, "restart", self.data_dir / "etcd", self.port, self.peer_port),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while not etcd_healthy(self.port):
            assert time.monotonic() < deadline, "etcd did not become healthy within 60s"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[RestartableEtcd]:
    etcd = RestartableEtcd(tmp_path)
    etcd.start()
    try:
        yield etcd
    finally:
        etcd.stop()


def pending_request_feeders() -> set[asyncio.Task[object]]:
    """gRPC's tasks that feed a stream's requests and have not finished."""
    return {
        task for task in asyncio.all_tasks() if not task.done() and "_consume_request_iterator" in repr(task.get_coro())
    }


async def next_of(events, wanted):  # type: ignore[no-untyped-def]
    """The first item from `events` for which `wanted(item)` holds (generous deadline)."""
    while True:
        item = await asyncio.wait_for(anext(events), timeout=60)
        if wanted(item):
            return item


async def test_watches_survive_an_etcd_restart_and_leave_nothing_pending(own_etcd, caplog):
    loop = asyncio.get_running_loop()
    loop_errors: list[str] = []
    previous_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: loop_errors.append(str(context.get("message"))))
    before = pending_request_feeders()
    store = EtcdStore([own_etcd.endpoint])
    await store.connect()
    registry = Registry(store, "restart", default_ttl_seconds=10)
    bookies = registry.watch_bookies()
    ledgers = registry.watch_ledgers(0, heartbeat_seconds=1)
    try:
        await next_of(bookies, lambda item: item[0] == registry_pb2.BOOKIE_EVENT_TYPE_SNAPSHOT_DONE)
        await next_of(ledgers, lambda r: r.type == registry_pb2.LEDGER_METADATA_EVENT_TYPE_STARTED)
        # An event through each, so both etcd watch streams are open before the restart.
        await registry.register_bookie("before-restart:1", False, two_endpoints(), 10)
        await registry.create_ledger(IdMode.FRESH, metadata())
        await next_of(bookies, lambda item: item[0] == registry_pb2.BOOKIE_EVENT_TYPE_JOINED)
        await next_of(ledgers, lambda r: r.type == registry_pb2.LEDGER_METADATA_EVENT_TYPE_PUT)

        own_etcd.stop()
        await asyncio.sleep(2)  # the ledger watch's stream fails and is retried while etcd is down
        own_etcd.start()

        # Both watches resume where they were and see what changed after the restart.
        for _ in range(60):
            try:
                await registry.register_bookie("after-restart:1", False, two_endpoints(), 10)
                break
            except Exception:  # the store's client reconnects on its own schedule
                await asyncio.sleep(0.5)
        created, _ = await registry.create_ledger(IdMode.FRESH, metadata())
        _, record = await next_of(bookies, lambda item: item[0] == registry_pb2.BOOKIE_EVENT_TYPE_JOINED)
        assert record.bookie_id == "after-restart:1"
        put = await next_of(ledgers, lambda r: r.type == registry_pb2.LEDGER_METADATA_EVENT_TYPE_PUT)
        assert put.metadata.ledger_id == created.ledger_id
    finally:
        await bookies.aclose()
        await ledgers.aclose()
        await store.close()
        for _ in range(3):  # let finished calls wind down, then collect what is left
            await asyncio.sleep(0.2)
            gc.collect()
        loop.set_exception_handler(previous_handler)

    assert "watch" in caplog.text  # the streams did break (etcd was down), and were opened again
    assert pending_request_feeders() - before == set()
    assert loop_errors == []
    for text in ("Task was destroyed", "already running", "Task exception was never retrieved"):
        assert text not in caplog.text
