"""The blob API, tailing a live ledger, and the client's write session."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from quire_api.ids import LedgerId
from quire_client import FailedPreconditionError, InvalidArgumentError, NotFoundError, QuireClient
from quire_client.cluster import LocalCluster
from quire_proto.common.v1 import common_pb2
from tests.e2e.conftest import running_cluster

pytestmark = pytest.mark.e2e

BLOB_LEDGER_MAX_BYTES = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("blobs"), QUIRE_GATEWAY_BLOB_LEDGER_MAX_BYTES=str(BLOB_LEDGER_MAX_BYTES)
    ) as local:
        yield local


@pytest.mark.parametrize("size", [0, 1, 1024 * 1024, 50 * 1024 * 1024], ids=["empty", "1B", "1MiB", "50MiB"])
def test_blob_round_trip(client, size):
    data = os.urandom(size)
    blob_id = client.put_blob(data)
    assert blob_id.replace("-", "").replace("_", "").isalnum()
    got = client.get_blob(blob_id)  # right after PutBlob returned: read-your-writes
    assert len(got) == size and hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


def test_blob_ledgers_roll_over_and_old_ones_close(client):
    scope = 4242
    ids = [client.put_blob(bytes([i]) * (3 * 1024 * 1024), scope_id=scope) for i in range(8)]
    for i, blob_id in enumerate(ids):
        assert client.get_blob(blob_id) == bytes([i]) * (3 * 1024 * 1024)
    ledgers = list(client.list_ledgers(scope))
    # 24 MiB through ledgers that roll over past 8 MiB, two open at a time.
    assert len(ledgers) >= 3
    assert any(m.state == common_pb2.LEDGER_STATE_CLOSED for m in ledgers)
    assert all(m.custom_metadata.get("quire.blob-ledger") == "1" for m in ledgers)


def test_concurrent_puts_each_get_their_own_bytes(client, cluster):
    def put(index: int) -> tuple[str, bytes]:
        data = hashlib.sha256(str(index).encode()).digest() * (100 + 4000 * index)
        with QuireClient(cluster.gateway_target) as other:
            return other.put_blob(data, part_bytes=64 * 1024), data

    with ThreadPoolExecutor(max_workers=6) as pool:
        stored = list(pool.map(put, range(12)))
    assert len({blob_id for blob_id, _ in stored}) == 12
    for blob_id, data in stored:
        assert client.get_blob(blob_id) == data


def test_bad_and_unknown_blob_ids(client):
    with pytest.raises(InvalidArgumentError):
        client.get_blob("definitely not a blob id")
    real = client.put_blob(b"x")
    # The same ledger, an entry far past its end.
    from quire_gateway.blobs import BlobRef, decode_blob_id, encode_blob_id

    ref = decode_blob_id(real)
    missing = encode_blob_id(BlobRef(ref.ledger_id, ref.first_entry_id + 10_000, 1))
    with pytest.raises(NotFoundError):
        client.get_blob(missing)
    unknown = encode_blob_id(BlobRef(LedgerId(7, 7), 0, 1))
    with pytest.raises(NotFoundError):
        client.get_blob(unknown)


def test_tail_follows_a_live_ledger_until_it_closes(client, cluster):
    metadata = client.create_ledger()
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id).qualified_name
    client.append_all(ledger, [b"tail-0", b"tail-1"])  # the session below continues a written ledger
    seen: list[bytes] = []
    done = threading.Event()

    def follow() -> None:
        with QuireClient(cluster.gateway_target) as reader:
            for entry in reader.tail(ledger):
                seen.append(entry.payload)
        done.set()

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        with client.writer(ledger, batch_size=7) as session:
            for i in range(2, 100):
                session.append(b"tail-%d" % i)
            assert session.flush(timeout=30) == 99
            for i in range(100, 150):
                session.append(b"tail-%d" % i)
        assert not done.is_set() or len(seen) == 150
        client.close_ledger(ledger)
        assert done.wait(timeout=30), "the tail did not end after the close"
    finally:
        thread.join(timeout=30)
    assert seen == [b"tail-%d" % i for i in range(150)]


def test_writer_session_raises_typed_errors(client):
    metadata = client.create_ledger()
    ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id).qualified_name
    client.close_ledger(ledger)
    with pytest.raises(FailedPreconditionError) as caught:
        with client.writer(ledger) as session:
            session.append(b"too late")
    assert caught.value.closed and caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
