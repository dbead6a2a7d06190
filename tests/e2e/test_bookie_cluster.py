"""Bookies in a whole cluster: what they advertise, read-only mode seen
through the registry, and garbage collection against real metadata."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client import QuireAdmin, QuireClient
from quire_client.cluster import LocalCluster, Ports, grpc_serving
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.registry.v1 import registry_pb2

pytestmark = pytest.mark.e2e

CAPACITY = 6 * 1024 * 1024
KEY = master_key(b"")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("bookie-cluster")
    local = LocalCluster(
        data_dir,
        Ports.free(bookies=3),
        extra_env={"QUIRE_BOOKIE_TTL_SECONDS": "3"},
        bookie_env={
            "bookie-1": {
                "QUIRE_BOOKIE_RACK": "/rack-a",
                "QUIRE_BOOKIE_REGION": "eu",
                "QUIRE_BOOKIE_AUTORECOVERY": "true",
                "QUIRE_BOOKIE_GC_INTERVAL_SECONDS": "0.5",
                "QUIRE_BOOKIE_GC_RECHECK_SECONDS": "0.2",
            },
            "bookie-3": {
                "QUIRE_BOOKIE_CAPACITY_BYTES": str(CAPACITY),
                "QUIRE_BOOKIE_READ_ONLY_USAGE": "0.5",
                "QUIRE_BOOKIE_WRITABLE_USAGE": "0.3",
                "QUIRE_BOOKIE_DISK_CHECK_INTERVAL_SECONDS": "0.2",
            },
        },
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[QuireClient]:
    with QuireClient(cluster.gateway_target, timeout=30) as quire:
        yield quire


@pytest.fixture
def admin(cluster: LocalCluster) -> Iterator[QuireAdmin]:
    with QuireAdmin(cluster.gateway_target, timeout=30) as operator:
        yield operator


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} within {timeout:.0f}s")


def registered(admin: QuireAdmin, state: int) -> set[str]:
    return {record.bookie_id for record in admin.list_bookies(state)}


def add(stub, ledger: LedgerId, entry_id: int, payload: bytes):  # type: ignore[no-untyped-def]
    data = pack_entry(ledger, entry_id, entry_id - 1, 0, payload, Digester(DigestType.CRC32C))
    return stub.AddEntries(
        bookie_pb2.AddEntriesRequest(
            ledger_id=ledger_id_to_proto(ledger),
            master_key=KEY,
            entries=[bookie_pb2.PackedEntry(entry_id=entry_id, data=data)],
        ),
        timeout=30,
    )


def test_bookies_advertise_rpc_and_http_endpoints_and_properties(cluster, admin):
    records = {record.bookie_id: record for record in admin.list_bookies(registry_pb2.BOOKIE_STATE_ALL)}
    first = records[cluster.bookie_id("bookie-1")]
    endpoints = {(e.id, e.protocol, f"{e.host}:{e.port}") for e in first.service_info.endpoints}
    assert endpoints == {
        ("rpc", "bookie-rpc", cluster.bookie_id("bookie-1")),
        ("http", "http", cluster.bookie_http("bookie-1")),
    }
    assert dict(first.service_info.properties) == {
        "topology.rack": "/rack-a",
        "topology.region": "eu",
        "autorecovery.enabled": "true",
    }
    with urllib.request.urlopen(f"http://{cluster.bookie_http('bookie-1')}/status", timeout=10) as response:
        assert json.loads(response.read())["bookie_id"] == cluster.bookie_id("bookie-1")


def test_a_full_bookie_turns_read_only_in_the_registry_and_back(cluster, admin):
    name = "bookie-3"
    bookie_id, target = cluster.bookie_id(name), cluster.bookie_id(name)
    ledger = LedgerId(77, 1)  # written straight to the bookie; its GC is off (default interval)
    with grpc.insecure_channel(target) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        info = stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest())
        assert info.total_disk_bytes == CAPACITY and not info.read_only
        assert grpc_serving(target, "writable")

        payload = b"f" * (256 * 1024)
        stored = 0
        for entry_id in range(14):  # 3.5 MiB: past the 50% threshold of 6 MiB
            try:
                add(stub, ledger, entry_id, payload)
            except grpc.RpcError as exc:  # the disk check saw it fill up already
                assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc
                break
            stored += 1
        assert stored >= 10
        wait_for(lambda: bookie_id in registered(admin, registry_pb2.BOOKIE_STATE_READ_ONLY), "read-only registration")
        assert bookie_id not in registered(admin, registry_pb2.BOOKIE_STATE_WRITABLE)
        assert not grpc_serving(target, "writable") and grpc_serving(target)
        with pytest.raises(grpc.RpcError) as caught:
            add(stub, LedgerId(77, 2), 0, b"more")
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "read-only" in caught.value.details()
        last = stored - 1
        read = stub.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(ledger), entry_id=last))
        assert read.entry.data.endswith(payload)  # reads are still served
        info = stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest())
        assert info.read_only and "threshold 50%" in info.read_only_reason

        stub.DeleteLedger(bookie_pb2.DeleteLedgerRequest(ledger_id=ledger_id_to_proto(ledger)))
        wait_for(lambda: bookie_id in registered(admin, registry_pb2.BOOKIE_STATE_WRITABLE), "writable again")
        assert grpc_serving(target, "writable")
        add(stub, LedgerId(77, 2), 0, b"more")


def test_garbage_collection_deletes_only_ledgers_without_metadata(cluster, client):
    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2)
    kept = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    assert client.append_all(kept, [b"a", b"b", b"c"]) == 2
    stray = LedgerId(78, 1)  # data on a bookie, no metadata anywhere
    with grpc.insecure_channel(cluster.bookie_id("bookie-1")) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        add(stub, stray, 0, b"orphan")

        def stray_gone() -> bool:
            try:
                stub.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(stray), entry_id=0))
            except grpc.RpcError as exc:
                return exc.code() == grpc.StatusCode.NOT_FOUND
            return False

        wait_for(stray_gone, "the stray ledger collected")
        for entry_id in range(3):  # the ledger with metadata is untouched
            stub.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(kept), entry_id=entry_id))
    assert [entry.payload for entry in client.read(kept)] == [b"a", b"b", b"c"]
