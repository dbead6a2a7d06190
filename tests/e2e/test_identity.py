"""Bookie identity and registry restarts, every service its own process:
cookies refuse mismatched boots, and a registry restart loses nothing."""

from __future__ import annotations

import subprocess
import time

import pytest

from quire_client.cluster import free_port
from quire_proto.registry.v1 import registry_pb2

pytestmark = pytest.mark.e2e


def boot_bookie(cluster, name: str, **overrides: str) -> subprocess.CompletedProcess[str]:
    """Run bookie `name`'s command with changed settings; a refused boot exits."""
    env = dict(cluster.processes[name].env, QUIRE_BOOKIE_PORT=str(free_port()), QUIRE_BOOKIE_HTTP_PORT="0", **overrides)
    return subprocess.run(
        cluster.processes[name].command, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_existing_data_under_another_bookie_id_is_refused(cluster):
    cluster.terminate("bookie-1")
    try:
        result = boot_bookie(cluster, "bookie-1", QUIRE_BOOKIE_ID="impostor-1")
        assert result.returncode == 2
        assert "different BookieId" in result.stderr and "Traceback" not in result.stderr
        assert cluster.bookie_id("bookie-1") in result.stderr  # names the id the data belongs to
    finally:
        cluster.start_process("bookie-1")


def test_existing_bookie_id_on_a_wiped_directory_is_refused(cluster, tmp_path):
    bookie_id = cluster.bookie_id("bookie-2")
    cluster.terminate("bookie-2")
    try:
        result = boot_bookie(cluster, "bookie-2", QUIRE_BOOKIE_ID=bookie_id, QUIRE_BOOKIE_DATA_DIR=str(tmp_path))
        assert result.returncode == 2
        assert "empty data directory" in result.stderr and "Traceback" not in result.stderr
        assert not any(tmp_path.joinpath("rocksdb").exists() for _ in [0])  # nothing was created
    finally:
        cluster.start_process("bookie-2")


def test_a_new_bookie_id_formats_and_reboots(cluster, tmp_path):
    # Its own ports: bookie-3's settings name bookie-3's admin HTTP port too.
    env = {"QUIRE_BOOKIE_ID": "fresh-bookie", "QUIRE_BOOKIE_DATA_DIR": str(tmp_path), "QUIRE_BOOKIE_HTTP_PORT": "0"}
    port = free_port()
    process = subprocess.Popen(
        cluster.processes["bookie-3"].command,
        env=dict(cluster.processes["bookie-3"].env, QUIRE_BOOKIE_PORT=str(port), **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with _registry(cluster) as stub:
            _wait_for(lambda: "fresh-bookie" in _bookie_ids(stub))
            cookie = stub.GetCookie(registry_pb2.GetCookieRequest(bookie_id="fresh-bookie"), timeout=5).cookie
        assert cookie.data_dirs == [str(tmp_path.resolve())]
        assert (tmp_path / "COOKIE").exists()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_registry_restart_loses_nothing_and_bookies_re_register(cluster, client):
    metadata = client.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
    ledger = f"{metadata.ledger_id.scope_id}:{metadata.ledger_id.ledger_id}"
    client.append_all(ledger, [b"before", b"restart"])
    with _registry(cluster) as stub:
        before = sorted(_bookie_ids(stub))

    log = cluster.log_path("registry")
    restarted_at = len(log.read_text())
    cluster.kill("registry")  # SIGKILL: no chance to unregister anyone
    cluster.start_process("registry")

    # Every bookie registers with the new registry process: on its old lease
    # when the restart took less than the lease's 3 s, afresh when a busy
    # machine made it longer (test_registry_restart.py holds the lease to the
    # first). Past the TTL they are still listed, kept alive by the new process.
    def back(bookie_id: str, since_restart: str) -> bool:
        return any(
            f"bookie {bookie_id} {what}" in since_restart for what in ("resumed its registration", "registered (")
        )

    _wait_for(lambda: all(back(bookie_id, log.read_text()[restarted_at:]) for bookie_id in before))
    time.sleep(4)
    with _registry(cluster) as stub:
        assert sorted(_bookie_ids(stub)) == before
    stored, _ = client.ledger_metadata(ledger)
    assert stored.ledger_id == metadata.ledger_id and list(stored.ensembles) == list(metadata.ensembles)
    assert [e.payload for e in client.read(ledger)] == [b"before", b"restart"]
    client.append_all(ledger, [b"after"])
    assert [e.payload for e in client.read(ledger)][-1] == b"after"


class _registry:
    def __init__(self, cluster) -> None:
        import grpc

        from quire_proto.registry.v1 import registry_pb2_grpc

        self._channel = grpc.insecure_channel(cluster.registry_target)
        self.stub = registry_pb2_grpc.RegistryServiceStub(self._channel)

    def __enter__(self):
        return self.stub

    def __exit__(self, *exc_info: object) -> None:
        self._channel.close()


def _bookie_ids(stub) -> list[str]:
    import grpc

    try:
        response = stub.ListBookies(registry_pb2.ListBookiesRequest(), timeout=2)
    except grpc.RpcError:
        return []
    return [record.bookie_id for record in response.bookies]


def _wait_for(predicate, within_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + within_seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("condition not reached in time")
        time.sleep(0.1)
