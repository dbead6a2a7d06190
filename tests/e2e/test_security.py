"""Security against a running TLS cluster (FAULTS SEC-1, SEC-2, SEC-3):
handshakes refused without a valid certificate, rotation without restart,
roles per scope at the gateway, internal RPCs closed to client identities and
open per RPC only to the service identities allowed to call it."""

from __future__ import annotations

import datetime
import json
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import HealthServicer

from quire_client import (
    ClientTls,
    PermissionDeniedError,
    QuireClient,
    QuireClientError,
    UnauthenticatedError,
)
from quire_client.cluster import LocalCluster, Ports, free_port
from quire_client.devcerts import Authority, CertBundle, load_authority, write_dev_certs
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
PROBE_PORT = free_port()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CertBundle:
    return write_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory, bundle: CertBundle) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("tls-cluster")
    local = LocalCluster(
        data_dir,
        Ports.free(),
        extra_env={
            "QUIRE_TELEMETRY_DIR": str(data_dir / "telemetry"),
            "QUIRE_BOOKIE_TTL_SECONDS": "3",
            # Relays check the name the dev certificates carry, not the address they dial.
            "QUIRE_GATEWAY_PEER_TLS_NAME": "localhost",
        },
        bookie_env={"bookie-1": {"QUIRE_HEALTH_PROBE_PORT": str(PROBE_PORT)}},
        tls=bundle,
        gateways=2,
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


def health_ok(target: str, credentials: grpc.ChannelCredentials | None) -> bool:
    """Whether a health check over these credentials succeeds."""
    channel = grpc.insecure_channel(target) if credentials is None else grpc.secure_channel(target, credentials)
    with channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
            return True
        except grpc.RpcError:
            return False


def creds(ca: Path, cert: bytes | None = None, key: bytes | None = None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(ca.read_bytes(), key, cert)


def client_for(
    cluster: LocalCluster, bundle: CertBundle, name: str, token: str | None = None, gateway: int = 0
) -> QuireClient:
    tls = ClientTls(bundle.ca, bundle.cert(name), bundle.key(name))
    target = cluster.gateway_targets[gateway]
    return QuireClient(target, timeout=30, tls=tls, token=token)


def test_writes_relayed_to_the_owner_are_authorized_where_they_arrive(
    tls_cluster: LocalCluster, bundle: CertBundle
) -> None:
    from quire_api.ids import LedgerId

    with client_for(tls_cluster, bundle, "client-admin") as admin:
        created = admin.create_ledger(scope_id=7)
    ledger = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
    with client_for(tls_cluster, bundle, "client-writer", gateway=1) as writer:
        assert writer.add_entry(ledger, b"relayed") == 0  # over mTLS to the owner, as the gateway identity
        assert writer.append_all(ledger, [b"streamed", b"relayed"]) == 2
        assert writer.close_ledger(ledger).last_entry_id == 2
    with client_for(tls_cluster, bundle, "client-reader", gateway=1) as reader:
        with pytest.raises(PermissionDeniedError) as denied:
            reader.add_entry(ledger, b"no")  # refused here, never relayed
        assert denied.value.reason == "ERROR_REASON_PERMISSION_DENIED_ROLE"
        assert [e.payload for e in reader.read(ledger)] == [b"relayed", b"streamed", b"relayed"]


def test_only_the_gateway_identity_may_relay_writes(tls_cluster: LocalCluster, bundle: CertBundle) -> None:
    from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc

    with client_for(tls_cluster, bundle, "client-admin") as admin:
        created = admin.create_ledger(scope_id=7)
    valid = creds(bundle.ca, bundle.cert("client-admin").read_bytes(), bundle.key("client-admin").read_bytes())
    with grpc.secure_channel(tls_cluster.gateway_target, valid) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            ledger_pb2_grpc.LedgerServiceStub(channel).AddEntry(
                ledger_pb2.AddEntryRequest(ledger_id=created.ledger_id, payload=b"posing as a gateway"),
                metadata=(("quire-forwarded-by", "gateway-x"),),
                timeout=10,
            )
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "quire-service:gateway" in (refused.value.details() or "")


def test_handshakes_refused_without_a_valid_certificate(
    tls_cluster: LocalCluster, bundle: CertBundle, tmp_path: Path
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    ca = Authority.create()
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(ca.pem())
    # The cluster's CA, for certificates that fail for another reason.
    cluster_ca = service_authority(bundle)
    foreign = ca.issue("quire-service:gateway")
    expired = cluster_ca.issue("quire-service:gateway", not_after=now - datetime.timedelta(hours=1))
    wrong_name_server, wrong_name_key = cluster_ca.issue("quire-service:bookie", hosts=("elsewhere.example",))
    client = (bundle.cert("client-admin").read_bytes(), bundle.key("client-admin").read_bytes())
    operator = (bundle.cert("operator").read_bytes(), bundle.key("operator").read_bytes())

    for name, process in tls_cluster.processes.items():
        target = process.health_target
        if target is None:
            continue
        # Client certificates (the client CA) get through the gateways' handshake only.
        valid = client if name.startswith("gateway") else operator
        assert not health_ok(target, None), f"{name} accepted plaintext"
        assert not health_ok(target, creds(bundle.ca)), f"{name} accepted a client without a certificate"
        assert not health_ok(target, creds(bundle.ca, *foreign)), f"{name} accepted a foreign CA's certificate"
        assert not health_ok(target, creds(bundle.ca, *expired)), f"{name} accepted an expired certificate"
        assert not health_ok(target, creds(ca_file, *valid)), f"{name} was trusted though signed by another CA"
        assert health_ok(target, creds(bundle.ca, *valid)), f"{name} refused a valid certificate"
        if not name.startswith("gateway"):
            assert not health_ok(target, creds(bundle.ca, *client)), f"{name} accepted the client CA"

    # A server whose certificate names another host is refused by clients,
    # though its CA is trusted: a valid client hangs up on it.
    impostor = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(), impostor)
    port = impostor.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(wrong_name_key, wrong_name_server)]))
    impostor.start()
    try:
        assert not health_ok(f"127.0.0.1:{port}", creds(bundle.ca, *valid)), "a wrong-name server was trusted"
    finally:
        impostor.stop(0)


