"""The gateway's entry cache in a real cluster: fresh entries are read back
with every bookie hung (no bookie round trip), older ones come from the
bookies as before, and a ledger id deleted and created again never shows the
old ledger's entries."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from quire_api.ids import LedgerId
from quire_client import QuireClient
from quire_client.cluster import LocalCluster
from tests.e2e.conftest import running_cluster

pytestmark = pytest.mark.e2e

CACHE_BYTES = 256 * 1024  # small, so the older entries of a test fall out of it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("entry-cache"), QUIRE_GATEWAY_ENTRY_CACHE_BYTES=str(CACHE_BYTES)
    ) as local:
        yield local


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[QuireClient]:
    with QuireClient(cluster.gateway_target, timeout=5) as quire:
        yield quire


def cache_status(cluster: LocalCluster) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.ports.gateway_http}/status", timeout=10) as response:
        return dict(json.loads(response.read())["entry_cache"])


def new_ledger(client: QuireClient, **kwargs: Any) -> LedgerId:
    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2, **kwargs)
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def test_fresh_entries_are_read_with_every_bookie_hung(cluster: LocalCluster, client: QuireClient) -> None:
    ledger = new_ledger(client)
    payloads = [b"fresh-%d" % i for i in range(20)]
    client.append_all(ledger, payloads)
    hits_before = cache_status(cluster)["hits"]
    for name in cluster.bookie_names:
        cluster.pause(name)
    try:
        assert [e.payload for e in client.read(ledger, 0, 19)] == payloads
        assert [e.payload for e in client.read(ledger, 19, 19, unconfirmed=True)] == [payloads[19]]
    finally:
        for name in cluster.bookie_names:
            cluster.resume(name)
    assert cache_status(cluster)["hits"] >= hits_before + 21


def test_entries_evicted_from_the_cache_come_from_the_bookies(cluster: LocalCluster, client: QuireClient) -> None:
    ledger = new_ledger(client)
    payloads = [bytes([i % 256]) * 2048 for i in range(400)]  # 800 KiB: most no longer cached
    client.append_all(ledger, payloads)
    before = cache_status(cluster)
    assert [e.payload for e in client.read(ledger, 0, 399)] == payloads
    after = cache_status(cluster)
    assert after["misses"] > before["misses"], "the oldest entries must have been read from bookies"
    assert after["size_bytes"] <= CACHE_BYTES


def test_a_ledger_deleted_and_created_again_shows_only_its_new_entries(client: QuireClient) -> None:
    ledger = new_ledger(client)
    client.append_all(ledger, [b"first life 0", b"first life 1"])
    assert [e.payload for e in client.read(ledger, 0, 1)] == [b"first life 0", b"first life 1"]
    client.delete_ledger(ledger)
    again = new_ledger(client, ledger_id=ledger)
    assert again == ledger
    client.append_all(ledger, [b"second life 0"])
    assert [e.payload for e in client.read(ledger, 0, 0)] == [b"second life 0"]
