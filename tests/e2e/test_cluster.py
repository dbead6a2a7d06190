"""End to end: every service its own process, real etcd, real RocksDB."""

from __future__ import annotations

import hashlib
import json
import time

import grpc
import pytest

from quire_api.ids import LedgerId
from quire_client import QuireClientError
from quire_proto.common.v1 import common_pb2

pytestmark = pytest.mark.e2e


def payload(index: int) -> bytes:
    """Distinct, self-checking payloads of varying size."""
    body = hashlib.sha256(str(index).encode()).digest() * (1 + index % 40)
    return index.to_bytes(4, "big") + body


def ledger_name(metadata: common_pb2.LedgerMetadata) -> str:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id).qualified_name


def test_thousand_entries_survive_a_killed_bookie(cluster, client):
    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=b"pw")
    ledger = ledger_name(metadata)
    assert client.append_all(ledger, (payload(i) for i in range(1000)), batch_size=50) == 999
    assert client.last_add_confirmed(ledger) == 999

    read = list(client.read(ledger))
    assert [e.entry_id for e in read] == list(range(1000))
    assert all(e.payload == payload(e.entry_id) for e in read)
    assert read[-1].length == sum(len(payload(i)) for i in range(1000))

    victim = cluster.bookie_names[0]
    cluster.kill(victim)  # SIGKILL
    try:
        again = list(client.read(ledger))
        assert [e.payload for e in again] == [payload(i) for i in range(1000)]
    finally:
        cluster.start_process(victim)


def test_acknowledged_entries_survive_sigkill_and_restart_of_bookies(cluster, client):
    ledger = ledger_name(client.create_ledger())
    client.append_all(ledger, (payload(i) for i in range(300)))
    first, second = cluster.bookie_names[:2]
    # Kill one bookie without warning, bring it back, then kill another: the
    # entries whose other replica is on the second can now only come from the
    # first, so they must have been on its disk before it acknowledged them.
    cluster.kill(first)
    cluster.start_process(first)
    cluster.wait_bookies_registered(3)
    cluster.kill(second)
    try:
        assert [e.payload for e in client.read(ledger)] == [payload(i) for i in range(300)]
    finally:
        cluster.start_process(second)
        cluster.wait_bookies_registered(3)


def test_close_then_read_and_delete(cluster, client):
    ledger = ledger_name(client.create_ledger(ensemble_size=2, write_quorum_size=2, ack_quorum_size=1))
    for i in range(5):
        assert client.add_entry(ledger, payload(i)) == i
    closed = client.close_ledger(ledger)
    assert closed.state == common_pb2.LEDGER_STATE_CLOSED and closed.last_entry_id == 4
    assert closed.length == sum(len(payload(i)) for i in range(5))
    assert not closed.password
    with pytest.raises(QuireClientError) as caught:
        client.add_entry(ledger, b"late")
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert [e.entry_id for e in client.read(ledger, 2, 4)] == [2, 3, 4]
    assert ledger in {ledger_name(m) for m in client.list_ledgers()}
    client.delete_ledger(ledger)
    with pytest.raises(QuireClientError) as caught:
        client.ledger_metadata(ledger)
    assert caught.value.code == grpc.StatusCode.NOT_FOUND


def test_scoped_exact_and_legacy_ids(cluster, client):
    scoped = client.create_ledger(scope_id=77)
    assert scoped.ledger_id.scope_id == 77
    exact = client.create_ledger(ledger_id="00000000-0000-0005-7fff-ffffffffffff")
    assert ledger_name(exact) == "00000000-0000-0005-7fff-ffffffffffff"
    with pytest.raises(QuireClientError) as caught:
        client.create_ledger(ledger_id="5:9223372036854775807")
    assert caught.value.code == grpc.StatusCode.ALREADY_EXISTS
    legacy = client.create_ledger(legacy=True)
    assert legacy.ledger_id.scope_id == 0 and legacy.ledger_id.ledger_id >= 1
    assert [ledger_name(m) for m in client.list_ledgers(77)] == [ledger_name(scoped)]