def test_roles_are_refused_exactly_what_they_lack(tls_cluster: LocalCluster, bundle: CertBundle) -> None:
    with client_for(tls_cluster, bundle, "client-admin") as admin:
        ledger = admin.create_ledger(scope_id=7)
        from quire_api.ids import LedgerId

        ledger_id = LedgerId(ledger.ledger_id.scope_id, ledger.ledger_id.ledger_id)
        admin.add_entry(ledger_id, b"by admin")

    with client_for(tls_cluster, bundle, "client-reader") as reader:
        assert [e.payload for e in reader.read(ledger_id, 0, 0)] == [b"by admin"]
        with pytest.raises(PermissionDeniedError) as denied:
            reader.add_entry(ledger_id, b"no")
        assert denied.value.reason == "ERROR_REASON_PERMISSION_DENIED_ROLE"
        assert "'write'" in denied.value.message and "scope 7" in denied.value.message
        with pytest.raises(PermissionDeniedError):
            reader.create_ledger(scope_id=7)
        with pytest.raises(PermissionDeniedError):
            reader.put_blob(b"x", scope_id=7)
        with pytest.raises(PermissionDeniedError):
            reader.append_all(ledger_id, [b"streamed"])
        with pytest.raises(PermissionDeniedError):
            reader.delete_ledger(ledger_id)

    with client_for(tls_cluster, bundle, "client-writer") as writer:
        writer.add_entry(ledger_id, b"by writer")
        assert writer.append_all(ledger_id, [b"streamed by writer"]) >= 0
        blob = writer.put_blob(b"blob", scope_id=7)
        assert writer.get_blob(blob) == b"blob"
        with pytest.raises(PermissionDeniedError) as denied:
            writer.delete_ledger(ledger_id)
        assert "'admin'" in denied.value.message
        with pytest.raises(PermissionDeniedError):
            writer.recover_ledger(ledger_id)

    # Tokens: roles per scope; a token wins over the certificate it rides with.
    scoped = bundle.token("tenant-7", {"7": ["writer"]})
    with client_for(tls_cluster, bundle, "client-reader", token=scoped) as tenant:
        tenant.add_entry(ledger_id, b"by token")
        with pytest.raises(PermissionDeniedError) as denied:
            tenant.create_ledger(scope_id=8)
        assert "scope 8" in denied.value.message
        with pytest.raises(PermissionDeniedError) as denied:
            list(tenant.list_ledgers())
        assert "every scope" in denied.value.message

    expired = bundle.token("late", {"*": ["admin"]}, ttl_seconds=-60)
    with client_for(tls_cluster, bundle, "client-admin", token=expired) as late:
        with pytest.raises(UnauthenticatedError) as unauthenticated:
            late.read(ledger_id, 0, 0).__next__()
        assert "expired" in unauthenticated.value.message
    forged = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4IiwiZXhwIjo5OTk5OTk5OTk5fQ.c2lnbmF0dXJl"
    with client_for(tls_cluster, bundle, "client-admin", token=forged) as forger:
        with pytest.raises(UnauthenticatedError):
            forger.create_ledger()

    # A service's own certificate is no client credential at the gateway.
    with client_for(tls_cluster, bundle, "placement") as service:
        with pytest.raises(UnauthenticatedError) as unauthenticated:
            service.create_ledger()
        assert unauthenticated.value.reason == "ERROR_REASON_CLIENT_IDENTITY_REQUIRED"

    with client_for(tls_cluster, bundle, "client-admin") as admin:
        admin.delete_ledger(ledger_id)


