"""RTY rows: metadata writes whose answer is lost after etcd committed them.

A registry process talks to etcd through the answer-dropping proxy
(etcd_proxy.py, its own process): the proxy lets the chosen transaction reach
etcd and commit, waits for etcd's answer and fails the call UNAVAILABLE
instead. The registry tries the write again, as it must, and the row checks
that the retry recognises the commit: exactly one ledger and no orphan, the
caller told success with the real id and version, no legacy id burned or
taken twice, no false ALREADY_EXISTS, ABORTED or NOT_FOUND.

Every row also runs against a registry started with
QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK (the positive control) and checks
that the bug the fix prevents shows there.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client.cluster import LocalCluster, Ports, free_port, grpc_serving
from quire_client.errors import QuireClientError
from quire_client.errors import translate as _translate
from quire_proto.common.v1 import common_pb2
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.faults.etcd_proxy import EtcdAnswerProxy
from tests.faults.lab import FAST_SETTINGS
from tests.faults.report import Scenario
from tests.faults.scenarios import client_for

pytestmark = [pytest.mark.integration, pytest.mark.faults]

UNSAFE = "QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK"


@dataclass
class RegistryBehindProxy:
    stub: registry_pb2_grpc.RegistryServiceStub
    proxy: EtcdAnswerProxy
    safe: bool

    def call(self, method: str, request):  # type: ignore[no-untyped-def]
        try:
            return getattr(self.stub, method)(request, timeout=30)
        except grpc.RpcError as exc:
            raise _translate(exc) from None

    def ledgers(self) -> set[LedgerId]:
        listed = self.call(
            "ListLedgerMetadata", registry_pb2.ListLedgerMetadataRequest(all_scopes=True, page_size=1000)
        ).ledgers
        return {LedgerId(m.ledger_id.scope_id, m.ledger_id.ledger_id) for m in listed}

    def create(self, **choice: object) -> registry_pb2.CreateLedgerMetadataResponse:
        request = registry_pb2.CreateLedgerMetadataRequest(metadata=record(), **choice)  # type: ignore[arg-type]
        return self.call("CreateLedgerMetadata", request)  # type: ignore[no-any-return]


def record() -> common_pb2.LedgerMetadata:
    metadata = common_pb2.LedgerMetadata(
        format_version=1,
        ensemble_size=3,
        write_quorum_size=2,
        ack_quorum_size=2,
        state=common_pb2.LEDGER_STATE_OPEN,
        last_entry_id=-1,
        ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=["a:1", "b:1", "c:1"])],
    )
    metadata.create_time.GetCurrentTime()
    return metadata


def id_of(metadata: common_pb2.LedgerMetadata) -> LedgerId:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def start_registry(etcd_endpoint: str, data_dir: Path, safe: bool) -> Iterator[RegistryBehindProxy]:
    """A proxy in front of `etcd_endpoint` and a registry process behind it,
    on a cluster prefix of its own; both stopped by PID whatever happens."""
    data_dir.mkdir(parents=True, exist_ok=True)
    proxy = EtcdAnswerProxy(etcd_endpoint, data_dir / "proxy.log")
    address = f"127.0.0.1:{free_port()}"
    env = dict(os.environ)
    env.update(
        QUIRE_INSECURE_PLAINTEXT_DEV="true",
        QUIRE_CLUSTER=f"rty-{uuid.uuid4().hex[:8]}",
        QUIRE_ETCD_ENDPOINTS=proxy.address,
        QUIRE_REGISTRY_ADDRESS=address,
        QUIRE_REGISTRY_HTTP_PORT="0",
        QUIRE_BOOKIE_TTL_SECONDS="5",
    )
    if not safe:
        env[UNSAFE] = "true"
    popen: subprocess.Popen[bytes] | None = None
    with proxy:
        try:
            with (data_dir / "registry.log").open("ab") as log:
                popen = subprocess.Popen(
                    [sys.executable, "-m", "quire_registry"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            deadline = time.monotonic() + 60
            while not grpc_serving(address):
                assert popen.poll() is None, f"the registry exited; see {data_dir / 'registry.log'}"
                assert time.monotonic() < deadline, "the registry did not start within 60s"
                time.sleep(0.1)
            with grpc.insecure_channel(address) as channel:
                yield RegistryBehindProxy(registry_pb2_grpc.RegistryServiceStub(channel), proxy, safe)
        finally:
            if popen is not None and popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
                try:
                    popen.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait(timeout=10)


@pytest.fixture(scope="module", params=["fixed", "unsafe-control"])
def registry(request: pytest.FixtureRequest, etcd, tmp_path_factory: pytest.TempPathFactory):
    safe = request.param == "fixed"
    yield from start_registry(etcd.endpoint, tmp_path_factory.mktemp(f"rty-{request.param}"), safe)


def start(scenario: Scenario, row: str, registry: RegistryBehindProxy, **parameters: object) -> None:
    scenario.start(row, commit_check="on" if registry.safe else "off (positive control)", **parameters)


def test_rty1_create_with_a_server_chosen_id(scenario, registry):
    start(scenario, "RTY-1" if registry.safe else "RTY-1-control", registry, dropped_answers=1)
    before = registry.ledgers()
    registry.proxy.drop_answers(1)
    created = registry.create().metadata
    made = registry.ledgers() - before
    scenario.figures.update(ledgers_made=len(made), dropped=registry.proxy.dropped())
    if registry.safe:
        assert made == {id_of(created)}  # one ledger, the one the caller was told of
    else:
        assert len(made) == 2 and id_of(created) in made  # the first one orphaned


def test_rty2_create_with_a_client_chosen_id(scenario, registry):
    start(scenario, "RTY-2" if registry.safe else "RTY-2-control", registry, dropped_answers=1)
    wanted = LedgerId(0x2222, int(uuid.uuid4().int >> 66))
    registry.proxy.drop_answers(1)
    if registry.safe:
        created = registry.create(ledger_id=ledger_id_to_proto(wanted)).metadata
        assert id_of(created) == wanted
    else:
        with pytest.raises(QuireClientError) as refused:
            registry.create(ledger_id=ledger_id_to_proto(wanted))
        assert refused.value.reason == "ERROR_REASON_LEDGER_EXISTS"  # for a create that succeeded
    assert wanted in registry.ledgers()


def test_rty3_create_retried_with_its_request_id_after_unavailable(scenario, registry):
    """Every attempt of the first call loses its answer: the caller is told
    UNAVAILABLE for a ledger that exists. Its retry with the same request_id
    is given that ledger."""
    start(scenario, "RTY-3" if registry.safe else "RTY-3-control", registry, dropped_answers=3)
    request_id = str(uuid.uuid4())
    before = registry.ledgers()
    registry.proxy.drop_answers(3)
    with pytest.raises(QuireClientError) as lost:
        registry.create(request_id=request_id)
    assert lost.value.code == grpc.StatusCode.UNAVAILABLE
    [made] = registry.ledgers() - before
    if registry.safe:
        again = registry.create(request_id=request_id).metadata
        assert id_of(again) == made and again.create_request_id == request_id
        assert registry.ledgers() - before == {made}
    else:
        with pytest.raises(QuireClientError):  # the caller never learns the ledger it made
            registry.create(request_id=request_id)
        assert registry.ledgers() - before == {made}


def test_rty4_metadata_update(scenario, registry):
    start(scenario, "RTY-4" if registry.safe else "RTY-4-control", registry, dropped_answers=1)
    created = registry.create()
    closed = common_pb2.LedgerMetadata()
    closed.CopyFrom(created.metadata)
    closed.state = common_pb2.LEDGER_STATE_CLOSED
    update = registry_pb2.UpdateLedgerMetadataRequest(
        ledger_id=closed.ledger_id, metadata=closed, expected_version=created.version
    )
    registry.proxy.drop_answers(1)
    if registry.safe:
        version = registry.call("UpdateLedgerMetadata", update).version
        stored = registry.call("GetLedgerMetadata", registry_pb2.GetLedgerMetadataRequest(ledger_id=closed.ledger_id))
        assert stored.version == version and stored.metadata.state == common_pb2.LEDGER_STATE_CLOSED
    else:
        with pytest.raises(QuireClientError) as refused:
            registry.call("UpdateLedgerMetadata", update)
        assert refused.value.reason == "ERROR_REASON_METADATA_VERSION_CONFLICT"  # for its own update


def test_rty5_metadata_delete(scenario, registry):
    start(scenario, "RTY-5" if registry.safe else "RTY-5-control", registry, dropped_answers=1)
    created = registry.create(request_id=str(uuid.uuid4()))
    ledger = id_of(created.metadata)
    delete = registry_pb2.DeleteLedgerMetadataRequest(
        ledger_id=created.metadata.ledger_id, expected_version=created.version
    )
    registry.proxy.drop_answers(1)
    if registry.safe:
        registry.call("DeleteLedgerMetadata", delete)
    else:
        with pytest.raises(QuireClientError) as refused:
            registry.call("DeleteLedgerMetadata", delete)
        assert refused.value.code == grpc.StatusCode.NOT_FOUND  # for its own delete
    assert ledger not in registry.ledgers()


def test_rty6_bookie_registration_and_move(scenario, registry):
    start(scenario, "RTY-6" if registry.safe else "RTY-6-control", registry, dropped_answers=2)
    bookie_id = f"rty6-{uuid.uuid4().hex[:6]}:3181"
    info = common_pb2.BookieServiceInfo(
        endpoints=[common_pb2.Endpoint(id="rpc", host="127.0.0.1", port=3181, protocol="bookie-rpc")]
    )
    requests: queue.Queue[registry_pb2.RegisterBookieRequest | None] = queue.Queue()

    def session() -> Iterator[registry_pb2.RegisterBookieRequest]:
        while (item := requests.get()) is not None:
            yield item

    responses = registry.stub.RegisterBookie(session(), timeout=60)
    try:
        registry.proxy.drop_answers(1)
        requests.put(registry_pb2.RegisterBookieRequest(bookie_id=bookie_id, service_info=info, ttl_seconds=5))
        if not registry.safe:
            with pytest.raises(grpc.RpcError) as refused:
                next(responses)
            assert _translate(refused.value).reason == "ERROR_REASON_BOOKIE_ALREADY_REGISTERED"  # by itself
            return
        first = next(responses)
        assert first.record.bookie_id == bookie_id and first.lease_id
        registry.proxy.drop_answers(1)  # the move to read-only: a delete and a put in one transaction
        requests.put(registry_pb2.RegisterBookieRequest(bookie_id=bookie_id, read_only=True, service_info=info))
        moved = next(responses)
        assert moved.record.read_only and moved.lease_id == first.lease_id
        listed = registry.call("ListBookies", registry_pb2.ListBookiesRequest()).bookies
        assert [(b.read_only, b.version) for b in listed if b.bookie_id == bookie_id] == [(True, moved.record.version)]
    finally:
        requests.put(None)
        responses.cancel()


def test_rty7_cookie_create_update_delete(scenario, registry):
    start(scenario, "RTY-7" if registry.safe else "RTY-7-control", registry, dropped_answers=3)
    bookie_id = f"rty7-{uuid.uuid4().hex[:6]}:3181"
    cookie = registry_pb2.Cookie(instance_id="one", data_dirs=["/d"])
    registry.proxy.drop_answers(1)
    put = registry_pb2.PutCookieRequest(bookie_id=bookie_id, cookie=cookie, expected_version=0)
    if not registry.safe:
        with pytest.raises(QuireClientError) as refused:
            registry.call("PutCookie", put)
        assert refused.value.reason == "ERROR_REASON_COOKIE_EXISTS"  # its own cookie
        return
    version = registry.call("PutCookie", put).version
    grown = registry_pb2.Cookie(instance_id="one", data_dirs=["/d", "/e"])
    registry.proxy.drop_answers(1)
    version = registry.call(
        "PutCookie", registry_pb2.PutCookieRequest(bookie_id=bookie_id, cookie=grown, expected_version=version)
    ).version
    stored = registry.call("GetCookie", registry_pb2.GetCookieRequest(bookie_id=bookie_id))
    assert stored.cookie == grown and stored.version == version
    registry.proxy.drop_answers(1)
    registry.call("DeleteCookie", registry_pb2.DeleteCookieRequest(bookie_id=bookie_id, expected_version=version))
    with pytest.raises(QuireClientError) as gone:
        registry.call("GetCookie", registry_pb2.GetCookieRequest(bookie_id=bookie_id))
    assert gone.value.code == grpc.StatusCode.NOT_FOUND


def test_rty8_legacy_id_sequence(scenario, registry):
    start(scenario, "RTY-8" if registry.safe else "RTY-8-control", registry, dropped_answers=1)
    before = registry.ledgers()
    previous = registry.create(legacy=True).metadata.ledger_id.ledger_id
    registry.proxy.drop_answers(1)
    lossy = registry.create(legacy=True).metadata.ledger_id.ledger_id
    after = registry.create(legacy=True).metadata.ledger_id.ledger_id
    made = sorted(ledger.ledger_id for ledger in registry.ledgers() - before)
    scenario.figures.update(ids=[previous, lossy, after], made=made)
    if registry.safe:
        assert [lossy, after] == [previous + 1, previous + 2]  # nothing burned, nothing twice
        assert made == [previous, lossy, after]
    else:
        assert lossy == previous + 2 and made == [previous, previous + 1, lossy, after]  # an orphan in between


def test_rty9_load_factors(scenario, registry):
    """A plain put of every factor, no compare: a retried write after a lost
    answer writes the same values again. Nothing for the commit check to
    recognise, so the fixed registry and the control both pass; the row
    keeps the write covered."""
    start(scenario, "RTY-9" if registry.safe else "RTY-9-control", registry, dropped_answers=1)
    bookie_id = f"rty9-{uuid.uuid4().hex[:6]}:3181"
    dropped = registry.proxy.dropped()
    registry.proxy.drop_answers(1)
    weights = [registry_pb2.LoadWeight(bookie_id=bookie_id, factor=0.25)]
    registry.call("PutLoadWeights", registry_pb2.PutLoadWeightsRequest(weights=weights))
    assert registry.proxy.dropped() == dropped + 1
    stored = registry.call("ListLoadWeights", registry_pb2.ListLoadWeightsRequest()).weights
    assert [w.factor for w in stored if w.bookie_id == bookie_id] == [0.25]


@pytest.mark.e2e
@pytest.mark.parametrize("safe", [True, False], ids=["fixed", "unsafe-control"])
def test_rty10_client_create_retried_through_the_gateway(scenario, tmp_path, safe):
    """End to end: the Python client's create, the gateway, the registry and
    a proxy in front of etcd that loses every answer of the first call. The
    client is told UNAVAILABLE, sends the create again with the same
    request_id, and is given the ledger the lost call made.

    The drops are aimed at the create's transaction (the only one that puts a
    create-requests key): the cluster's other writes go through the same proxy
    and would otherwise take them, leaving the create untouched."""
    scenario.start("RTY-10" if safe else "RTY-10-control", commit_check="on" if safe else "off (positive control)")
    ports = Ports.free()
    with EtcdAnswerProxy(f"127.0.0.1:{ports.etcd}", tmp_path / "proxy.log") as proxy:
        env = {**FAST_SETTINGS, "QUIRE_ETCD_ENDPOINTS": proxy.address, **({} if safe else {UNSAFE: "true"})}
        with LocalCluster(tmp_path / "cluster", ports, extra_env=env) as cluster:
            cluster.wait_bookies_registered(3)

            with client_for(cluster) as client:
                before = {id_of(m) for m in client.list_ledgers()}
                proxy.drop_answers(3, holding=b"/create-requests/")
                if safe:
                    created = client.create_ledger(password=b"rty10")
                    made = {id_of(m) for m in client.list_ledgers()} - before
                    assert made == {id_of(created)} and created.create_request_id
                else:
                    with pytest.raises(QuireClientError):
                        client.create_ledger(password=b"rty10")
                    made = {id_of(m) for m in client.list_ledgers()} - before
                    assert len(made) == 1  # a ledger the caller was never told of
                scenario.figures.update(dropped=proxy.dropped(), ledgers_made=len(made))
                assert proxy.dropped() == 3  # the three attempts of the first call, nothing else
