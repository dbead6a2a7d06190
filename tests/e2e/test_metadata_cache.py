"""The gateway's ledger metadata cache in a real cluster: changes made through
the registry or another gateway reach GetLedgerMetadata by the registry's
watch, and closed ledgers (reads, tails, blobs) stay readable while the
registry and etcd are stopped."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client import NotFoundError, QuireClient
from quire_client.cluster import LocalCluster
from quire_gateway.blobs import decode_blob_id
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.e2e.conftest import running_cluster

pytestmark = pytest.mark.e2e

DEADLINE_SECONDS = 60  # generous: the CI machine is slow and busy; nothing here measures time


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("metadata-cache")) as local:
        yield local


def gateway_status(cluster: LocalCluster, http_port: int | None = None) -> dict[str, Any]:
    port = http_port or cluster.ports.gateway_http
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10) as response:
        return json.loads(response.read())


def cache_status(cluster: LocalCluster) -> dict[str, Any]:
    return gateway_status(cluster)["metadata_cache"]


def wait_until(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {DEADLINE_SECONDS}s"
        time.sleep(0.1)


def ledger_of(metadata: common_pb2.LedgerMetadata) -> LedgerId:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


@pytest.fixture
def registry(cluster: LocalCluster) -> Iterator[registry_pb2_grpc.RegistryServiceStub]:
    """The registry's own API, as services call it (no gateway in between)."""
    with grpc.insecure_channel(cluster.registry_target) as channel:
        yield registry_pb2_grpc.RegistryServiceStub(channel)


def registry_update(
    registry: registry_pb2_grpc.RegistryServiceStub,
    ledger: LedgerId,
    change: Callable[[common_pb2.LedgerMetadata], None],
) -> int:
    """Change a ledger's metadata through the registry alone (no gateway)."""
    current = registry.GetLedgerMetadata(
        registry_pb2.GetLedgerMetadataRequest(ledger_id=ledger_id_to_proto(ledger)), timeout=30
    )
    updated = common_pb2.LedgerMetadata()
    updated.CopyFrom(current.metadata)
    change(updated)
    response = registry.UpdateLedgerMetadata(
        registry_pb2.UpdateLedgerMetadataRequest(
            ledger_id=ledger_id_to_proto(ledger), metadata=updated, expected_version=current.version
        ),
        timeout=30,
    )
    return int(response.version)


def test_changes_made_through_the_registry_reach_the_gateways_cache(cluster, client, registry):
    wait_until("the gateway's metadata watch connects", lambda: cache_status(cluster)["watch_connected"])
    bookies = [r.bookie_id for r in registry.ListBookies(registry_pb2.ListBookiesRequest(), timeout=30).bookies][:3]
    created = registry.CreateLedgerMetadata(
        registry_pb2.CreateLedgerMetadataRequest(
            metadata=common_pb2.LedgerMetadata(
                format_version=1,
                ensemble_size=3,
                write_quorum_size=2,
                ack_quorum_size=2,
                state=common_pb2.LEDGER_STATE_OPEN,
                last_entry_id=-1,
                digest_type=common_pb2.DIGEST_TYPE_CRC32C,
                ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=bookies)],
            )
        ),
        timeout=30,
    )
    ledger = ledger_of(created.metadata)
    assert client.ledger_metadata(ledger)[1] == created.version  # read once: now cached
    hits = cache_status(cluster)["hits"]
    assert client.ledger_metadata(ledger)[1] == created.version
    assert cache_status(cluster)["hits"] > hits  # served by the cache, not the registry

    def close(metadata: common_pb2.LedgerMetadata) -> None:
        metadata.state = common_pb2.LEDGER_STATE_CLOSED

    closed_version = registry_update(registry, ledger, close)
    wait_until("the gateway sees the close", lambda: client.ledger_metadata(ledger)[1] == closed_version)
    assert client.ledger_metadata(ledger)[0].state == common_pb2.LEDGER_STATE_CLOSED

    def mark(metadata: common_pb2.LedgerMetadata) -> None:
        metadata.custom_metadata["owner"] = "someone-else"

    marked_version = registry_update(registry, ledger, mark)  # a closed ledger's metadata can still change
    wait_until("the gateway sees the change", lambda: client.ledger_metadata(ledger)[1] == marked_version)
    assert client.ledger_metadata(ledger)[0].custom_metadata["owner"] == "someone-else"

    registry.DeleteLedgerMetadata(
        registry_pb2.DeleteLedgerMetadataRequest(ledger_id=ledger_id_to_proto(ledger)), timeout=30
    )

    def gone() -> bool:
        try:
            client.ledger_metadata(ledger)
        except NotFoundError:
            return True
        return False

    wait_until("the gateway sees the delete", gone)