def test_every_request_of_a_read_entry_stream_is_authorized(tls_cluster: LocalCluster, bundle: CertBundle) -> None:
    """Not only the first message: a reader of scope 7 gets its answers until the
    stream's first request for a ledger of scope 8, which ends the stream
    PERMISSION_DENIED after the answers before it (docs/security.md). The
    positive control: the same stream from an admin is answered in full."""
    from quire_api.ids import LedgerId, ledger_id_to_proto
    from quire_client.errors import translate
    from quire_proto.gateway.v1 import ledger_pb2

    ledgers: dict[int, LedgerId] = {}
    with client_for(tls_cluster, bundle, "client-admin") as admin:
        for scope in (7, 8):
            created = admin.create_ledger(scope_id=scope)
            ledgers[scope] = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
            admin.add_entry(ledgers[scope], b"scope %d" % scope)

    def requests() -> list[ledger_pb2.ReadEntryRequest]:
        return [
            ledger_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(ledgers[scope]), entry_id=0)
            for scope in (7, 7, 8, 7)
        ]

    tenant_token = bundle.token("tenant-7", {"7": ["reader"]})  # wins over the certificate it rides with
    with client_for(tls_cluster, bundle, "client-reader", token=tenant_token) as tenant:
        answers = []
        with pytest.raises(grpc.RpcError) as refused:
            for answer in tenant.ledgers.ReadEntryStream(iter(requests()), timeout=30):
                answers.append(answer)
        assert [a.entry.payload for a in answers] == [b"scope 7", b"scope 7"]
        denied = translate(refused.value)
        assert isinstance(denied, PermissionDeniedError), denied
        assert denied.reason == "ERROR_REASON_PERMISSION_DENIED_ROLE" and "scope 8" in denied.message
        assert tenant.read_entry(ledgers[7], 0).payload == b"scope 7"
        with pytest.raises(PermissionDeniedError):
            tenant.read_entry(ledgers[8], 0)
        with pytest.raises(PermissionDeniedError):
            list(tenant.read_entries_by_id(ledgers[8], [0]))  # refused on the first message

    with client_for(tls_cluster, bundle, "client-admin") as admin:
        answered = list(admin.ledgers.ReadEntryStream(iter(requests()), timeout=30))
        assert [a.entry.payload for a in answered] == [b"scope 7", b"scope 7", b"scope 8", b"scope 7"]
        for ledger in ledgers.values():
            admin.delete_ledger(ledger)


