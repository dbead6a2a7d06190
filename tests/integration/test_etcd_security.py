"""The registry's etcd access locked down (FAULTS SEC-4): etcd over TLS with
authentication on, a user whose role holds only the cluster's prefix.
Misconfiguration fails at start with a message naming the cause."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import etcd3aio
import pytest
from etcd3aio import prefix_range_end
from etcd3aio.auth import PermissionType

from quire_client.cluster import free_port
from quire_client.devcerts import Authority
from quire_common.config import ConfigError
from quire_registry.keys import Keys
from quire_registry.store import EtcdAccess, EtcdStore

pytestmark = pytest.mark.integration

PASSWORD = "s3cret-for-tests"


@dataclass
class SecureEtcd:
    endpoint: str
    ca: Path
    root_password: str = "root-password"

    def access(self, user: str = "", password: str = "") -> EtcdAccess:
        directory = self.ca.parent
        return EtcdAccess(
            ca=self.ca.read_bytes(),
            cert=(directory / "client.pem").read_bytes(),
            key=(directory / "client-key.pem").read_bytes(),
            user=user,
            password=password,
        )


@pytest.fixture(scope="module")
def secure_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureEtcd]:
    directory = tmp_path_factory.mktemp("secure-etcd")
    authority = Authority.create("etcd test CA")
    (directory / "ca.pem").write_bytes(authority.pem())
    cert, key = authority.issue("etcd")
    (directory / "etcd.pem").write_bytes(cert)
    (directory / "etcd-key.pem").write_bytes(key)
    # The registry's client certificate: etcd verifies it (--client-cert-auth).
    client_cert, client_key = authority.issue("quire-service:registry")
    (directory / "client.pem").write_bytes(client_cert)
    (directory / "client-key.pem").write_bytes(client_key)
    port, peer = free_port(), free_port()
    binary = shutil.which("etcd") or "/usr/bin/etcd"
    client_url, peer_url = f"https://127.0.0.1:{port}", f"http://127.0.0.1:{peer}"
    log = (directory / "etcd.log").open("wb")
    process = subprocess.Popen(
        [
            binary, "--name", "secure", "--data-dir", str(directory / "data"),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"secure={peer_url}", "--log-level", "warn",
            "--cert-file", str(directory / "etcd.pem"), "--key-file", str(directory / "etcd-key.pem"),
            "--trusted-ca-file", str(directory / "ca.pem"), "--client-cert-auth",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    etcd = SecureEtcd(f"127.0.0.1:{port}", directory / "ca.pem")
    try:
        import asyncio

        asyncio.run(_enable_auth(etcd))
        yield etcd
    finally:
        process.terminate()
        process.wait(timeout=15)
        log.close()


async def _enable_auth(etcd: SecureEtcd) -> None:
    """root, and user `quire` with readwrite on /quire/local/ only."""
    deadline = time.monotonic() + 30
    access = etcd.access()
    async with etcd3aio.Etcd3Client(
        [etcd.endpoint], ca_cert=access.ca, cert_key=access.key, cert_chain=access.cert
    ) as client:
        assert client.auth is not None and client.kv is not None
        while True:
            try:
                await client.kv.get(b"x", timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio_sleep(0.2)
        await client.auth.user_add("root", etcd.root_password)
        await client.auth.role_add("root")
        await client.auth.user_grant_role("root", "root")
        prefix = Keys("local").root
        await client.auth.role_add("quire-local")
        await client.auth.role_grant_permission(
            "quire-local", prefix, prefix_range_end(prefix), perm_type=PermissionType.READWRITE
        )
        await client.auth.user_add("quire", PASSWORD)
        await client.auth.user_grant_role("quire", "quire-local")
        await client.auth.auth_enable()


async def asyncio_sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def store(etcd: SecureEtcd, cluster: str, password: str = PASSWORD, user: str = "quire") -> EtcdStore:
    return EtcdStore([etcd.endpoint], 5.0, etcd.access(user, password), Keys(cluster).root)


async def test_the_cluster_prefix_is_usable_with_the_right_user(secure_etcd: SecureEtcd) -> None:
    good = store(secure_etcd, "local")
    await good.connect()
    await good.close()


async def test_a_wrong_password_fails_at_connect(secure_etcd: SecureEtcd) -> None:
    bad = store(secure_etcd, "local", password="wrong")
    with pytest.raises(ConfigError, match="wrong user or password"):
        await bad.connect()  # at once: a wrong password is not retried as if etcd were down
    await bad.close()


async def test_a_prefix_outside_the_role_fails_at_connect(secure_etcd: SecureEtcd) -> None:
    outside = store(secure_etcd, "other")
    with pytest.raises(ConfigError, match="may not read and write the cluster prefix '/quire/other/'"):
        await outside.connect()
    await outside.close()


async def test_no_user_on_an_auth_cluster_fails_at_connect(secure_etcd: SecureEtcd) -> None:
    anonymous = EtcdStore([secure_etcd.endpoint], 5.0, secure_etcd.access(), b"/quire/local/")
    with pytest.raises(ConfigError):
        await anonymous.connect()
    await anonymous.close()


def test_the_registry_exits_2_with_a_clear_message(secure_etcd: SecureEtcd, tmp_path: Path) -> None:
    password_file = tmp_path / "password"
    password_file.write_text("wrong\n")
    env = dict(
        os.environ,
        QUIRE_INSECURE_PLAINTEXT_DEV="true",
        QUIRE_REGISTRY_ADDRESS=f"127.0.0.1:{free_port()}",
        QUIRE_REGISTRY_HTTP_PORT="0",
        QUIRE_ETCD_ENDPOINTS=secure_etcd.endpoint,
        QUIRE_ETCD_CA=str(secure_etcd.ca),
        QUIRE_ETCD_CERT=str(secure_etcd.ca.parent / "client.pem"),
        QUIRE_ETCD_KEY=str(secure_etcd.ca.parent / "client-key.pem"),
        QUIRE_ETCD_USER="quire",
        QUIRE_ETCD_PASSWORD_FILE=str(password_file),
    )
    result = subprocess.run(
        [sys.executable, "-m", "quire_registry"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "refused user 'quire': wrong user or password" in result.stderr
    assert "Traceback" not in result.stderr
    password_file.write_text(PASSWORD + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "quire_registry"],
        env={**env, "QUIRE_CLUSTER": "other"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "may not read and write the cluster prefix" in result.stderr


# -- settings that do not match etcd end the start; an etcd that is down is waited for --


@pytest.fixture(scope="module")
def plaintext_auth_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plaintext etcd with authentication on (root only): the setup in
    which etcd answers a request without a user INVALID_ARGUMENT "user name is empty"."""
    from tests.conftest import EtcdProcess

    process = EtcdProcess(tmp_path_factory.mktemp("auth-etcd"))
    try:
        import asyncio

        asyncio.run(_enable_root_only(process.endpoint))
        yield process.endpoint
    finally:
        process.stop()