def test_a_ledger_closed_by_another_gateway_is_seen_closed(cluster, client):
    other_target = cluster.add_gateway("gateway-2")
    with QuireClient(other_target, timeout=30) as other:
        ledger = ledger_of(other.create_ledger())
        other.append_all(ledger, [b"a", b"b", b"c"])
        metadata, _ = client.ledger_metadata(ledger)  # cached here while open
        assert metadata.state == common_pb2.LEDGER_STATE_OPEN
        other.close_ledger(ledger)  # the writer is the other gateway
    wait_until(
        "this gateway sees the close",
        lambda: client.ledger_metadata(ledger)[0].state == common_pb2.LEDGER_STATE_CLOSED,
    )
    assert client.ledger_metadata(ledger)[0].last_entry_id == 2
    assert [e.payload for e in client.read(ledger)] == [b"a", b"b", b"c"]


def closed_ledger_and_blob(client: QuireClient) -> tuple[LedgerId, list[bytes], str, bytes]:
    """A closed ledger and a blob in a closed blob ledger, both read once
    through the gateway (so their metadata is cached)."""
    ledger = ledger_of(client.create_ledger())
    payloads = [b"entry-%d" % i for i in range(20)]
    client.append_all(ledger, payloads)
    client.close_ledger(ledger)
    blob = b"blob bytes " * 1000
    blob_id = client.put_blob(blob)
    client.close_ledger(decode_blob_id(blob_id).ledger_id)  # the blob's ledger, closed like a rolled-over one
    assert [e.payload for e in client.read(ledger)] == payloads
    assert client.get_blob(blob_id) == blob
    return ledger, payloads, blob_id, blob


def check_closed_reads(client: QuireClient, ledger: LedgerId, payloads: list[bytes], blob_id: str, blob: bytes) -> None:
    assert client.ledger_metadata(ledger)[0].state == common_pb2.LEDGER_STATE_CLOSED
    assert [e.payload for e in client.read(ledger)] == payloads
    assert [e.payload for e in client.read(ledger, 5, 9)] == payloads[5:10]
    assert [e.payload for e in client.read(ledger, 0, 19, unconfirmed=True)] == payloads
    assert client.last_add_confirmed(ledger) == len(payloads) - 1
    with ThreadPoolExecutor(1) as pool:  # a tail of a closed ledger ends after its last entry
        tailed = pool.submit(lambda: [e.payload for e in client.tail(ledger)])
        assert tailed.result(timeout=DEADLINE_SECONDS) == payloads
    assert client.get_blob(blob_id) == blob


def test_closed_ledgers_and_blobs_stay_readable_while_the_registry_and_etcd_are_stopped(cluster, client):
    ledger, payloads, blob_id, blob = closed_ledger_and_blob(client)
    cluster.pause("registry")  # SIGSTOP: its connections stay open and answer nothing
    cluster.pause("etcd")
    try:
        check_closed_reads(client, ledger, payloads, blob_id, blob)
        # The watch falls silent and counts as broken; closed ledgers are still served.
        wait_until("the watch counts as broken", lambda: not cache_status(cluster)["watch_connected"])
        check_closed_reads(client, ledger, payloads, blob_id, blob)
    finally:
        cluster.resume("etcd")
        cluster.resume("registry")
    wait_until("the watch is back", lambda: cache_status(cluster)["watch_connected"])
    # Bookie leases may have run out meanwhile: let them register again for the tests that follow.
    cluster.wait_bookies_registered(len(cluster.bookie_names), timeout=DEADLINE_SECONDS)


def test_closed_ledgers_stay_readable_while_the_registry_restarts(cluster, client):
    ledger, payloads, blob_id, blob = closed_ledger_and_blob(client)
    cluster.kill("registry")
    try:
        wait_until("the watch counts as broken", lambda: not cache_status(cluster)["watch_connected"])
        check_closed_reads(client, ledger, payloads, blob_id, blob)
    finally:
        cluster.start_process("registry")
    wait_until("the watch is back", lambda: cache_status(cluster)["watch_connected"])
    # Metadata changes after the restart still reach the cache.
    fresh = ledger_of(client.create_ledger())
    client.append_all(fresh, [b"x"])
    assert client.ledger_metadata(fresh)[0].state == common_pb2.LEDGER_STATE_OPEN
    client.close_ledger(fresh)
    assert client.ledger_metadata(fresh)[0].state == common_pb2.LEDGER_STATE_CLOSED


def test_the_cache_is_in_the_gateways_metrics(cluster, client):
    ledger = ledger_of(client.create_ledger())
    client.ledger_metadata(ledger)
    client.ledger_metadata(ledger)

    def metrics() -> str:
        port = cluster.ports.gateway_http
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            return response.read().decode()

    wanted = (
        "quire_gateway_metadata_cache_hits",
        "quire_gateway_metadata_cache_misses",
        "quire_gateway_metadata_cache_ledgers",
        "quire_gateway_metadata_cache_watch_connected",
    )
    wait_until("the cache's metrics are exported", lambda: all(name in metrics() for name in wanted))