def test_the_plaintext_probe_port_answers_health_and_nothing_else(tls_cluster: LocalCluster) -> None:
    """Kubernetes' gRPC probes cannot speak TLS: QUIRE_HEALTH_PROBE_PORT serves
    grpc.health.v1 in plaintext and refuses every other call there."""
    from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc

    probe = f"127.0.0.1:{PROBE_PORT}"
    assert health_ok(probe, None)
    with grpc.insecure_channel(probe) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            bookie_pb2_grpc.BookieServiceStub(channel).GetBookieInfo(bookie_pb2.GetBookieInfoRequest(), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "probe port" in (refused.value.details() or "")
    assert not health_ok(tls_cluster.bookie_id("bookie-1"), None)  # the main port stays TLS-only


def service_authority(bundle: CertBundle) -> Authority:
    return load_authority(bundle.ca, bundle.directory / "ca-key.pem")


def client_authority(bundle: CertBundle) -> Authority:
    return load_authority(bundle.client_ca, bundle.directory / "client-ca-key.pem")


def registry_call(
    cluster: LocalCluster, bundle: CertBundle, identity: tuple[bytes, bytes], call: Callable[[Any], Any]
) -> Any:
    """`call(registry stub)` over mutual TLS with `identity` (certificate, key)."""
    with grpc.secure_channel(cluster.registry_target, creds(bundle.ca, *identity)) as channel:
        return call(registry_pb2_grpc.RegistryServiceStub(channel))


def refusal(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    return refused.value


def list_bookies(stub: Any) -> Any:
    return stub.ListBookies(registry_pb2.ListBookiesRequest(), timeout=10)


def creates_work(cluster: LocalCluster, bundle: CertBundle) -> bool:
    with client_for(cluster, bundle, "client-admin") as admin:
        try:
            admin.create_ledger(scope_id=7, password=b"secret")
        except QuireClientError as exc:
            if exc.code != grpc.StatusCode.UNAVAILABLE:
                raise
            return False
    return True


@pytest.fixture(scope="module")
def ledger_in_scope_7(tls_cluster: LocalCluster, bundle: CertBundle) -> Any:
    with client_for(tls_cluster, bundle, "client-admin") as admin:
        return admin.create_ledger(scope_id=7, password=b"secret")


def test_internal_rpcs_refuse_client_certificates(tls_cluster: LocalCluster, bundle: CertBundle) -> None:
    # The client CA is not trusted by internal services: refused at the handshake.
    client = (bundle.cert("client-admin").read_bytes(), bundle.key("client-admin").read_bytes())
    refused = refusal(lambda: registry_call(tls_cluster, bundle, client, list_bookies))
    assert refused.code() == grpc.StatusCode.UNAVAILABLE
    # A client-CA certificate that names itself a service is no service, at the handshake of an internal
    # service, nor where the client CA is trusted: the gateway's relay.
    posing = client_authority(bundle).issue("quire-service:gateway", hosts=())
    refused = refusal(lambda: registry_call(tls_cluster, bundle, posing, list_bookies))
    assert refused.code() == grpc.StatusCode.UNAVAILABLE
    from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc

    with client_for(tls_cluster, bundle, "client-admin") as admin:
        created = admin.create_ledger(scope_id=7)
    with grpc.secure_channel(tls_cluster.gateway_target, creds(bundle.ca, *posing)) as channel:
        refused = refusal(
            lambda: ledger_pb2_grpc.LedgerServiceStub(channel).AddEntry(
                ledger_pb2.AddEntryRequest(ledger_id=created.ledger_id, payload=b"client CA posing as a gateway"),
                metadata=(("quire-forwarded-by", "gateway-x"),),
                timeout=10,
            )
        )
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "the service CA (QUIRE_TLS_CA) did not issue it" in (refused.details() or "")


def test_each_internal_rpc_answers_only_the_services_allowed_to_call_it(
    tls_cluster: LocalCluster, bundle: CertBundle, ledger_in_scope_7: Any
) -> None:
    def identity(name: str) -> tuple[bytes, bytes]:
        return bundle.cert(name).read_bytes(), bundle.key(name).read_bytes()

    assert len(registry_call(tls_cluster, bundle, identity("gateway"), list_bookies).bookies) == 3
    assert len(registry_call(tls_cluster, bundle, identity("operator"), list_bookies).bookies) == 3
    # A bookie registers itself; it has no business listing the others.
    refused = refusal(lambda: registry_call(tls_cluster, bundle, identity("bookie"), list_bookies))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "accepts calls from quire-service:gateway, quire-service:operator, quire-service:placement" in (
        refused.details() or ""
    )
    assert "not from quire-service:bookie" in (refused.details() or "")

    def read_metadata(stub: Any) -> Any:
        return stub.GetLedgerMetadata(
            registry_pb2.GetLedgerMetadataRequest(ledger_id=ledger_in_scope_7.ledger_id), timeout=10
        )

    assert registry_call(tls_cluster, bundle, identity("gateway"), read_metadata).metadata.secrets.master_key
    # A service identity Quire never issued, from the service CA: refused, not judged by its prefix.
    forged = service_authority(bundle).issue("quire-service:not-a-real-service", hosts=())
    refused = refusal(lambda: registry_call(tls_cluster, bundle, forged, read_metadata))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "not from quire-service:not-a-real-service" in (refused.details() or "")
    # Placement may not create ledgers' metadata, the operator may not fence on a bookie.
    refused = refusal(
        lambda: registry_call(
            tls_cluster,
            bundle,
            identity("placement"),
            lambda stub: stub.CreateLedgerMetadata(registry_pb2.CreateLedgerMetadataRequest(), timeout=10),
        )
    )
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc

    bookie_target = tls_cluster.bookie_id("bookie-1")
    with grpc.secure_channel(bookie_target, creds(bundle.ca, *identity("operator"))) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        assert stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest(), timeout=10).total_disk_bytes > 0
        refused = refusal(
            lambda: stub.FenceLedger(
                bookie_pb2.FenceLedgerRequest(ledger_id=ledger_in_scope_7.ledger_id, master_key=b"x"), timeout=10
            )
        )
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "FenceLedger accepts calls from quire-service:gateway, not from quire-service:operator" in (
        refused.details() or ""
    )


def test_a_certificate_with_several_names_is_not_judged_by_the_first(
    tls_cluster: LocalCluster, bundle: CertBundle
) -> None:
    authority = service_authority(bundle)
    two_services = authority.issue("quire-service:gateway", hosts=(), uris=("quire-service:bookie",))
    refused = refusal(lambda: registry_call(tls_cluster, bundle, two_services, list_bookies))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "several service names (quire-service:bookie, quire-service:gateway)" in (refused.details() or "")
    disagreeing = authority.issue("client-admin", hosts=(), uris=("quire-service:gateway",))
    refused = refusal(lambda: registry_call(tls_cluster, bundle, disagreeing, list_bookies))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "its names disagree" in (refused.details() or "")
    two_common_names = authority.issue("quire-service:gateway", hosts=(), more_common_names=("client-admin",))
    refused = refusal(lambda: registry_call(tls_cluster, bundle, two_common_names, list_bookies))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "several common names" in (refused.details() or "")
    # At the gateway, a client certificate is not mapped to roles by whichever common name comes first.
    cert, key = client_authority(bundle).issue("client-reader", hosts=(), more_common_names=("client-admin",))
    tls_dir = tls_cluster.data_dir / "two-common-names"
    tls_dir.mkdir(exist_ok=True)
    (tls_dir / "cert.pem").write_bytes(cert)
    (tls_dir / "key.pem").write_bytes(key)
    tls = ClientTls(bundle.ca, tls_dir / "cert.pem", tls_dir / "key.pem")
    with QuireClient(tls_cluster.gateway_target, timeout=30, tls=tls) as ambiguous:
        with pytest.raises(UnauthenticatedError) as unauthenticated:
            ambiguous.create_ledger(scope_id=7)
    assert "several common names (client-admin, client-reader)" in unauthenticated.value.message
    # The same name twice (common name and URI) is one identity.
    repeated = authority.issue("quire-service:gateway", hosts=(), uris=("quire-service:gateway",))
    assert len(registry_call(tls_cluster, bundle, repeated, list_bookies).bookies) == 3


def test_with_the_allow_list_off_any_service_identity_reads_ledger_metadata(
    tls_cluster: LocalCluster, bundle: CertBundle, ledger_in_scope_7: Any
) -> None:
    """Positive control: QUIRE_RPC_ALLOWLIST_ENABLED=false on the registry lets
    the forged identity the allow-list refuses read a ledger's keys."""
    forged = service_authority(bundle).issue("quire-service:not-a-real-service", hosts=())

    def read_metadata(stub: Any) -> Any:
        return stub.GetLedgerMetadata(
            registry_pb2.GetLedgerMetadataRequest(ledger_id=ledger_in_scope_7.ledger_id), timeout=10
        )

    registry = tls_cluster.processes["registry"]
    registry.env["QUIRE_RPC_ALLOWLIST_ENABLED"] = "false"
    try:
        tls_cluster.restart("registry")
        assert registry_call(tls_cluster, bundle, forged, read_metadata).metadata.secrets.master_key
    finally:
        del registry.env["QUIRE_RPC_ALLOWLIST_ENABLED"]
        tls_cluster.restart("registry")
        # Later tests create ledgers: wait until placement's view of the bookies, which follows
        # the registry's watch a moment behind their registrations, can place one again.
        tls_cluster.wait_bookies_registered(len(tls_cluster.bookie_names))
        wait_until("ledger creates after the registry restarted", lambda: creates_work(tls_cluster, bundle))
    refused = refusal(lambda: registry_call(tls_cluster, bundle, forged, read_metadata))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED


def test_admin_http_needs_the_admin_role_over_https(tls_cluster: LocalCluster, bundle: CertBundle) -> None:
    context = ssl.create_default_context(cafile=str(bundle.ca))
    for port in (tls_cluster.ports.gateway_http, tls_cluster.ports.registry_http, tls_cluster.ports.http_port(0)):
        url = f"https://127.0.0.1:{port}/status"

        def status(token: str | None, url: str = url) -> int:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=context) as r:
                    return int(r.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        assert status(None) == 401
        assert status(bundle.token("ops", {"*": ["admin"]}, ttl_seconds=-10)) == 401
        assert status(bundle.token("viewer", {"*": ["reader"]})) == 403
        assert status(bundle.token("ops", {"7": ["admin"]})) == 403  # admin of one scope is not a cluster admin
        assert status(bundle.token("ops", {"*": ["admin"]})) == 200
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP is not served
            urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=3)


