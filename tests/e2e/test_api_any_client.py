"""The gateway API as a client in any language meets it, on three gateway
processes: every reply fits gRPC's default 4 MiB receive limit (the largest
entry, a blob, a tail, read over a channel with default settings), errors carry
their details and a RetryInfo only when trying again can help, and the Python
client's reads and tails resume without gap or duplicate when the gateway
serving them is killed (SIGKILL) mid-stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from quire.common.v1 import common_pb2
from quire.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_api.limits import MAX_ENTRY_PAYLOAD_BYTES
from quire_client import QuireClient, ResourceExhaustedError, UnavailableError
from quire_client.cluster import LocalCluster
from tests.e2e.conftest import running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("api"), gateways=3, QUIRE_GATEWAY_SESSION_SECONDS="3") as local:
        yield local


@pytest.fixture(autouse=True)
def every_gateway_running(cluster: LocalCluster) -> Iterator[None]:
    """Tests kill gateways; the next one starts with all three again."""
    yield
    for name in cluster.gateway_names:
        if cluster.pid(name) is None:
            cluster.start_process(name, timeout=120)


def client_at(cluster: LocalCluster, first: int) -> QuireClient:
    """A client on gateway `first` that knows the others (in order after it)."""
    targets = cluster.gateway_targets
    ordered = targets[first:] + targets[:first]
    return QuireClient(ordered[0], cluster.registry_target, timeout=30, gateways=ordered[1:])


def ledger_of(metadata) -> LedgerId:  # type: ignore[no-untyped-def]
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def test_the_largest_entry_a_blob_and_a_tail_read_at_default_limits(cluster: LocalCluster) -> None:
    with client_at(cluster, 0) as writer:
        ledger = ledger_of(writer.create_ledger())
        payloads = [b"a" * MAX_ENTRY_PAYLOAD_BYTES, b"b" * MAX_ENTRY_PAYLOAD_BYTES, b"c", b"d" * 3_000_000]
        writer.append_all(ledger, payloads, batch_size=1)
        writer.close_ledger(ledger)
        blob = bytes(range(256)) * (5 * 4096)  # 5 MiB: several entries
        blob_id = writer.put_blob(blob)
    proto = ledger_id_to_proto(ledger)
    for target in cluster.gateway_targets:  # the writer's gateway (entry cache) and the others (bookies)
        with grpc.insecure_channel(target) as channel:  # gRPC's defaults: 4 MiB receive limit
            ledgers = ledger_pb2_grpc.LedgerServiceStub(channel)
            read = ledgers.ReadEntries(ledger_pb2.ReadEntriesRequest(ledger_id=proto, last_entry_id=-1), timeout=60)
            assert [e.payload for r in read for e in r.entries] == payloads
            unconfirmed = ledgers.ReadUnconfirmedEntries(
                ledger_pb2.ReadUnconfirmedEntriesRequest(ledger_id=proto, last_entry_id=3), timeout=60
            )
            assert [e.payload for r in unconfirmed for e in r.entries] == payloads
            tail = ledgers.TailEntries(ledger_pb2.TailEntriesRequest(ledger_id=proto), timeout=60)
            assert [e.payload for r in tail for e in r.entries] == payloads
            parts = blob_pb2_grpc.BlobServiceStub(channel).GetBlob(blob_pb2.GetBlobRequest(blob_id=blob_id), timeout=60)
            assert b"".join(part.data for part in parts) == blob


def test_an_entry_too_large_is_final_and_not_enough_bookies_keeps_its_details(cluster: LocalCluster) -> None:
    with client_at(cluster, 0) as owner, client_at(cluster, 1) as relay:
        ledger = ledger_of(owner.create_ledger())
        for client in (owner, relay):  # at the owner, and relayed to it
            with pytest.raises(ResourceExhaustedError) as refused:
                client.add_entry(ledger, b"x" * (MAX_ENTRY_PAYLOAD_BYTES + 1))
            assert refused.value.reason == "ERROR_REASON_ENTRY_TOO_LARGE"
            assert not refused.value.retryable and refused.value.retry_delay is None
            assert str(MAX_ENTRY_PAYLOAD_BYTES) in refused.value.message
        with pytest.raises(UnavailableError) as few:
            relay.create_ledger(ensemble_size=5, write_quorum_size=2, ack_quorum_size=2, attempts=1)
        assert few.value.reason == "ERROR_REASON_NOT_ENOUGH_BOOKIES"
        assert few.value.details == {"needed": "5", "available": "3"}
        assert few.value.retryable and few.value.retry_delay == 5.0


def test_the_wire_carries_error_info_and_retry_info(cluster: LocalCluster) -> None:
    """What a client without Quire's libraries decodes: google.rpc.Status in the
    grpc-status-details-bin trailer, ErrorInfo always, RetryInfo when retryable."""
    with grpc.insecure_channel(cluster.gateway_targets[2]) as channel:
        ledgers = ledger_pb2_grpc.LedgerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as few:
            ledgers.CreateLedger(
                ledger_pb2.CreateLedgerRequest(ensemble_size=9, write_quorum_size=2, ack_quorum_size=2), timeout=30
            )
    status = rpc_status.from_call(few.value)
    assert status is not None
    info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(info) and info.domain == "quire"
    assert info.reason == "ERROR_REASON_NOT_ENOUGH_BOOKIES" and info.metadata["needed"] == "9"
    assert "retryable" not in info.metadata
    assert status.details[1].Unpack(retry) and retry.retry_delay.seconds == 5


ENTRIES = 600
ENTRY_BYTES = 64 * 1024  # ~38 MiB in all: many replies, more than flow control lets ahead of the reader


def payload(index: int) -> bytes:
    return b"%06d-" % index + b"r" * (ENTRY_BYTES - 7)


def test_a_read_resumes_on_another_gateway_when_its_gateway_is_killed(cluster: LocalCluster) -> None:
    with client_at(cluster, 0) as writer:
        ledger = ledger_of(writer.create_ledger())
        writer.append_all(ledger, (payload(i) for i in range(ENTRIES)), batch_size=20)
        writer.close_ledger(ledger)
    with client_at(cluster, 1) as reader:
        seen: list[bytes] = []
        for entry in reader.read(ledger):
            seen.append(entry.payload)
            if len(seen) == 50:
                cluster.kill(cluster.gateway_names[1])  # the gateway serving this read
        assert reader.resumed_reads >= 1
        assert reader.gateway != cluster.gateway_targets[1]
    assert seen == [payload(i) for i in range(ENTRIES)]  # every entry once, in order


def test_without_resumption_the_same_kill_fails_the_read(cluster: LocalCluster) -> None:
    """Positive control: the kill above does break the stream; only resuming hides it."""
    with client_at(cluster, 0) as writer:
        ledger = ledger_of(writer.create_ledger())
        writer.append_all(ledger, (payload(i) for i in range(ENTRIES)), batch_size=20)
        writer.close_ledger(ledger)
    with client_at(cluster, 1) as reader:
        reader.resume_attempts = 0
        seen = 0
        with pytest.raises(UnavailableError):
            for _ in reader.read(ledger):
                seen += 1
                if seen == 50:
                    cluster.kill(cluster.gateway_names[1])
        assert 50 <= seen < ENTRIES


def test_a_tail_resumes_on_another_gateway_when_its_gateway_is_killed(cluster: LocalCluster) -> None:
    with client_at(cluster, 0) as writer, client_at(cluster, 2) as reader:
        ledger = ledger_of(writer.create_ledger())
        seen: list[bytes] = []
        errors: list[BaseException] = []
        half = threading.Event()

        def follow() -> None:
            try:
                for entry in reader.tail(ledger):
                    seen.append(entry.payload)
                    if len(seen) == ENTRIES // 2:
                        half.set()
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)
                half.set()

        tail = threading.Thread(target=follow, daemon=True)
        tail.start()
        writer.append_all(ledger, (payload(i) for i in range(ENTRIES // 2)), batch_size=20)
        assert half.wait(120), "the tail did not reach half way"
        cluster.kill(cluster.gateway_names[2])  # the gateway serving the tail
        writer.append_all(ledger, (payload(i) for i in range(ENTRIES // 2, ENTRIES)), batch_size=20)
        writer.close_ledger(ledger)
        tail.join(240)
        assert not tail.is_alive(), "the tail did not end after the ledger was closed"
        assert not errors, errors
        assert reader.resumed_reads >= 1
    assert seen == [payload(i) for i in range(ENTRIES)]


def test_a_client_without_64_bit_integers_uses_the_qualified_name(cluster: LocalCluster) -> None:
    """Ids as text only: create, append through a relay, read; every LedgerId returned names itself."""
    with grpc.insecure_channel(cluster.gateway_targets[0]) as owner_channel:
        created = ledger_pb2_grpc.LedgerServiceStub(owner_channel).CreateLedger(
            ledger_pb2.CreateLedgerRequest(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2), timeout=30
        )
    name = created.metadata.ledger_id.qualified_name
    assert name == str(ledger_of(created.metadata))
    text_id = common_pb2.LedgerId(qualified_name=name)
    with grpc.insecure_channel(cluster.gateway_targets[1]) as channel:  # not the owner: relayed
        ledgers = ledger_pb2_grpc.LedgerServiceStub(channel)
        added = ledgers.AddEntry(ledger_pb2.AddEntryRequest(ledger_id=text_id, payload=b"by name"), timeout=30)
        assert added.entry_id == 0
        closed = ledgers.CloseLedger(ledger_pb2.CloseLedgerRequest(ledger_id=text_id), timeout=30)
        assert closed.metadata.last_entry_id == 0 and closed.metadata.ledger_id.qualified_name == name
        read = ledgers.ReadEntries(ledger_pb2.ReadEntriesRequest(ledger_id=text_id, last_entry_id=-1), timeout=30)
        assert [e.payload for r in read for e in r.entries] == [b"by name"]
        seen = ledgers.GetLedgerMetadata(ledger_pb2.GetLedgerMetadataRequest(ledger_id=text_id), timeout=30)
        assert seen.metadata.ledger_id.qualified_name == name
        rounded = common_pb2.LedgerId(
            scope_id=created.metadata.ledger_id.scope_id ^ 1,
            ledger_id=created.metadata.ledger_id.ledger_id,
            qualified_name=name,
        )
        with pytest.raises(grpc.RpcError) as refused:
            ledgers.ReadLastAddConfirmed(ledger_pb2.ReadLastAddConfirmedRequest(ledger_id=rounded), timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
