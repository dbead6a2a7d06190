"""etcd as `quire cluster up --tls` runs it: client and peer TLS, client
certificates required, authentication on, root kept from every service, the
registry's user limited to its cluster's prefix; and no ledger password in
what that user (or anyone else reading etcd) sees."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_api.ids import LedgerId
from quire_client import ClientTls, PermissionDeniedError, QuireClient
from quire_client.cluster import LocalCluster, Ports, etcd_command
from quire_client.devcerts import CertBundle, write_dev_certs
from quire_client.etcd_auth import REGISTRY_USER, EtcdAuthError, EtcdctlAccess, lock_down
from quire_proto.common.v1 import common_pb2
from quire_registry.keys import Keys
from quire_registry.store import EtcdAccess, EtcdStore

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PASSWORD = b"p4ss-w0rd-only-the-client-knows"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CertBundle:
    return write_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, bundle: CertBundle) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("locked-etcd")
    local = LocalCluster(data_dir, Ports.free(), extra_env={"QUIRE_BOOKIE_TTL_SECONDS": "3"}, tls=bundle)
    local.start()
    try:
        yield local
    finally:
        local.stop()


def etcdctl(cluster: LocalCluster, bundle: CertBundle, *args: str, cert: str | None = "registry", user: str = "",
            scheme: str = "https") -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    binary = shutil.which("etcdctl") or "/usr/bin/etcdctl"
    flags = [f"--endpoints={scheme}://127.0.0.1:{cluster.ports.etcd}", "--dial-timeout=3s", "--command-timeout=5s"]
    if scheme == "https":
        flags.append(f"--cacert={bundle.ca}")
    if cert is not None:
        flags += [f"--cert={bundle.cert(cert)}", f"--key={bundle.key(cert)}"]
    if user:
        flags.append(f"--user={user}")
    env = {**os.environ, "ETCDCTL_API": "3"}
    return subprocess.run([binary, *flags, *args], capture_output=True, timeout=60, env=env)


def registry_user(cluster: LocalCluster) -> str:
    password = (cluster.etcd_secrets_dir / "etcd-registry-password").read_text().strip()
    return f"{REGISTRY_USER}:{password}"


def client(cluster: LocalCluster, bundle: CertBundle) -> QuireClient:
    tls = ClientTls(bundle.ca, bundle.cert("client-admin"), bundle.key("client-admin"))
    return QuireClient(cluster.gateway_target, timeout=30, tls=tls)


def test_etcd_refuses_anyone_without_a_certificate_and_a_user(cluster: LocalCluster, bundle: CertBundle) -> None:
    plaintext = etcdctl(cluster, bundle, "get", "/quire/", "--prefix", cert=None, scheme="http")
    assert plaintext.returncode != 0
    no_certificate = etcdctl(cluster, bundle, "get", "/quire/", "--prefix", cert=None)
    assert no_certificate.returncode != 0
    # With a valid certificate and no user, etcd takes the certificate's common
    # name as the user: no user is called quire-service:registry.
    certificate_only = etcdctl(cluster, bundle, "get", "/quire/local/", "--prefix")
    assert certificate_only.returncode != 0, certificate_only.stdout
    assert b"permission denied" in certificate_only.stderr or b"not found" in certificate_only.stderr
    guessed_root = etcdctl(cluster, bundle, "get", "/quire/local/", "--prefix", user="root:guess")
    assert guessed_root.returncode != 0 and b"authentication failed" in guessed_root.stderr


def test_the_registry_user_holds_its_prefix_and_nothing_else(cluster: LocalCluster, bundle: CertBundle) -> None:
    user = registry_user(cluster)
    assert etcdctl(cluster, bundle, "get", "/quire/local/", "--prefix", "--keys-only", user=user).returncode == 0
    for refused in (
        ["get", "/quire/", "--prefix"],
        ["get", "", "--prefix"],
        ["put", "/quire/other/x", "y"],
        ["put", "/elsewhere", "y"],
        ["user", "list"],
        ["role", "grant-permission", "quire-registry-local", "readwrite", "/", "--prefix=true"],
        ["auth", "disable"],
    ):
        result = etcdctl(cluster, bundle, *refused, user=user)
        assert result.returncode != 0, f"{refused} was allowed: {result.stdout!r}"
        assert b"permission denied" in result.stderr, result.stderr


def test_root_is_kept_from_every_service(cluster: LocalCluster, bundle: CertBundle) -> None:
    root_password = (cluster.etcd_secrets_dir / "etcd-root-password").read_text().strip()
    assert oct((cluster.etcd_secrets_dir / "etcd-root-password").stat().st_mode & 0o777) == "0o600"
    for name, process in cluster.processes.items():
        for key, value in process.env.items():
            assert root_password not in value, f"{name} has etcd's root password in {key}"
            assert "etcd-root-password" not in value, f"{name} is pointed at etcd's root password by {key}"
    etcd_settings = {n for n, p in cluster.processes.items() if "QUIRE_ETCD_USER" in p.env}
    assert etcd_settings == {"registry"}
    # The operator holds it, and it works.
    assert etcdctl(cluster, bundle, "user", "list", user=f"root:{root_password}").returncode == 0


def ledger_records(cluster: LocalCluster, bundle: CertBundle) -> bytes:
    result = etcdctl(cluster, bundle, "get", "/quire/local/", "--prefix", user=registry_user(cluster))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_no_ledger_password_in_etcd(cluster: LocalCluster, bundle: CertBundle) -> None:
    with client(cluster, bundle) as quire:
        created = quire.create_ledger(password=PASSWORD, digest_type=common_pb2.DIGEST_TYPE_HMAC)
        assert not created.password and not created.HasField("secrets")
        ledger = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
        assert PASSWORD not in ledger_records(cluster, bundle)
        with pytest.raises(PermissionDeniedError):
            quire.open_ledger(ledger, b"wrong", recovery=True)
        recovered = quire.recover_ledger(ledger, PASSWORD)
        assert recovered.state == common_pb2.LEDGER_STATE_CLOSED
    assert PASSWORD not in ledger_records(cluster, bundle)


async def test_a_record_from_before_keeps_working_and_loses_its_password(
    cluster: LocalCluster, bundle: CertBundle
) -> None:
    """Also the check's control: a record with a plaintext password, as the
    previous version wrote it, shows the password to an etcd reader."""
    with client(cluster, bundle) as quire:
        created = quire.create_ledger(password=PASSWORD, digest_type=common_pb2.DIGEST_TYPE_HMAC)
        ledger = LedgerId(created.ledger_id.scope_id, created.ledger_id.ledger_id)
        assert quire.append_all(ledger, [b"written before the upgrade"]) == 0
    key = Keys(cluster.cluster_name).ledger(ledger)
    store = EtcdStore(
        [f"127.0.0.1:{cluster.ports.etcd}"],
        5.0,
        EtcdAccess(
            ca=bundle.ca.read_bytes(),
            cert=bundle.cert("registry").read_bytes(),
            key=bundle.key("registry").read_bytes(),
            user=REGISTRY_USER,
            password=registry_user(cluster).split(":", 1)[1],
        ),
        Keys(cluster.cluster_name).root,
    )
    await store.connect()
    try:
        current = await store.get(key)
        assert current is not None
        old = common_pb2.LedgerMetadata.FromString(current.value)
        old.ClearField("secrets")
        old.password = PASSWORD
        assert await store.compare_and_swap(key, old.SerializeToString(), current.version) is not None
    finally:
        await store.close()
    assert PASSWORD in ledger_records(cluster, bundle)
    with client(cluster, bundle) as quire:
        with pytest.raises(PermissionDeniedError):
            quire.open_ledger(ledger, b"wrong", recovery=True)
        recovered = quire.recover_ledger(ledger, PASSWORD)  # the next metadata write seals it
        assert recovered.last_entry_id == 0
        assert [e.payload for e in quire.read(ledger, 0, 0)] == [b"written before the upgrade"]
    assert PASSWORD not in ledger_records(cluster, bundle)


def test_without_tls_etcd_stays_open(tmp_path: Path) -> None:
    """The control of the first test: the development etcd (no --tls) answers anyone."""
    binary = shutil.which("etcd") or "/usr/bin/etcd"
    ports = Ports.free()
    command = etcd_command(binary, "open", tmp_path / "etcd", ports.etcd, ports.etcd_peer)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        binary_ctl = shutil.which("etcdctl") or "/usr/bin/etcdctl"
        env = {**os.environ, "ETCDCTL_API": "3"}
        put = [binary_ctl, f"--endpoints=http://127.0.0.1:{ports.etcd}", "put", "/quire/local/x", "open"]
        for _ in range(100):
            if subprocess.run(put, capture_output=True, env=env, timeout=30).returncode == 0:
                break
            import time

            time.sleep(0.2)
        get = [binary_ctl, f"--endpoints=http://127.0.0.1:{ports.etcd}", "get", "/quire/", "--prefix"]
        assert b"open" in subprocess.run(get, capture_output=True, env=env, timeout=30).stdout
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_locking_down_again_is_harmless_and_needs_root(cluster: LocalCluster, bundle: CertBundle) -> None:
    """What the production overlay's init step does on every registry pod start."""
    secrets_dir = cluster.etcd_secrets_dir
    root = (secrets_dir / "etcd-root-password").read_text().strip()
    registry = (secrets_dir / "etcd-registry-password").read_text().strip()
    access = EtcdctlAccess(
        shutil.which("etcdctl") or "/usr/bin/etcdctl",
        [f"https://127.0.0.1:{cluster.ports.etcd}"],
        str(bundle.ca),
        str(bundle.cert("registry")),
        str(bundle.key("registry")),
    )
    assert lock_down(access, cluster.cluster_name, root, registry) == "authentication was on"
    assert (
        etcdctl(
            cluster, bundle, "get", "/quire/local/", "--prefix", "--keys-only", user=registry_user(cluster)
        ).returncode
        == 0
    )
    with pytest.raises(EtcdAuthError, match="neither as root"):
        lock_down(access, cluster.cluster_name, "not-the-root-password", registry)