async def _enable_root_only(endpoint: str) -> None:
    async with etcd3aio.Etcd3Client([endpoint]) as client:
        assert client.auth is not None
        await client.auth.user_add("root", "root-password")
        await client.auth.role_add("root")
        await client.auth.user_grant_role("root", "root")
        await client.auth.auth_enable()


async def test_no_user_on_a_plaintext_auth_cluster_is_a_setting_not_an_outage(plaintext_auth_etcd: str) -> None:
    anonymous = EtcdStore([plaintext_auth_etcd], 5.0, EtcdAccess(), b"/quire/local/")
    with pytest.raises(ConfigError, match=r"user name is empty.*QUIRE_ETCD_USER"):
        await anonymous.connect()
    await anonymous.close()


def _with(access: EtcdAccess, **changes: object) -> EtcdAccess:
    import dataclasses

    return dataclasses.replace(access, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("case", "setting"),
    [
        ("plaintext client at the TLS port", "QUIRE_ETCD_CA is not set"),
        ("a CA that did not sign etcd's certificate", "QUIRE_ETCD_CA"),
        ("a server name etcd's certificate does not carry", "QUIRE_ETCD_SERVER_NAME"),
        ("no client certificate", "QUIRE_ETCD_CERT/QUIRE_ETCD_KEY are not set"),
        ("a client certificate from another CA", "QUIRE_ETCD_CERT"),
        ("TLS at the plaintext port", "does not speak TLS but QUIRE_ETCD_CA is set"),
    ],
)
async def test_tls_settings_etcd_refuses_end_the_start_naming_the_setting(
    secure_etcd: SecureEtcd, etcd: object, case: str, setting: str
) -> None:
    other = Authority.create("another CA")
    foreign_cert, foreign_key = other.issue("quire-service:registry")
    good = secure_etcd.access("quire", PASSWORD)
    endpoint = secure_etcd.endpoint
    access = {
        "plaintext client at the TLS port": EtcdAccess(user="quire", password=PASSWORD),
        "a CA that did not sign etcd's certificate": _with(good, ca=other.pem()),
        "a server name etcd's certificate does not carry": _with(good, server_name="elsewhere.example"),
        "no client certificate": _with(good, cert=None, key=None),
        "a client certificate from another CA": _with(good, cert=foreign_cert, key=foreign_key),
        "TLS at the plaintext port": good,
    }[case]
    if case == "TLS at the plaintext port":
        endpoint = etcd.endpoint  # type: ignore[attr-defined]
    store = EtcdStore([endpoint], 3.0, access, b"/quire/local/")
    with pytest.raises(ConfigError) as caught:
        await store.connect()
    await store.close()
    assert setting in str(caught.value), f"{case}: {caught.value}"


async def test_an_etcd_that_is_not_there_is_waited_for(secure_etcd: SecureEtcd) -> None:
    """The control: nothing listening is not a setting to blame."""
    from quire_api.errors import Unavailable

    store = EtcdStore([f"127.0.0.1:{free_port()}"], 3.0, secure_etcd.access("quire", PASSWORD), b"/quire/local/")
    with pytest.raises(Unavailable):
        await store.connect()
    await store.close()


def test_the_registry_exits_2_without_a_user_on_an_auth_cluster(plaintext_auth_etcd: str) -> None:
    env = dict(
        os.environ,
        QUIRE_INSECURE_PLAINTEXT_DEV="true",
        QUIRE_REGISTRY_ADDRESS=f"127.0.0.1:{free_port()}",
        QUIRE_REGISTRY_HTTP_PORT="0",
        QUIRE_ETCD_ENDPOINTS=plaintext_auth_etcd,
    )
    result = subprocess.run(
        [sys.executable, "-m", "quire_registry"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert "QUIRE_ETCD_USER" in result.stderr
    assert "unreachable" not in result.stderr and "Traceback" not in result.stderr