def test_the_command_line_speaks_tls_with_certificates_and_tokens(
    tls_cluster: LocalCluster, bundle: CertBundle
) -> None:
    def quire(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "quire_client.cli", "--gateway", tls_cluster.gateway_target]
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)

    as_writer = ["--tls-ca", str(bundle.ca), "--tls-cert", str(bundle.cert("client-writer"))]
    as_writer += ["--tls-key", str(bundle.key("client-writer"))]
    created = quire(*as_writer, "ledger", "create", "--scope", "11")
    assert created.returncode == 0, created.stderr
    ledger = created.stdout.strip()
    token = quire("dev", "token", "--certs", str(bundle.directory), "--role", "11=reader").stdout.strip()
    refused = quire(*as_writer, "--token", token, "ledger", "append", ledger, "x")
    assert refused.returncode == 1
    assert "PERMISSION_DENIED [PERMISSION_DENIED_ROLE]" in refused.stderr and "Traceback" not in refused.stderr
    # Break-glass (--direct): cluster commands reach internal services as the operator's service identity.
    as_operator = ["--direct", "--registry", tls_cluster.registry_target, "--placement", tls_cluster.placement_target]
    as_operator += ["--tls-ca", str(bundle.ca), "--tls-cert", str(bundle.cert("operator"))]
    as_operator += ["--tls-key", str(bundle.key("operator"))]
    listed = quire(*as_operator, "bookie", "list", "-o", "json")
    assert listed.returncode == 0 and tls_cluster.bookie_id("bookie-1") in listed.stdout, listed.stderr
    weights = quire(*as_operator, "placement", "weights")
    assert weights.returncode == 0, weights.stderr
    as_bookie = [*as_operator[:5], "--tls-ca", str(bundle.ca), "--tls-cert", str(bundle.cert("bookie"))]
    as_bookie += ["--tls-key", str(bundle.key("bookie"))]
    refused = quire(*as_bookie, "placement", "weights")  # GetPlacementWeights is not a bookie's
    assert refused.returncode != 0 and "SERVICE_IDENTITY_REQUIRED" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    plaintext = quire("ledger", "read", ledger)
    # A plaintext client cannot even connect to a TLS gateway: unavailable, exit status 3.
    assert plaintext.returncode == 3 and "UNAVAILABLE" in plaintext.stderr and "Traceback" not in plaintext.stderr


