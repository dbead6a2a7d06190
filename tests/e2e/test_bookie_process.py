"""One bookie as its own process (standalone: no registry), driven over gRPC."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_client.cluster import StandaloneBookie, free_port
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc

pytestmark = pytest.mark.e2e

KEY = master_key(b"pw")
DIGEST = Digester(DigestType.CRC32C)


def packed(ledger: LedgerId, entry_id: int) -> bytes:
    payload = f"{ledger.ledger_id}:{entry_id}:".encode() * 20
    return pack_entry(ledger, entry_id, entry_id - 1, 0, payload, DIGEST)


async def write_until_stopped(stub, ledger: LedgerId, acked: list[int], stop: asyncio.Event) -> None:
    """Add entries one at a time; record each acknowledged id; stop at the
    first failure (the bookie went away)."""
    entry_id = 0
    while not stop.is_set():
        request = bookie_pb2.AddEntriesRequest(
            ledger_id=ledger_id_to_proto(ledger),
            master_key=KEY,
            entries=[bookie_pb2.PackedEntry(entry_id=entry_id, data=packed(ledger, entry_id))],
        )
        try:
            await stub.AddEntries(request, timeout=30)
        except grpc.aio.AioRpcError:
            return
        acked.append(entry_id)
        entry_id += 1


async def run_writers_and(bookie: StandaloneBookie, ledgers: list[LedgerId], min_acked: int, action) -> dict:
    acked: dict[LedgerId, list[int]] = {ledger: [] for ledger in ledgers}
    stop = asyncio.Event()
    async with grpc.aio.insecure_channel(bookie.target) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        writers = [asyncio.create_task(write_until_stopped(stub, ledger, acked[ledger], stop)) for ledger in ledgers]
        for _ in range(600):
            if sum(map(len, acked.values())) >= min_acked:
                break
            await asyncio.sleep(0.1)
        await asyncio.to_thread(action)  # while the writers are still writing
        stop.set()
        await asyncio.gather(*writers)
    return acked


async def read_back(bookie: StandaloneBookie, acked: dict[LedgerId, list[int]]) -> None:
    async with grpc.aio.insecure_channel(bookie.target) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        for ledger, entry_ids in acked.items():
            for start in range(0, len(entry_ids), 500):
                wanted = entry_ids[start : start + 500]
                response = await stub.ReadEntries(
                    bookie_pb2.ReadEntriesRequest(ledger_id=ledger_id_to_proto(ledger), entry_ids=wanted)
                )
                assert list(response.missing_entry_ids) == [], f"acknowledged entries of {ledger} lost"
                assert [e.entry_id for e in response.entries] == wanted
                for entry in response.entries:
                    assert entry.data == packed(ledger, entry.entry_id)


async def test_acknowledged_adds_survive_sigkill_and_restart(tmp_path):
    bookie = StandaloneBookie(tmp_path)
    bookie.start()
    try:
        ledgers = [LedgerId(7, n) for n in range(1, 9)]
        async with grpc.aio.insecure_channel(bookie.target) as channel:
            stub = bookie_pb2_grpc.BookieServiceStub(channel)
            fenced = LedgerId(7, 100)
            await stub.FenceLedger(bookie_pb2.FenceLedgerRequest(ledger_id=ledger_id_to_proto(fenced), master_key=KEY))
        acked = await run_writers_and(bookie, ledgers, min_acked=400, action=bookie.kill)
        assert sum(map(len, acked.values())) >= 400
        bookie.start()
        await read_back(bookie, acked)
        async with grpc.aio.insecure_channel(bookie.target) as channel:
            stub = bookie_pb2_grpc.BookieServiceStub(channel)
            lac = await stub.ReadLastAddConfirmed(
                bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id_to_proto(fenced))
            )
            assert lac.fenced, "the fence did not survive SIGKILL"
    finally:
        bookie.stop()

    # The stopped bookie's data, through `quire bookie inspect`, unchanged by it.
    listing = quire("bookie", "inspect", "--data-dir", str(tmp_path / "bookie"))
    assert listing.returncode == 0, listing.stderr
    rows = {line.split("\t")[0]: line.split("\t") for line in listing.stdout.splitlines()[1:]}
    assert int(rows[str(ledgers[0])][1]) >= len(acked[ledgers[0]])
    assert rows[str(LedgerId(7, 100))][4] == "True"
    verified = quire("bookie", "inspect", "--data-dir", str(tmp_path / "bookie"), "--verify")
    assert verified.returncode == 0, verified.stderr
    assert " 0 bad" in verified.stderr
    dump = quire("bookie", "inspect", "--data-dir", str(tmp_path / "bookie"), "--ledger", str(ledgers[0]), "--to", "1")
    assert [line.split("\t")[0] for line in dump.stdout.splitlines()] == ["0", "1"]


async def test_sigterm_finishes_in_flight_adds_before_exit(tmp_path):
    bookie = StandaloneBookie(tmp_path)
    bookie.start()
    status: list[int | None] = []
    try:
        ledgers = [LedgerId(8, n) for n in range(1, 17)]
        acked = await run_writers_and(bookie, ledgers, min_acked=200, action=lambda: status.append(bookie.stop()))
        assert status == [0], f"bookie exited with {status}; see {bookie.log_path}"
        assert "stopped" in bookie.log_path.read_text()
        bookie.start()
        await read_back(bookie, acked)
    finally:
        bookie.stop()


def quire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quire_client.cli", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("bookie_id", ["bad id", "readonly", "x" * 256])
def test_an_invalid_bookie_id_stops_the_start_with_a_clear_message(tmp_path, bookie_id):
    bookie = StandaloneBookie(tmp_path, env={"QUIRE_BOOKIE_ID": bookie_id})
    result = subprocess.run(
        [sys.executable, "-m", "quire_bookie"], env=bookie.env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "QUIRE_BOOKIE_ID" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "bookie").exists(), "nothing may be created for a bookie that cannot start"


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return str(response.read().decode())


def test_admin_http_shows_status_metrics_and_the_unsafe_no_sync_mode(tmp_path):
    env = {"QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA": "true", "QUIRE_BOOKIE_ID": "bookie-under-test"}
    with StandaloneBookie(tmp_path, http_port=free_port(), env=env) as bookie:
        status = json.loads(http_get(bookie.http_port, "/status"))
        assert status["bookie_id"] == "bookie-under-test"
        assert status["read_only"] is False and "unsafe" in status["sync"]
        assert status["disk"]["total_bytes"] >= status["disk"]["free_bytes"] > 0
        metrics = http_get(bookie.http_port, "/metrics")
        samples = {
            (sample.name, sample.labels.get("bookie_id")): sample.value
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
        }
        assert samples[("quire_bookie_sync_disabled", "bookie-under-test")] == 1
        assert samples[("quire_bookie_read_only", "bookie-under-test")] == 0
        assert samples[("quire_bookie_disk_total_bytes", "bookie-under-test")] == status["disk"]["total_bytes"]
        assert "# TYPE quire_bookie_reads_total counter" in metrics
        assert "# TYPE quire_bookie_written_bytes_total counter" in metrics
        assert samples[("quire_bookie_written_bytes_total", "bookie-under-test")] == 0  # nothing added yet
        with grpc.insecure_channel(bookie.target) as channel:
            info = bookie_pb2_grpc.BookieServiceStub(channel).GetBookieInfo(bookie_pb2.GetBookieInfoRequest())
            assert info.sync_disabled
        assert health_status(bookie.target) == "SERVING"
        assert health_status(bookie.target, "durable") == "NOT_SERVING"
    assert "WITHOUT fsync" in bookie.log_path.read_text()
    with StandaloneBookie(tmp_path / "safe") as safe:
        assert health_status(safe.target, "durable") == "SERVING"


def health_status(target: str, service: str = "") -> str:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        with grpc.insecure_channel(target) as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=2
            )
            return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))
    except grpc.RpcError as exc:
        return exc.code().name


def test_health_stays_not_serving_until_registered(tmp_path):
    # A registry that is not there: the bookie waits for it (cookie check,
    # then registration) and must not claim SERVING meanwhile.
    env = {"QUIRE_BOOKIE_STANDALONE": "false", "QUIRE_REGISTRY_TARGET": f"127.0.0.1:{free_port()}"}
    bookie = StandaloneBookie(tmp_path, env=env)
    with bookie.log_path.open("ab") as log:
        bookie.popen = subprocess.Popen(
            [sys.executable, "-m", "quire_bookie"], env=bookie.env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        seen = []
        for _ in range(30):
            seen.append(health_status(bookie.target))
            seen.append(health_status(bookie.target, "writable"))
            time.sleep(0.1)
        assert "SERVING" not in seen and set(seen) <= {"NOT_SERVING", "UNAVAILABLE"}, seen
        assert bookie.popen.poll() is None, "the bookie gave up while the registry was away"
    finally:
        assert bookie.stop() == 0  # a stop while waiting for the registry is clean


def test_a_taken_admin_port_stops_the_start_with_a_clear_message(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        bookie = StandaloneBookie(tmp_path, http_port=port)
        result = subprocess.run(
            [sys.executable, "-m", "quire_bookie"], env=bookie.env, capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 2
    assert "QUIRE_BOOKIE_HTTP_PORT" in result.stderr and "Traceback" not in result.stderr
