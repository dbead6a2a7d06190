"""Ensemble change under a killed bookie, and reads past a corrupt replica."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2
from tests.e2e.conftest import running_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("ensemble"),
        bookies=4,
        QUIRE_GATEWAY_BOOKIE_RETRY_SECONDS="0.5",
        QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS="1",
        # These tests are about what the bookies hold: reads must reach them, not the
        # gateway's cache of the entries it just wrote (tests/e2e/test_entry_cache.py).
        QUIRE_GATEWAY_ENTRY_CACHE_BYTES="0",
    ) as local:
        yield local


def ledger_of(metadata: common_pb2.LedgerMetadata) -> LedgerId:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def body(index: int) -> bytes:
    return index.to_bytes(4, "big") + bytes([index % 251]) * 1020


def bookie_name(cluster: LocalCluster, bookie_id: str) -> str:
    return next(n for n in cluster.bookie_names if cluster.bookie_id(n) == bookie_id)


def stream_through_a_failure(cluster: LocalCluster, client, fail, recover) -> None:  # type: ignore[no-untyped-def]
    """Stream entries, make one ensemble member fail mid-stream, and check the
    stream carries on through an ensemble change with no acknowledged entry lost."""
    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=b"pw")
    ledger = ledger_of(metadata).qualified_name
    total = 20_000
    acked: list[int] = []
    outcome: dict[str, object] = {}
    # The writer holds its entries from 2,000 on until the failure is in: on a busy machine it
    # could otherwise write them all before the test gets round to failing a bookie.
    failed = threading.Event()

    def bodies() -> Iterator[bytes]:
        for i in range(total):
            if i == 2000:
                failed.wait(timeout=120)
            yield body(i)

    def write() -> None:
        with QuireClient(cluster.gateway_target) as writer:
            try:
                for ack in writer.append(ledger, bodies(), batch_size=20):
                    acked.append(ack.last_entry_id)
            except QuireClientError as exc:
                outcome["error"] = exc

    thread = threading.Thread(target=write)
    thread.start()
    victim = ""
    try:
        deadline = time.monotonic() + 60
        while (not acked or acked[-1] < 1000) and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.01)
        assert acked and acked[-1] >= 1000, "the writer did not get going"
        # The current ensemble: a bookie restarted by an earlier test may have been replaced already.
        before, _ = client.ledger_metadata(ledger)
        victim = bookie_name(cluster, before.ensembles[-1].bookie_ids[1])
        fail(victim)
        failed.set()
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert "error" not in outcome, outcome
        assert acked[-1] == total - 1
        entries = list(client.read(ledger))
        assert len(entries) == total
        assert all(e.payload == body(e.entry_id) for e in entries)
        after, _ = client.ledger_metadata(ledger)
        assert len(after.ensembles) == len(before.ensembles) + 1
        assert cluster.bookie_id(victim) not in after.ensembles[-1].bookie_ids
        assert 1000 <= after.ensembles[-1].first_entry_id < total
        closed = client.close_ledger(ledger)
        assert closed.last_entry_id == total - 1
    finally:
        failed.set()
        thread.join(timeout=60)
        if victim:
            recover(victim)


def test_ensemble_change_under_sigkill_loses_no_acknowledged_entry(cluster, client):
    def restart(victim: str) -> None:
        cluster.start_process(victim)
        cluster.wait_bookies_registered(4)

    stream_through_a_failure(cluster, client, cluster.kill, restart)


def test_not_enough_bookies_fails_the_writer_with_the_counts(cluster, client):
    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=3)
    ledger = ledger_of(metadata).qualified_name
    spare = next(n for n in cluster.bookie_names if cluster.bookie_id(n) not in metadata.ensembles[0].bookie_ids)
    member = bookie_name(cluster, metadata.ensembles[0].bookie_ids[0])
    client.add_entry(ledger, b"before")
    cluster.kill(spare)
    cluster.kill(member)
    try:
        with pytest.raises(QuireClientError) as caught:
            for i in range(20):
                client.add_entry(ledger, b"after %d" % i)
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE, caught.value
        assert "needs 1" in caught.value.message and "0 are available" in caught.value.message
    finally:
        cluster.start_process(spare)
        cluster.start_process(member)
        cluster.wait_bookies_registered(4)


def test_a_corrupt_replica_is_skipped_and_data_loss_only_when_all_are(cluster, client):
    # HMAC: a bookie cannot check it without the password, so it stores the
    # corrupt copy as a disk would hold a rotted one (CRC digests it refuses).
    metadata = client.create_ledger(
        ensemble_size=2, write_quorum_size=2, ack_quorum_size=2, password=b"pw", digest_type=DigestType.HMAC
    )
    ledger_id = ledger_of(metadata)
    ledger = ledger_id.qualified_name
    for i in range(3):
        client.add_entry(ledger, body(i))
    good = pack_entry(ledger_id, 1, 0, len(body(0)) + len(body(1)), body(1), Digester(DigestType.HMAC, b"pw"))
    bad = good[:-1] + bytes([good[-1] ^ 0x01])  # one flipped bit in the payload

    def store_on(bookie_id: str, packed: bytes) -> None:
        with grpc.insecure_channel(bookie_id) as channel:
            bookie_pb2_grpc.BookieServiceStub(channel).AddEntries(
                bookie_pb2.AddEntriesRequest(
                    ledger_id=ledger_id_to_proto(ledger_id),
                    master_key=master_key(b"pw"),
                    entries=[bookie_pb2.PackedEntry(entry_id=1, data=packed)],
                ),
                timeout=10,
            )

    # The ensemble now covering entry 1 (a bookie restarted by an earlier test may have been replaced).
    current, _ = client.ledger_metadata(ledger)
    ensemble = [e for e in current.ensembles if e.first_entry_id <= 1][-1].bookie_ids
    first, second = ensemble[1], ensemble[0]
    store_on(first, bad)  # entry 1's first replica
    assert [e.payload for e in client.read(ledger, 0, 2)] == [body(i) for i in range(3)]
    assert [e.payload for e in client.read(ledger, 1, 1, unconfirmed=True)] == [body(1)]
    store_on(second, bad)
    with pytest.raises(QuireClientError) as caught:
        list(client.read(ledger, 0, 2))
    assert caught.value.code == grpc.StatusCode.DATA_LOSS
    store_on(second, good)
    assert [e.payload for e in client.read(ledger, 1, 1)] == [body(1)]


def test_ensemble_change_when_a_bookie_hangs(cluster, client):
    """Last in this module: a paused bookie loses its registration, so it is
    restarted afterwards."""

    def restart(victim: str) -> None:
        cluster.resume(victim)
        cluster.restart(victim)
        cluster.wait_bookies_registered(4)

    stream_through_a_failure(cluster, client, cluster.pause, restart)  # SIGSTOP: adds time out