def test_the_admin_api_needs_the_admin_role_on_every_scope_never_a_service_identity(
    tls_cluster: LocalCluster, bundle: CertBundle
) -> None:
    """Only the gateway's address and a client credential with admin on "*":
    every admin command works; a writer, a reader's token, an admin of one
    scope and the operator's service certificate are refused."""
    gateway = tls_cluster.gateway_target

    def quire(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "quire_client.cli", "--gateway", gateway, "--tls-ca", str(bundle.ca)]
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)

    def identity(name: str) -> list[str]:
        return ["--tls-cert", str(bundle.cert(name)), "--tls-key", str(bundle.key(name))]

    as_admin = identity("client-admin")
    listed = quire(*as_admin, "bookie", "list", "-o", "json")
    assert listed.returncode == 0 and tls_cluster.bookie_id("bookie-1") in listed.stdout, listed.stderr
    for command in (["bookieinfo"], ["placement", "weights"], ["recovery", "status"], ["version"]):
        answered = quire(*as_admin, *command, "-o", "json")
        assert answered.returncode == 0, (command, answered.stderr)
    status = quire(*as_admin, "cluster", "status", "-o", "json")
    report = json.loads(status.stdout)
    assert {c["certificate"] for c in report["certificates"]} == {"service", "ca", "client_ca"}, report
    assert all(c["days_left"] > 1 for c in report["certificates"])
    assert all(s["health"] == "SERVING" for s in report["services"]), report["services"]
    assert len([s for s in report["services"] if s["service"] == "bookie"]) == len(tls_cluster.bookie_names)

    admin_token = bundle.token("ops", {"*": ["admin"]})
    assert quire(*identity("client-reader"), "--token", admin_token, "bookie", "list").returncode == 0
    refusals = {
        "writer certificate": identity("client-writer"),
        "reader token": [*identity("client-admin"), "--token", bundle.token("viewer", {"*": ["reader"]})],
        "admin of scope 7 only": [*identity("client-admin"), "--token", bundle.token("ops", {"7": ["admin"]})],
    }
    for who, credentials in refusals.items():
        refused = quire(*credentials, "bookie", "list")
        assert refused.returncode == 1, (who, refused.stderr)
        assert "PERMISSION_DENIED [PERMISSION_DENIED_ROLE]" in refused.stderr and "Traceback" not in refused.stderr
    # The operator's service identity (service CA) holds no roles at the gateway.
    as_service = quire(*identity("operator"), "bookie", "list")
    assert as_service.returncode == 1 and "UNAUTHENTICATED" in as_service.stderr, as_service.stderr
    assert "Traceback" not in as_service.stderr


def identity_files(cluster: LocalCluster, label: str, identity: tuple[bytes, bytes]) -> ClientTls:
    """A certificate and key written where a QuireClient can read them."""
    directory = cluster.data_dir / "identities" / label.replace(":", "_").replace("/", "_")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cert.pem").write_bytes(identity[0])
    (directory / "key.pem").write_bytes(identity[1])
    assert cluster.tls is not None
    return ClientTls(cluster.tls.ca, directory / "cert.pem", directory / "key.pem")


def public_methods() -> list[tuple[str, bool, bool]]:
    """(path, request streamed, response streamed) of every LedgerService and BlobService RPC."""
    from quire_proto.gateway.v1 import blob_pb2, ledger_pb2

    methods = []
    for module in (ledger_pb2, blob_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                methods.append((path, method.client_streaming, method.server_streaming))
    return methods


def call_raw(channel: grpc.Channel, path: str, request_streamed: bool, response_streamed: bool) -> None:
    """Call `path` with an empty message: the gateway decides who the caller is before reading it."""
    if request_streamed and response_streamed:
        list(channel.stream_stream(path)(iter([b""]), timeout=20))
    elif request_streamed:
        channel.stream_unary(path)(iter([b""]), timeout=20)
    elif response_streamed:
        list(channel.unary_stream(path)(b"", timeout=20))
    else:
        channel.unary_unary(path)(b"", timeout=20)


def what_it_may_do(client: QuireClient, ledger: Any, deletable: Any) -> set[str]:
    """The permissions a client exercises with success: read (list every scope, read scope 7's
    entries), write (create in scope 7), admin (delete a ledger). Any other outcome than success or
    PERMISSION_DENIED fails the test."""
    from quire_api.ids import LedgerId

    def allowed(call: Callable[[], Any]) -> bool:
        try:
            call()
            return True
        except PermissionDeniedError as denied:
            assert denied.reason == "ERROR_REASON_PERMISSION_DENIED_ROLE", denied
            return False

    def read() -> None:
        assert any(m.ledger_id.scope_id == 7 for m in client.list_ledgers())
        assert [e.payload for e in client.read(LedgerId(ledger.ledger_id.scope_id, ledger.ledger_id.ledger_id))]

    def delete() -> None:
        client.delete_ledger(LedgerId(deletable.ledger_id.scope_id, deletable.ledger_id.ledger_id))

    checks = {"read": read, "write": lambda: client.create_ledger(scope_id=7), "admin": delete}
    return {permission for permission, call in checks.items() if allowed(call)}


@pytest.fixture(scope="module")
def tenant_ledger(tls_cluster: LocalCluster, bundle: CertBundle) -> Any:
    """A ledger of scope 7 with one entry, which no forged identity may read."""
    from quire_api.ids import LedgerId

    with client_for(tls_cluster, bundle, "client-admin") as admin:
        created = admin.create_ledger(scope_id=7)
        admin.add_entry(LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id), b"tenant 7's data")
    return created


