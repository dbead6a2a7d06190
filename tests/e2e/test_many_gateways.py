"""Three gateways behind one registry: a ledger is written by the gateway that
created it (its owner), and writes arriving at another gateway are relayed
there, answers and errors unchanged; reads and tails work through any."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client import QuireClient
from quire_client.cluster import LocalCluster
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2
from tests.e2e.conftest import running_cluster

PASSWORD = b"secret"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("gateways"), gateways=3) as local:
        yield local


@pytest.fixture
def clients(cluster: LocalCluster) -> Iterator[list[QuireClient]]:
    opened = [QuireClient(target, timeout=30) for target in cluster.gateway_targets]
    try:
        yield opened
    finally:
        for client in opened:
            client.close()


def ledger_of(metadata: common_pb2.LedgerMetadata) -> LedgerId:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def test_the_owner_is_recorded_and_shown_without_secrets(cluster, clients):
    created = clients[0].create_ledger(password=PASSWORD)
    assert created.owner.address == cluster.gateway_targets[0]
    assert created.owner.gateway and created.owner.session_id
    assert created.password == b""
    seen, _ = clients[2].ledger_metadata(ledger_of(created))
    assert seen.owner == created.owner


def test_writes_through_other_gateways_are_relayed_to_the_owner(cluster, clients):
    ledger = ledger_of(clients[0].create_ledger())
    proto = ledger_id_to_proto(ledger)
    first = clients[1].ledgers.AddEntry(ledger_pb2.AddEntryRequest(ledger_id=proto, payload=b"e0"), timeout=30)
    assert first.entry_id == 0
    assert first.owner.address == cluster.gateway_targets[0]  # the answer names the owner
    acks = list(clients[2].append(ledger, [b"e%d" % i for i in range(1, 11)], batch_size=3))
    assert acks[-1].last_entry_id == 10
    assert clients[1].add_entry(ledger, b"e11") == 11
    closed = clients[2].close_ledger(ledger)
    assert closed.state == common_pb2.LEDGER_STATE_CLOSED and closed.last_entry_id == 11
    for client in clients:
        assert [e.payload for e in client.read(ledger)] == [b"e%d" % i for i in range(12)]


def test_a_relayed_write_stream_with_many_entries_in_flight(clients):
    ledger = ledger_of(clients[0].create_ledger())
    payloads = [b"%06d" % i + b"x" * 2000 for i in range(3000)]
    last = -1
    for ack in clients[1].append(ledger, payloads, batch_size=50):
        assert ack.first_entry_id == last + 1  # acknowledged in order, none skipped
        last = ack.last_entry_id
    assert last == len(payloads) - 1
    clients[2].close_ledger(ledger)
    assert [e.payload for e in clients[1].read(ledger)] == payloads


def test_errors_from_the_owner_pass_through_unchanged(clients):
    ledger = ledger_of(clients[0].create_ledger())
    clients[0].close_ledger(ledger)
    errors = []
    for client in clients:  # the owner itself, then two relays
        with pytest.raises(grpc.RpcError) as caught:
            client.ledgers.AddEntry(
                ledger_pb2.AddEntryRequest(ledger_id=ledger_id_to_proto(ledger), payload=b"late"), timeout=30
            )
        errors.append((caught.value.code(), reason_of(caught.value)))
    assert errors == [(grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_LEDGER_CLOSED")] * 3


def test_a_conditional_append_is_refused_with_the_next_entry_id_through_any_gateway(clients):
    ledger = ledger_of(clients[0].create_ledger())
    clients[1].append_all(ledger, [b"a", b"b"])
    proto = ledger_id_to_proto(ledger)
    for client in clients:
        with pytest.raises(grpc.RpcError) as caught:
            client.ledgers.AddEntry(
                ledger_pb2.AddEntryRequest(ledger_id=proto, payload=b"c", expected_entry_id=5), timeout=30
            )
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert reason_of(caught.value) == "ERROR_REASON_UNEXPECTED_ENTRY_ID"
        assert details_of(caught.value)["next_entry_id"] == "2"
    added = clients[2].ledgers.AddEntry(
        ledger_pb2.AddEntryRequest(ledger_id=proto, payload=b"c", expected_entry_id=2), timeout=30
    )
    assert added.entry_id == 2


def test_a_tail_through_a_non_owner_follows_the_writer_and_ends_at_close(clients):
    ledger = ledger_of(clients[0].create_ledger())
    seen: list[bytes] = []
    tail = threading.Thread(target=lambda: seen.extend(e.payload for e in clients[2].tail(ledger)))
    tail.start()
    try:
        for i in range(20):
            clients[1].add_entry(ledger, b"t%d" % i)
        deadline = threading.Event()
        while len(seen) < 19 and not deadline.wait(0.1):  # advancing while the writer writes
            pass
        clients[1].close_ledger(ledger)
    finally:
        tail.join(timeout=120)
    assert not tail.is_alive()
    assert seen == [b"t%d" % i for i in range(20)]


def reason_of(error: grpc.RpcError) -> str:
    from google.rpc import error_details_pb2, status_pb2

    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason
    return ""


def details_of(error: grpc.RpcError) -> dict[str, str]:
    from google.rpc import error_details_pb2, status_pb2

    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return dict(info.metadata)
    return {}


def test_a_write_stream_falls_back_to_the_next_gateway_it_was_given(cluster, clients):
    from quire_client.cluster import free_port

    ledger = ledger_of(clients[0].create_ledger())
    nowhere = f"127.0.0.1:{free_port()}"  # no gateway there
    with QuireClient(nowhere, timeout=30, gateways=[cluster.gateway_targets[2]]) as client:
        assert client.append_all(ledger, [b"x%d" % i for i in range(50)]) == 49
        assert client.gateway == cluster.gateway_targets[2]
    assert clients[0].next_entry_id(ledger) == 50  # asked without writing
    assert clients[1].next_entry_id(ledger) == 50


def test_a_read_through_another_gateway_right_after_a_close_sees_every_entry(clients):
    """The reading gateway learned an older LAC and may not have seen the close
    yet (its metadata cache follows a watch): a read that reaches past what it
    knows asks the registry and the bookies again instead of stopping short."""
    ledger = ledger_of(clients[0].create_ledger())
    for i in range(10):
        clients[0].add_entry(ledger, b"early %d" % i)
    assert len(list(clients[1].read(ledger, 0, 8))) == 9  # gateway 2 now remembers a LAC of 8 or 9
    for i in range(10):
        clients[0].add_entry(ledger, b"late %d" % i)
    clients[2].close_ledger(ledger)
    expected = [b"early %d" % i for i in range(10)] + [b"late %d" % i for i in range(10)]
    assert [e.payload for e in clients[1].read(ledger, 0, 19)] == expected
    assert [e.payload for e in clients[1].read(ledger)] == expected


def test_a_create_repeated_through_another_gateway_is_given_the_ledger_and_leaves_it_to_its_owner(cluster, clients):
    """A client that never heard its create's answer sends it again with its
    request_id, here through another gateway: it is given the ledger the first
    attempt made, not refused for naming another owner, and that ledger keeps
    one writer. Writes through the second gateway are relayed to the first."""
    created = clients[0].create_ledger(password=PASSWORD, request_id="repeated-elsewhere")
    again = clients[1].create_ledger(password=PASSWORD, request_id="repeated-elsewhere")
    assert ledger_of(again) == ledger_of(created) and again.owner == created.owner
    ledger = ledger_of(created)
    assert clients[1].add_entry(ledger, b"through the second gateway") == 0
    assert clients[0].add_entry(ledger, b"through the owner") == 1
    answer = clients[1].ledgers.AddEntry(
        ledger_pb2.AddEntryRequest(ledger_id=ledger_id_to_proto(ledger), payload=b"relayed"), timeout=30
    )
    assert (answer.entry_id, answer.owner.address) == (2, cluster.gateway_targets[0])
    clients[1].close_ledger(ledger)
    payloads = [b"through the second gateway", b"through the owner", b"relayed"]
    assert [e.payload for e in clients[2].read(ledger)] == payloads
