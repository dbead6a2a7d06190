"""The gateway API as a client in any language meets it, on three gateway
processes: every reply fits gRPC's default 4 MiB receive limit (the largest
entry, a blob, a tail, read over a channel with default settings), errors carry
their details and a RetryInfo only when trying again can help, and the Python
client's reads and tails resume without gap or duplicate when the gateway
serving them is killed (SIGKILL) mid-stream."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_api.limits import MAX_ENTRY_PAYLOAD_BYTES
from quire_client import NotFoundError, OutOfRangeError, QuireClient, ResourceExhaustedError, UnavailableError
from quire_client.cluster import LocalCluster
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc
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
    return QuireClient(ordered[0], timeout=30, gateways=ordered[1:])


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


def entry_read_by_range(ledgers: ledger_pb2_grpc.LedgerServiceStub, ledger: LedgerId, entry_id: int) -> Any:
    request = ledger_pb2.ReadEntriesRequest(
        ledger_id=ledger_id_to_proto(ledger), first_entry_id=entry_id, last_entry_id=entry_id
    )
    (entry,) = [e for r in ledgers.ReadEntries(request, timeout=30) for e in r.entries]
    return entry


def error_info(error: grpc.RpcError) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return error.code(), info.reason, dict(info.metadata)  # type: ignore[attr-defined]


def read_one_entry_at(target: str, ledger: LedgerId) -> None:
    """ReadEntry at `target` of `ledger`, whose entries 0..4 are confirmed, over gRPC's defaults."""
    missing = LedgerId(ledger.scope_id, ledger.ledger_id ^ 1)
    with grpc.insecure_channel(target) as channel:
        ledgers = ledger_pb2_grpc.LedgerServiceStub(channel)
        read = ledgers.ReadEntry(ledger_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(ledger), entry_id=3))
        assert read.WhichOneof("result") == "entry"
        assert read.entry == entry_read_by_range(ledgers, ledger, 3)
        assert (read.entry.entry_id, read.entry.payload) == (3, b"single 3")
        assert read.entry.length == sum(len(b"single %d" % i) for i in range(4))
        with pytest.raises(grpc.RpcError) as beyond:
            ledgers.ReadEntry(ledger_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(ledger), entry_id=9))
        code, reason, metadata = error_info(beyond.value)
        assert (code, reason) == (grpc.StatusCode.OUT_OF_RANGE, "ERROR_REASON_READ_BEYOND_LAC"), target
        assert metadata == {"last_add_confirmed": "4"}
        with pytest.raises(grpc.RpcError) as unknown:
            ledgers.ReadEntry(ledger_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(missing), entry_id=0))
        assert error_info(unknown.value)[:2] == (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_LEDGER_NOT_FOUND")
        with pytest.raises(grpc.RpcError) as negative:
            ledgers.ReadEntry(ledger_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(ledger), entry_id=-1))
        assert negative.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_read_entry_reads_one_entry_by_the_rules_of_read_entries(cluster: LocalCluster) -> None:
    """At the ledger's owner while it is open (its entry cache, its writer's
    LAC), then closed at another gateway (the bookies; the LAC the bookies
    know lags the writer's until it is closed, as for ReadEntries): the Entry
    ReadEntries returns, OUT_OF_RANGE past the LAC, NOT_FOUND for a ledger
    that does not exist."""
    with client_at(cluster, 0) as writer:
        ledger = ledger_of(writer.create_ledger())
        writer.append_all(ledger, [b"single %d" % i for i in range(5)])
        read_one_entry_at(cluster.gateway_targets[0], ledger)
        writer.close_ledger(ledger)
    read_one_entry_at(cluster.gateway_targets[1], ledger)
    with client_at(cluster, 1) as reader:
        assert reader.read_entry(ledger, 2).payload == b"single 2"
        with pytest.raises(OutOfRangeError) as refused:
            reader.read_entry(ledger, 9)
        assert refused.value.reason == "ERROR_REASON_READ_BEYOND_LAC" and not refused.value.retryable
        with pytest.raises(NotFoundError):
            reader.read_entry(LedgerId(ledger.scope_id, ledger.ledger_id ^ 1), 0)