def test_no_service_name_gets_client_roles_at_the_gateway_for_any_rpc(
    tls_cluster: LocalCluster, bundle: CertBundle
) -> None:
    """Every service name, from either CA, in the common name or in a SAN: refused at every public
    RPC with ERROR_REASON_CLIENT_IDENTITY_REQUIRED, a bearer token beside it or not."""
    from quire_client.errors import translate
    from quire_common.allowlist import SERVICE_IDENTITIES

    admin_token = bundle.token("ops", {"*": ["admin"]})
    identities: dict[str, tuple[bytes, bytes]] = {}
    for service in sorted(SERVICE_IDENTITIES):
        name = f"quire-service:{service}"
        identities[f"{name} from the client CA"] = client_authority(bundle).issue(name, hosts=())
        identities[f"{name} from the service CA"] = service_authority(bundle).issue(name, hosts=())
        identities[f"{name} in a DNS SAN, client CA"] = client_authority(bundle).issue("client-admin", hosts=(name,))
    identities["quire-service:operator as quire dev certs issues it"] = (
        bundle.cert("operator").read_bytes(),
        bundle.key("operator").read_bytes(),
    )
    methods = public_methods()
    names = {path.rsplit("/", 1)[-1] for path, _, _ in methods}
    assert {"ListLedgers", "ReadEntries", "AppendEntries", "DeleteLedger", "OpenLedger", "PutBlob"} <= names
    for label, identity in identities.items():
        for token in (None, admin_token):
            credentials = creds(bundle.ca, *identity)
            if token:
                credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
            with grpc.secure_channel(tls_cluster.gateway_target, credentials) as channel:
                for path, request_streamed, response_streamed in methods:
                    with pytest.raises(grpc.RpcError) as refused:
                        call_raw(channel, path, request_streamed, response_streamed)
                    error = translate(refused.value)
                    where = f"{label} (token: {bool(token)}) at {path}"
                    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, where
                    assert error.reason == "ERROR_REASON_CLIENT_IDENTITY_REQUIRED", where


def test_each_client_name_gets_exactly_its_roles_and_only_from_the_client_ca(
    tls_cluster: LocalCluster, bundle: CertBundle, tenant_ledger: Any
) -> None:
    from quire_client.devcerts import CLIENT_IDENTITIES
    from quire_common.auth import ROLE_PERMISSIONS

    for name, roles in CLIENT_IDENTITIES.items():
        expected = set().union(*(ROLE_PERMISSIONS[role] for role in roles["*"]))
        with client_for(tls_cluster, bundle, "client-admin") as admin:
            deletable = admin.create_ledger(scope_id=7)
        genuine = identity_files(tls_cluster, f"{name}-client-ca", client_authority(bundle).issue(name, hosts=()))
        with QuireClient(tls_cluster.gateway_target, timeout=30, tls=genuine) as client:
            assert what_it_may_do(client, tenant_ledger, deletable) == expected, name
        # The same name from the service CA is no client.
        wrong_ca = identity_files(tls_cluster, f"{name}-service-ca", service_authority(bundle).issue(name, hosts=()))
        with QuireClient(tls_cluster.gateway_target, timeout=30, tls=wrong_ca) as client:
            with pytest.raises(UnauthenticatedError) as refused:
                list(client.list_ledgers())
        assert refused.value.reason == "ERROR_REASON_CLIENT_IDENTITY_REQUIRED", name
        assert "the client CA (QUIRE_TLS_CLIENT_CA) did not issue it" in refused.value.message
    # A client-CA name the mapping does not list is not a credential.
    unmapped = identity_files(tls_cluster, "unmapped", client_authority(bundle).issue("client-nobody", hosts=()))
    with QuireClient(tls_cluster.gateway_target, timeout=30, tls=unmapped) as client:
        with pytest.raises(UnauthenticatedError) as refused:
            list(client.list_ledgers())
    assert refused.value.reason == "ERROR_REASON_UNAUTHENTICATED" and "not mapped" in refused.value.message


