"""Opens, fencing and recovery, and the BP-5 read rules, end to end."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from quire_api.ids import LedgerId
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from quire_proto.common.v1 import common_pb2
from tests.e2e.conftest import running_cluster

pytestmark = pytest.mark.e2e

RECOVERY_TIMEOUT_SECONDS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("recovery"),
        QUIRE_GATEWAY_RECOVERY_TIMEOUT_SECONDS=str(RECOVERY_TIMEOUT_SECONDS),
        QUIRE_GATEWAY_RECOVERY_BOOKIE_TIMEOUT_SECONDS="1",
    ) as local:
        yield local


def name(metadata: common_pb2.LedgerMetadata) -> str:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id).qualified_name


def body(index: int) -> bytes:
    return f"entry-{index}-".encode() * (1 + index % 7)


def crash_the_writer(cluster: LocalCluster) -> None:
    """SIGKILL the gateway (it holds the write handles) and start a fresh one."""
    cluster.kill("gateway")
    cluster.start_process("gateway")


def codes_of(call) -> tuple[grpc.StatusCode, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(QuireClientError) as caught:
        call()
    return caught.value.code, caught.value.reason


def test_bp5_read_unconfirmed_example(cluster, client):
    ledger = name(client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2, password=b"pw"))
    for i in range(5):  # one at a time: entry i carries LAC i-1
        assert client.add_entry(ledger, body(i)) == i
    crash_the_writer(cluster)  # written without close

    opened = client.open_ledger(ledger, b"pw")
    assert opened.last_add_confirmed == 3
    assert opened.metadata.state == common_pb2.LEDGER_STATE_OPEN

    assert codes_of(lambda: list(client.read(ledger, 0, 4)))[0] == grpc.StatusCode.OUT_OF_RANGE
    assert [e.payload for e in client.read(ledger, 0, 3)] == [body(i) for i in range(4)]
    assert [e.payload for e in client.read(ledger, 0, 4, unconfirmed=True)] == [body(i) for i in range(5)]
    assert [e.entry_id for e in client.read(ledger, 3, 4, unconfirmed=True)] == [3, 4]
    assert codes_of(lambda: list(client.read(ledger, 3, 5, unconfirmed=True)))[0] == grpc.StatusCode.NOT_FOUND
    for first, last in ((-1, 3), (4, 3)):
        for unconfirmed in (False, True):
            code, _ = codes_of(lambda: list(client.read(ledger, first, last, unconfirmed=unconfirmed)))  # noqa: B023
            assert code == grpc.StatusCode.INVALID_ARGUMENT
    # The unconfirmed read moved nothing.
    assert client.open_ledger(ledger, b"pw").last_add_confirmed == 3
    assert client.ledger_metadata(ledger)[0].state == common_pb2.LEDGER_STATE_OPEN

    for bookie in cluster.bookie_names:
        cluster.restart(bookie)
    cluster.wait_bookies_registered(len(cluster.bookie_names))
    assert [e.payload for e in client.read(ledger, 0, 4, unconfirmed=True)] == [body(i) for i in range(5)]

    recovered = client.open_ledger(ledger, b"pw", recovery=True)
    assert recovered.last_add_confirmed == 4
    assert recovered.metadata.state == common_pb2.LEDGER_STATE_CLOSED
    assert recovered.metadata.last_entry_id == 4
    assert recovered.metadata.length == sum(len(body(i)) for i in range(5))
    assert [e.payload for e in client.read(ledger)] == [body(i) for i in range(5)]


def test_wrong_password_fences_nothing(cluster, client):
    ledger = name(client.create_ledger(password=b"right"))
    client.add_entry(ledger, b"a")
    code, reason = codes_of(lambda: client.open_ledger(ledger, b"wrong", recovery=True))
    assert code == grpc.StatusCode.PERMISSION_DENIED and reason == "ERROR_REASON_WRONG_PASSWORD"
    assert client.ledger_metadata(ledger)[0].state == common_pb2.LEDGER_STATE_OPEN
    assert client.add_entry(ledger, b"b") == 1  # the writer was not fenced


def test_recovery_open_fences_a_live_writer(cluster, client):
    ledger = name(client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=b"pw"))
    acked: list[int] = []
    outcome: dict[str, object] = {}

    def write() -> None:
        with QuireClient(cluster.gateway_target) as writer:
            try:
                for ack in writer.append(ledger, (body(i) for i in range(200_000)), batch_size=10):
                    acked.append(ack.last_entry_id)
            except QuireClientError as exc:
                outcome["error"] = exc

    thread = threading.Thread(target=write)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while (not acked or acked[-1] < 500) and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.05)
        assert acked and acked[-1] >= 500, "the writer did not get going"
        recovered = client.open_ledger(ledger, b"pw", recovery=True)
    finally:
        thread.join(timeout=60)
    assert not thread.is_alive()
    error = outcome.get("error")
    assert isinstance(error, QuireClientError), "the writer was not stopped by the fence"
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION and error.reason == "ERROR_REASON_LEDGER_FENCED", error
    last = recovered.metadata.last_entry_id
    assert recovered.metadata.state == common_pb2.LEDGER_STATE_CLOSED
    assert last >= acked[-1], "an acknowledged entry is beyond the recovered end"
    entries = list(client.read(ledger))
    assert [e.entry_id for e in entries] == list(range(last + 1))
    assert all(e.payload == body(e.entry_id) for e in entries)
    # Later adds are refused too.
    code, _ = codes_of(lambda: client.add_entry(ledger, b"late"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION


def test_concurrent_recoveries_agree(cluster, client):
    ledger = name(client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2, password=b"pw"))
    client.append_all(ledger, (body(i) for i in range(300)), batch_size=7)
    for i in range(300, 310):
        client.add_entry(ledger, body(i))
    crash_the_writer(cluster)

    def recover(_: int) -> int:
        with QuireClient(cluster.gateway_target) as other:
            return int(other.open_ledger(ledger, b"pw", recovery=True).last_add_confirmed)

    with ThreadPoolExecutor(max_workers=5) as pool:
        ends = list(pool.map(recover, range(5)))
    assert len(set(ends)) == 1, ends
    metadata, _ = client.ledger_metadata(ledger)
    assert metadata.state == common_pb2.LEDGER_STATE_CLOSED and metadata.last_entry_id == ends[0] == 309
    assert [e.payload for e in client.read(ledger)] == [body(i) for i in range(310)]


def test_recovery_completes_with_a_hung_bookie(cluster, client):
    """Runs last in this module: a paused bookie loses its registration."""
    ledger = name(client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2, password=b"pw"))
    for i in range(20):
        client.add_entry(ledger, body(i))
    crash_the_writer(cluster)
    hung = cluster.bookie_names[1]
    cluster.pause(hung)  # SIGSTOP
    try:
        started = time.monotonic()
        recovered = client.open_ledger(ledger, b"pw", recovery=True)
        elapsed = time.monotonic() - started
    finally:
        cluster.resume(hung)
    assert recovered.last_add_confirmed == 19
    assert elapsed < RECOVERY_TIMEOUT_SECONDS
    assert [e.payload for e in client.read(ledger)] == [body(i) for i in range(20)]


def test_an_unconfirmed_read_sees_entries_stored_past_a_closed_end(cluster, client):
    """docs/guarantees.md, "What each kind of read can see": an entry a writer
    sent to the bookies but that the ledger's end does not include (here
    stored straight on its write set after the close) is not part of the
    ledger: a confirmed read refuses it, an unconfirmed read still shows it."""
    from quire_api.ids import ledger_id_to_proto
    from quire_common.entry import Digester, DigestType, master_key, pack_entry
    from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc

    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=b"pw")
    ledger = name(metadata)
    for i in range(3):
        client.add_entry(ledger, body(i))
    closed = client.close_ledger(ledger)
    assert closed.last_entry_id == 2
    ledger_id = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
    length = sum(len(body(i)) for i in range(4))
    late = pack_entry(ledger_id, 3, 2, length, body(3), Digester(DigestType.CRC32C, b"pw"))
    ensemble = metadata.ensembles[0].bookie_ids
    for bookie_id in (ensemble[3 % 3], ensemble[4 % 3]):
        with grpc.insecure_channel(bookie_id) as channel:
            bookie_pb2_grpc.BookieServiceStub(channel).AddEntries(
                bookie_pb2.AddEntriesRequest(
                    ledger_id=ledger_id_to_proto(ledger_id),
                    master_key=master_key(b"pw"),
                    entries=[bookie_pb2.PackedEntry(entry_id=3, data=late)],
                ),
                timeout=10,
            )
    assert codes_of(lambda: list(client.read(ledger, 0, 3)))[0] == grpc.StatusCode.OUT_OF_RANGE
    assert [e.payload for e in client.read(ledger, 3, 3, unconfirmed=True)] == [body(3)]
    assert client.ledger_metadata(ledger)[0].last_entry_id == 2  # still not part of the ledger