def test_read_entry_stream_answers_each_request_in_order_and_goes_on_after_an_error(cluster: LocalCluster) -> None:
    with client_at(cluster, 0) as writer:
        ledger = ledger_of(writer.create_ledger())
        writer.append_all(ledger, [b"streamed %d" % i for i in range(5)])
        other = ledger_of(writer.create_ledger())
        writer.append_all(other, [b"other 0"])
    proto, other_proto = ledger_id_to_proto(ledger), ledger_id_to_proto(other)
    missing = ledger_id_to_proto(LedgerId(ledger.scope_id, ledger.ledger_id ^ 1))
    asked = [(proto, 1), (proto, 9), (missing, 0), (proto, -1), (other_proto, 0), (proto, 1), (proto, 0)]
    with grpc.insecure_channel(cluster.gateway_targets[0]) as channel:
        stream = ledger_pb2_grpc.LedgerServiceStub(channel).ReadEntryStream(
            iter([ledger_pb2.ReadEntryRequest(ledger_id=lid, entry_id=e) for lid, e in asked]), timeout=60
        )
        answers = list(stream)
        assert stream.code() == grpc.StatusCode.OK
    assert len(answers) == len(asked)
    assert [a.WhichOneof("result") for a in answers] == ["entry", "error", "error", "error", "entry", "entry", "entry"]
    entries = [a.entry.payload for a in answers if a.HasField("entry")]
    assert entries == [b"streamed 1", b"other 0", b"streamed 1", b"streamed 0"]
    beyond, unknown, negative = (answers[i].error for i in (1, 2, 3))
    assert (beyond.code, beyond.reason) == (grpc.StatusCode.OUT_OF_RANGE.value[0], "ERROR_REASON_READ_BEYOND_LAC")
    assert dict(beyond.metadata) == {"last_add_confirmed": "4"} and not beyond.HasField("retry_delay")
    assert "beyond the last-add-confirmed 4" in beyond.message
    assert (unknown.code, unknown.reason) == (grpc.StatusCode.NOT_FOUND.value[0], "ERROR_REASON_LEDGER_NOT_FOUND")
    invalid = grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert (negative.code, negative.reason) == (invalid, "ERROR_REASON_INVALID_ARGUMENT")

    with client_at(cluster, 0) as writer:
        writer.close_ledger(ledger)  # so that another gateway knows its end (ReadEntries' rule)
    with client_at(cluster, 1) as reader:  # not the owner: served there, from the bookies
        got = list(reader.read_entries_by_id(ledger, [3, 0, 9, 2]))
    assert [getattr(g, "payload", None) for g in got] == [b"streamed 3", b"streamed 0", None, b"streamed 2"]
    assert isinstance(got[2], OutOfRangeError) and got[2].reason == "ERROR_REASON_READ_BEYOND_LAC"
    assert not got[2].retryable


def test_read_entry_stream_ends_cleanly_when_the_client_half_closes(cluster: LocalCluster) -> None:
    """A reader that waits for each answer before its next request (one long-lived
    stream), then half-closes; one that sends more requests than the gateway works on
    at once and half-closes at once; one that half-closes without a request."""
    with client_at(cluster, 0) as writer:
        ledger = ledger_of(writer.create_ledger())
        writer.append_all(ledger, [b"half %d" % i for i in range(40)])
    proto = ledger_id_to_proto(ledger)
    with grpc.insecure_channel(cluster.gateway_targets[0]) as channel:
        ledgers = ledger_pb2_grpc.LedgerServiceStub(channel)
        outgoing: queue.Queue[ledger_pb2.ReadEntryRequest | None] = queue.Queue()
        stream = ledgers.ReadEntryStream(iter(outgoing.get, None), timeout=60)
        for entry_id in (5, 0, 39, 5):
            outgoing.put(ledger_pb2.ReadEntryRequest(ledger_id=proto, entry_id=entry_id))
            assert next(stream).entry.payload == b"half %d" % entry_id
        outgoing.put(None)  # half-close: nothing is due, so the stream ends
        assert list(stream) == [] and stream.code() == grpc.StatusCode.OK

        ids = [(7 * i) % 40 for i in range(100)]
        stream = ledgers.ReadEntryStream(
            iter([ledger_pb2.ReadEntryRequest(ledger_id=proto, entry_id=e) for e in ids]), timeout=60
        )
        assert [a.entry.payload for a in stream] == [b"half %d" % e for e in ids]
        assert stream.code() == grpc.StatusCode.OK

        empty = ledgers.ReadEntryStream(iter([]), timeout=60)
        assert list(empty) == [] and empty.code() == grpc.StatusCode.OK