def test_roles_by_common_name_alone_let_a_forged_service_name_read_every_tenant(
    tls_cluster: LocalCluster, bundle: CertBundle, tenant_ledger: Any, tmp_path: Path
) -> None:
    """Positive control: a gateway that maps roles by the common name alone, with the mapping
    `quire dev certs` wrote before (`quire-service:operator` reader on every scope), lets a
    client-CA certificate named `quire-service:operator` list every ledger and read scope 7."""
    import json

    from quire_api.ids import LedgerId
    from quire_client.devcerts import CLIENT_IDENTITIES

    old_mapping = tmp_path / "old-client-roles.json"
    old_mapping.write_text(json.dumps({"quire-service:operator": {"*": ["reader"]}, **CLIENT_IDENTITIES}))
    forged = identity_files(
        tls_cluster, "forged-operator", client_authority(bundle).issue("quire-service:operator", hosts=())
    )
    ledger = LedgerId(tenant_ledger.ledger_id.scope_id, tenant_ledger.ledger_id.ledger_id)
    control = tls_cluster.gateway_names[1]
    process = tls_cluster.processes[control]
    unsafe = {
        "QUIRE_GATEWAY_FAULT_UNSAFE_ROLES_BY_COMMON_NAME": "true",
        "QUIRE_AUTH_CLIENT_CERT_ROLES": str(old_mapping),
    }
    saved = {key: process.env.get(key) for key in unsafe}
    process.env.update(unsafe)
    try:
        tls_cluster.restart(control)
        target = tls_cluster.gateway_targets[1]
        with QuireClient(target, timeout=30, tls=forged) as attacker:
            assert any(m.ledger_id == tenant_ledger.ledger_id for m in attacker.list_ledgers())
            assert [e.payload for e in attacker.read(ledger)] == [b"tenant 7's data"]
    finally:
        for key, value in saved.items():
            if value is None:
                process.env.pop(key, None)
            else:
                process.env[key] = value
        tls_cluster.restart(control)
    # The same certificate at a gateway as it runs: refused.
    with QuireClient(tls_cluster.gateway_target, timeout=30, tls=forged) as attacker:
        with pytest.raises(UnauthenticatedError) as refused:
            list(attacker.read(ledger))
    assert refused.value.reason == "ERROR_REASON_CLIENT_IDENTITY_REQUIRED"


def test_a_mapping_that_names_a_service_identity_stops_the_gateway(
    tls_cluster: LocalCluster, bundle: CertBundle, tmp_path: Path
) -> None:
    import json

    mapping = tmp_path / "client-roles.json"
    mapping.write_text(json.dumps({"quire-service:operator": {"*": ["reader"]}}))
    env = dict(tls_cluster.processes[tls_cluster.gateway_names[1]].env)
    env.update({"QUIRE_AUTH_CLIENT_CERT_ROLES": str(mapping), "QUIRE_GATEWAY_ADDRESS": f"127.0.0.1:{free_port()}"})
    env["QUIRE_GATEWAY_HTTP_PORT"] = str(free_port())
    started = subprocess.run(
        [sys.executable, "-m", "quire_gateway"], env=env, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 2, started.stderr[-2000:]
    assert "QUIRE_AUTH_CLIENT_CERT_ROLES" in started.stderr and "'quire-service:operator'" in started.stderr
    assert "Traceback" not in started.stderr


def test_certificate_rotation_is_picked_up_without_restart(
    tls_cluster: LocalCluster, bundle: CertBundle, tmp_path: Path
) -> None:
    """Re-issue every certificate from a new CA, in place. New connections
    use the new files at once; the old CA is no longer trusted."""
    old = tmp_path / "old"
    shutil.copytree(bundle.directory, old)
    new = write_dev_certs(tmp_path / "new")
    pids = {name: tls_cluster.pid(name) for name in tls_cluster.processes}
    for path in new.directory.iterdir():
        shutil.copy(path, bundle.directory / path.name)
    old_bundle = CertBundle(old)
    old_creds = creds(
        old_bundle.ca, old_bundle.cert("client-admin").read_bytes(), old_bundle.key("client-admin").read_bytes()
    )
    new_creds = creds(new.ca, new.cert("client-admin").read_bytes(), new.key("client-admin").read_bytes())
    started = time.monotonic()
    deadline = started + 10
    target = tls_cluster.gateway_target
    while not health_ok(target, new_creds) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert health_ok(target, new_creds), "the new certificate set was not picked up"
    assert not health_ok(target, old_creds), "the old CA is still trusted after rotation"
    # Services reach each other again with the new certificates, and nothing restarted.
    with client_for(tls_cluster, bundle, "client-admin") as admin:
        ledger = admin.create_ledger(scope_id=9)
        assert ledger.ledger_id.scope_id == 9
    assert pids == {name: tls_cluster.pid(name) for name in tls_cluster.processes}
    # The admin HTTPS endpoints reload too (they poll the files every second).
    context = ssl.create_default_context(cafile=str(new.ca))
    url = f"https://127.0.0.1:{tls_cluster.ports.gateway_http}/status"
    # The token key is read at start only (docs/security.md): sign with the old secret.
    token = old_bundle.token("ops", {"*": ["admin"]})
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    while True:
        try:
            with urllib.request.urlopen(request, context=context, timeout=3) as response:
                assert response.status == 200
                break
        except urllib.error.URLError:
            if time.monotonic() > deadline + 5:
                raise
            time.sleep(0.2)