def test_read_unconfirmed_and_open(cluster, client):
    ledger = ledger_name(client.create_ledger(password=b"open-sesame"))
    client.append_all(ledger, (payload(i) for i in range(10)))
    assert [e.entry_id for e in client.read(ledger, 0, 9, unconfirmed=True)] == list(range(10))
    with pytest.raises(QuireClientError) as caught:
        list(client.read(ledger, 0, 10, unconfirmed=True))
    assert caught.value.code == grpc.StatusCode.NOT_FOUND
    opened = client.open_ledger(ledger, b"open-sesame")
    assert opened.last_add_confirmed == 9
    with pytest.raises(QuireClientError) as caught:
        client.open_ledger(ledger, b"wrong")
    assert caught.value.code == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda c, ledger: list(c.read("not-a-ledger-id")), grpc.StatusCode.INVALID_ARGUMENT),
        (
            lambda c, ledger: c.create_ledger(ensemble_size=2, write_quorum_size=3),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            lambda c, ledger: c.create_ledger(write_quorum_size=2, ack_quorum_size=3),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (lambda c, ledger: c.create_ledger(ensemble_size=4), grpc.StatusCode.UNAVAILABLE),
        (lambda c, ledger: list(c.read("00000000-0000-0000-0000-00000000dead")), grpc.StatusCode.NOT_FOUND),
        (lambda c, ledger: list(c.read(ledger, 0, 50)), grpc.StatusCode.OUT_OF_RANGE),
        (lambda c, ledger: list(c.read(ledger, -3, 1)), grpc.StatusCode.INVALID_ARGUMENT),
    ],
    ids=["malformed-id", "E<W", "A>W", "not-enough-bookies", "unknown-ledger", "past-lac", "negative-entry"],
)
def test_bad_input_gets_the_designed_code(cluster, client, call, code):
    ledger = ledger_name(client.create_ledger())
    client.append_all(ledger, [b"a", b"b"])
    with pytest.raises(Exception) as caught:
        call(client, ledger)
    error = caught.value
    if isinstance(error, QuireClientError):
        assert error.code == code, error
        assert "Traceback" not in error.message
    else:  # a malformed id is refused by the client library before any call
        assert code == grpc.StatusCode.INVALID_ARGUMENT and getattr(error, "code", None) == "INVALID_ARGUMENT"


def test_not_enough_bookies_message_names_the_counts(cluster, client):
    with pytest.raises(QuireClientError) as caught:
        client.create_ledger(ensemble_size=5, write_quorum_size=2, ack_quorum_size=2)
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert "needs 5" in caught.value.message and "3 are available" in caught.value.message


def test_trace_context_crosses_every_hop(cluster, client):
    ledger = ledger_name(client.create_ledger())
    client.append_all(ledger, [b"traced"])
    telemetry = cluster.data_dir / "telemetry"

    def spans(service):
        return [
            json.loads(line)
            for path in telemetry.glob(f"{service}-*-spans.*.jsonl")
            for line in path.read_text().splitlines()
        ]

    deadline = time.monotonic() + 120  # generous: spans are exported in batches, later on a busy machine
    while time.monotonic() < deadline:
        gateway_traces = {s["trace_id"] for s in spans("gateway") if s["name"].endswith("CreateLedger")}
        placement_traces = {s["trace_id"] for s in spans("placement") if s["kind"] == "SERVER"}
        registry_traces = {s["trace_id"] for s in spans("registry") if s["kind"] == "SERVER"}
        bookie_traces = {s["trace_id"] for s in spans("bookie") if s["name"] == "bookie.add"}
        append_traces = {s["trace_id"] for s in spans("gateway") if s["name"].endswith("AppendEntries")}
        if gateway_traces & placement_traces & registry_traces and append_traces & bookie_traces:
            return
        time.sleep(0.5)
    pytest.fail("no trace spans gateway -> placement -> registry and gateway -> bookie")


def test_every_service_answers_health_and_reflection(cluster):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    expected = {
        "gateway": "quire.gateway.v1.LedgerService",
        "registry": "quire.registry.v1.RegistryService",
        "placement": "quire.placement.v1.PlacementService",
        cluster.bookie_names[0]: "quire.bookie.v1.BookieService",
    }
    for name, service in expected.items():
        with grpc.insecure_channel(cluster.processes[name].health_target) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=5
            )
            assert status.status == health_pb2.HealthCheckResponse.SERVING
            responses = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            )
            listed = {s.name for r in responses for s in r.list_services_response.service}
            assert {service, "grpc.health.v1.Health"} <= listed, (name, listed)
