"""Metadata (MET-*), disk (DSK-*) and read/tail (RD-*) rows."""

from __future__ import annotations

import ast
import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import etcd3aio
import grpc
import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_api.replication import markers
from quire_client import QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from tests.faults.checker import check
from tests.faults.history import History, check_payload
from tests.faults.lab import READS_REACH_BOOKIES, fault_cluster, fill, tmpfs
from tests.faults.report import Scenario
from tests.faults.scenarios import (
    PASSWORD,
    HealthWatch,
    N,
    client_for,
    closed_ledgers,
    direct_add_accepted,
    finish,
    gateway_reaches_all,
    histogram_quantile,
    latency_figures,
    metric_sum,
    new_ledger,
    registered_bookies,
    scrape,
    thinly_replicated,
    writers,
)
from tests.faults.workload import observe_lac, observe_metadata, read_all
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    auditor = {"QUIRE_AUDITOR_INTERVAL_SECONDS": "1"}  # DSK-6's repair
    with fault_cluster(tmp_path_factory.mktemp("metadata"), bookies=4, env={**auditor, **READS_REACH_BOOKIES}) as local:
        yield local


def name_of(cluster: LocalCluster, bookie_id: str) -> str:
    return next(n for n in cluster.bookie_names if cluster.bookie_id(n) == bookie_id)


def test_met1_etcd_stopped_during_appends(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("MET-1", N=N, fault="SIGSTOP etcd for 6s")
    history = History()
    with client_for(cluster, timeout=5) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.003)
        writer.start().wait_acked(200)
        cluster.pause("etcd")
        try:
            before = writer.acked
            time.sleep(3)
            scenario.figures["acked_while_etcd_stopped"] = writer.acked - before
            try:
                with client_for(cluster, timeout=15) as patient:
                    patient.create_ledger(password=PASSWORD, attempts=1)  # one call's answer
                create_code = "OK"
            except QuireClientError as exc:
                create_code = exc.code.name
            scenario.figures["create_code_while_stopped"] = create_code
        finally:
            cluster.resume("etcd")
        writer.join()
        assert writer.error is None, writer.error
        started = time.monotonic()
        wait_until("a create after etcd resumed", lambda: creates(client), poll_seconds=0.2)
        scenario.figures["seconds_to_create_after_resume"] = round(time.monotonic() - started, 2)
        scenario.figures["errors_with_wrong_code"] = int(create_code != "UNAVAILABLE")
        finish(scenario, client, history, [ledger])
    cluster.wait_bookies_registered(4)
    assert scenario.figures["acked_while_etcd_stopped"] > 0
    assert create_code != "OK"


def test_met9_legacy_ledger_ids_unique_under_contention(cluster: LocalCluster, scenario: Scenario) -> None:
    clients, per_client = 8, 60
    scenario.start("MET-9", clients=clients, creates_per_client=per_client)

    def create(_: int) -> list[int]:
        with client_for(cluster) as client:
            return [client.create_ledger(legacy=True).ledger_id.ledger_id for _ in range(per_client)]

    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        ids = [i for batch in pool.map(create, range(clients)) for i in batch]
    seconds = time.monotonic() - started
    scenario.figures["duplicate_ids"] = len(ids) - len(set(ids))
    scenario.figures["creates_per_second"] = round(len(ids) / seconds, 1)
    assert scenario.figures["duplicate_ids"] == 0


def test_met2_ensemble_change_races_close(cluster: LocalCluster, scenario: Scenario) -> None:
    """Kill a member (the writer's ensemble change) and close the ledger at once:
    one CAS wins; metadata versions seen never go back, no version holds two records."""
    seed = scenario.start("MET-2", N=N, E=3, Qw=3, Qa=2)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history, write_quorum=3)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        writer.start().wait_acked(300)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        victim = name_of(cluster, metadata.ensembles[-1].bookie_ids[0])
        cluster.kill(victim)
        try:
            closed = client.recover_ledger(ledger.qualified_name, PASSWORD)
            history.record("fence", "ok", ledger.qualified_name, last_entry_id=closed.last_entry_id)
        except QuireClientError as exc:
            scenario.figures["close_error"] = exc.code.name
        writer.join()
        for _ in range(3):
            observe_metadata(client, ledger.qualified_name, history)
        cluster.start_process(victim)
        cluster.wait_bookies_registered(4)
        verdict = finish(scenario, client, history, [ledger])
    assert verdict.meta_version_regressions == 0


def test_rd1_confirmed_reads_never_pass_the_lac(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("RD-1", N=N)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        writer.start()
        unconfirmed_reads = 0
        while writer.acked < N - 1 and writer.error is None:
            lac = observe_lac(client, ledger.qualified_name, history)
            if lac >= 0:
                read_all(client, ledger.qualified_name, history, first=max(0, lac - 20), last=lac)
            ahead = writer.invoked - 1
            if ahead > lac + 1:
                try:
                    read_all(client, ledger.qualified_name, history, first=lac + 1, last=ahead, unconfirmed=True)
                    unconfirmed_reads += 1
                except QuireClientError:
                    pass  # NOT_FOUND: not stored yet
            time.sleep(0.05)
        writer.join()
        scenario.figures["unconfirmed_read_rounds"] = unconfirmed_reads
        finish(scenario, client, history, [ledger])


def test_rd3_tail_with_a_bookie_stopped(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("RD-3", N=N)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
        seen: list[int] = []
        lags: list[float] = []

        def tail() -> None:
            with client_for(cluster) as reader:
                for entry in reader.tail(ledger.qualified_name):
                    facts = check_payload(entry.payload)
                    history.record("read", "ok", ledger.qualified_name, mode="confirmed", entry_id=entry.entry_id,
                                   good=facts is not None and facts.index == entry.entry_id)  # fmt: skip
                    if entry.entry_id in writer.ack_times:
                        lags.append((time.monotonic() - writer.ack_times[entry.entry_id]) * 1000)
                    seen.append(entry.entry_id)

        tailer = threading.Thread(target=tail, daemon=True)
        tailer.start()
        writer.start().wait_acked(500)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
        victim = name_of(cluster, metadata.ensembles[-1].bookie_ids[2])
        cluster.kill(victim)
        writer.join()
        client.close_ledger(ledger.qualified_name)
        tailer.join(60)
        cluster.start_process(victim)
        cluster.wait_bookies_registered(4)
        scenario.figures["gaps"] = sum(1 for a, b in itertools.pairwise(seen) if b != a + 1)
        scenario.figures["entries_tailed"] = len(seen)
        scenario.figures["tail_lag_p99_ms"] = sorted(lags)[int(0.99 * len(lags))] if lags else 0.0
        finish(scenario, client, history, [ledger])
    assert scenario.figures["gaps"] == 0 and seen and seen[0] == 0 and seen[-1] == N - 1


def test_dsk5_slow_disk(cluster: LocalCluster, scenario: Scenario) -> None:
    seed = scenario.start("DSK-5", N=N, sync_delay_ms=50)
    history = History()
    with client_for(cluster) as client:
        ledgers = [new_ledger(client, history, write_quorum=3, ack_quorum=2) for _ in range(2)]
        metadata, _ = client.ledger_metadata(ledgers[0].qualified_name)
    # A member of the first ledger's ensemble (Qw = E: it gets every entry), restarted slow.
    slow = next(n for n in cluster.bookie_names if cluster.bookie_id(n) == metadata.ensembles[0].bookie_ids[0])
    process = cluster.processes[slow]
    process.env["QUIRE_BOOKIE_FAULT_SYNC_DELAY_SECONDS"] = "0.05"
    cluster.restart(slow)
    cluster.wait_bookies_registered(4)
    try:
        with client_for(cluster) as client:
            # The gateway's stream to the restarted bookie must be up before the writers start:
            # an add meeting it still reconnecting replaces the bookie, and nothing is slow then.
            wait_until("the gateway reaching every bookie", lambda: gateway_reaches_all(cluster, client))
            running = [w.start() for w in writers(cluster, ledgers, history, seed)]
            for writer in running:
                writer.join()
                assert writer.error is None
            scenario.figures.update(latency_figures(running))
            p99 = scrape(cluster.bookie_http(slow))
            scenario.figures["slow_bookie_sync_p99_s"] = histogram_quantile(
                p99, "quire_bookie_sync_duration_seconds", 0.99
            )
            finish(scenario, client, history, ledgers)
    finally:
        del process.env["QUIRE_BOOKIE_FAULT_SYNC_DELAY_SECONDS"]
        cluster.restart(slow)
        cluster.wait_bookies_registered(4)
    assert scenario.figures["slow_bookie_sync_p99_s"] >= 0.05  # visible in the slow bookie's metrics


def test_dsk4_write_eio_fails_stop_and_nothing_is_acked(
    cluster: LocalCluster, scenario: Scenario, tmp_path: Path
) -> None:
    """DSK-4 through the storage wrapper: from the moment the trigger exists every
    synced write on one bookie fails with EIO (what a filesystem turning
    read-only or a dying disk gives)."""
    seed = scenario.start("DSK-4", N=N, fault="EIO on every write of one bookie")
    history = History()
    trigger = tmp_path / "eio"
    with client_for(cluster) as client:
        ledger = new_ledger(client, history)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
    broken = name_of(cluster, metadata.ensembles[0].bookie_ids[1])  # a member of the ledger's ensemble
    process = cluster.processes[broken]
    process.env["QUIRE_BOOKIE_FAULT_WRITE_EIO_FILE"] = str(trigger)
    cluster.restart(broken)
    cluster.wait_bookies_registered(4)
    try:
        with client_for(cluster) as client:
            (writer,) = writers(cluster, [ledger], history, seed, pace_seconds=0.002)
            writer.start().wait_acked(300)
            trigger.touch()
            writer.join()
            assert writer.error is None, writer.error
            log_text = cluster.log_path(broken).read_text()
            scenario.figures["eio_logged"] = "injected I/O error" in log_text
            after, _ = client.ledger_metadata(ledger.qualified_name)
            scenario.figures["ensemble_changes"] = len(after.ensembles) - 1
            finish(scenario, client, history, [ledger])
    finally:
        trigger.unlink(missing_ok=True)
        del process.env["QUIRE_BOOKIE_FAULT_WRITE_EIO_FILE"]
        cluster.restart(broken)
        cluster.wait_bookies_registered(4)


def test_dsk1_dsk2_disk_fills_then_frees(tmp_path: Path, scenario: Scenario) -> None:
    """DSK-1 and DSK-2 in one run: a bookie's data dir on a 64 MiB tmpfs."""
    scenario.start("DSK-1+DSK-2", tmpfs="64m", read_only_usage=0.95, writable_usage=0.90)
    with tmpfs("dsk1", "64m") as disk:
        env = {"bookie-1": {"QUIRE_BOOKIE_DATA_DIR": str(disk / "bookie-1")}}
        with fault_cluster(tmp_path, bookies=4, bookie_env=env) as local, client_for(local) as client:
            bookie_id = local.bookie_id("bookie-1")
            writable_health = HealthWatch(bookie_id, "writable")  # OBS-3
            filler = fill(disk, leave_bytes=1 << 20)
            started = time.monotonic()
            wait_until(
                "the bookie turning read-only",
                lambda: any(r.read_only for r in registered_bookies(local) if r.bookie_id == bookie_id),
                poll_seconds=0.05,
            )
            scenario.figures["seconds_to_read_only"] = round(time.monotonic() - started, 2)
            metrics = scrape(local.bookie_http("bookie-1"))
            scenario.figures["read_only_gauge"] = metric_sum(metrics, "quire_bookie_read_only")  # OBS-1
            history = History()
            placed = [new_ledger(client, history) for _ in range(5)]
            metas = [client.ledger_metadata(ledger.qualified_name)[0] for ledger in placed]
            scenario.figures["ensembles_with_read_only_bookie"] = sum(
                bookie_id in m.ensembles[0].bookie_ids for m in metas
            )
            scenario.figures["adds_accepted_while_read_only"] = int(direct_add_accepted(bookie_id, placed[0], 0))
            filler.unlink()
            started = time.monotonic()
            wait_until(
                "the bookie turning writable again",
                lambda: not any(r.read_only for r in registered_bookies(local) if r.bookie_id == bookie_id),
                poll_seconds=0.05,
            )
            scenario.figures["seconds_back_to_writable"] = round(time.monotonic() - started, 2)
            time.sleep(0.5)  # the health update follows the registry's within one disk check
            scenario.figures["writable_health_sequence"] = writable_health.close()
    assert scenario.figures["writable_health_sequence"] == ["SERVING", "NOT_SERVING", "SERVING"]
    assert scenario.figures["adds_accepted_while_read_only"] == 0
    assert scenario.figures["ensembles_with_read_only_bookie"] == 0
    assert scenario.figures["read_only_gauge"] == 1.0


def creates(client: QuireClient) -> bool:
    """Whether a ledger can be created now."""
    try:
        client.create_ledger(password=PASSWORD)
    except QuireClientError:
        return False
    return True


def test_checker_sees_a_clean_history(cluster: LocalCluster) -> None:
    """Sanity: the checker on an empty history is clean (no false alarms)."""
    verdict = check(History(), [])
    assert verdict.clean


FLAGGED = ": damaged copies flagged for repair: "


def flagged_in_log(cluster: LocalCluster, ledger: LedgerId, since: int) -> dict[str, tuple[int, int]]:
    """The copies of `ledger` the gateway logged as flagged for repair, from
    byte `since` of its log on. The log, not the metadata: the auditor may
    copy them back and drop the flag before a poll of the metadata sees it."""
    flagged: dict[str, tuple[int, int]] = {}
    with cluster.log_path("gateway").open("rb") as log:
        log.seek(since)
        for line in log:
            try:
                message = str(json.loads(line).get("msg", ""))
            except ValueError:
                continue
            prefix = f"ledger {ledger.qualified_name}{FLAGGED}"
            if message.startswith(prefix):
                flagged.update(ast.literal_eval(message[len(prefix) :]))
    return flagged


def test_dsk6_read_eio_on_one_bookie(cluster: LocalCluster, scenario: Scenario, tmp_path: Path) -> None:
    seed = scenario.start("DSK-6", N=500, fault="EIO on every read of one bookie")
    history = History()
    trigger = tmp_path / "read-eio"
    with client_for(cluster) as client:
        (ledger,) = closed_ledgers(cluster, client, history, seed, 500, ledgers=1)
        metadata, _ = client.ledger_metadata(ledger.qualified_name)
    # A member of the ledger's ensemble, restarted with the read fault armed.
    broken = next(n for n in cluster.bookie_names if cluster.bookie_id(n) == metadata.ensembles[0].bookie_ids[0])
    process = cluster.processes[broken]
    process.env["QUIRE_BOOKIE_FAULT_READ_EIO_FILE"] = str(trigger)
    cluster.restart(broken)
    cluster.wait_bookies_registered(4)
    try:
        with client_for(cluster) as client:
            read_all(client, ledger.qualified_name, history, first=0, last=499)  # the gateway reconnects first
            log_from = cluster.log_path("gateway").stat().st_size
            trigger.touch()
            failures = 0
            try:
                read_all(client, ledger.qualified_name, history, first=0, last=499)
            except QuireClientError as exc:
                failures += 1
                scenario.figures["read_error"] = str(exc)[:200]
            scenario.figures["user_visible_read_errors"] = failures
            # The copies the bookie could not read are flagged in the metadata...
            flagged = wait_until(
                "the damaged copies flagged for repair", lambda: flagged_in_log(cluster, ledger, log_from)
            )
            scenario.figures["repair_flagged"] = {bookie: list(span) for bookie, span in flagged.items()}
            # ...and the auditor copies them back and drops the flag. It reads the good copies, so
            # it may do so before the disk reads again (once, 21 ms after the flag).
            trigger.unlink()
            started = time.monotonic()
            wait_until(
                "the auditor repairing the flagged copies",
                lambda: not markers(client.ledger_metadata(ledger.qualified_name)[0]),
                poll_seconds=0.2,
            )
            scenario.figures["repair_seconds"] = round(time.monotonic() - started, 2)
            scenario.figures["entries_below_qw_after"] = thinly_replicated(cluster, client, ledger)
            finish(scenario, client, history, [ledger])
    finally:
        trigger.unlink(missing_ok=True)
        del process.env["QUIRE_BOOKIE_FAULT_READ_EIO_FILE"]
        cluster.restart(broken)
        cluster.wait_bookies_registered(4)
    assert scenario.figures["user_visible_read_errors"] == 0
    assert list(scenario.figures["repair_flagged"]) == [cluster.bookie_id(broken)]
    assert scenario.figures["entries_below_qw_after"] == 0


def direct_add(bookie_id: str, ledger: LedgerId, first_entry_id: int, count: int) -> str:
    """`count` entries of 1 KiB straight to one bookie in one add: "OK" or the status code's name."""
    digester = Digester(DigestType.CRC32C)
    entries = [
        bookie_pb2.PackedEntry(
            entry_id=entry_id,
            data=pack_entry(ledger, entry_id, entry_id - 1, 1024 * (entry_id + 1), b"d" * 1024, digester),
        )
        for entry_id in range(first_entry_id, first_entry_id + count)
    ]
    with grpc.insecure_channel(bookie_id) as channel:
        try:
            bookie_pb2_grpc.BookieServiceStub(channel).AddEntries(
                bookie_pb2.AddEntriesRequest(
                    ledger_id=ledger_id_to_proto(ledger), master_key=master_key(PASSWORD), entries=entries
                ),
                timeout=30,
            )
            return "OK"
        except grpc.RpcError as exc:
            return str(exc.code().name)


def direct_read(bookie_id: str, ledger: LedgerId, last_entry_id: int) -> set[int]:
    with grpc.insecure_channel(bookie_id) as channel:
        stub = bookie_pb2_grpc.BookieServiceStub(channel)
        found: set[int] = set()
        first = 0
        while first <= last_entry_id:
            response = stub.ReadEntries(
                bookie_pb2.ReadEntriesRequest(
                    ledger_id=ledger_id_to_proto(ledger),
                    range=bookie_pb2.EntryRange(first_entry_id=first, last_entry_id=last_entry_id),
                ),
                timeout=30,
            )
            if not response.entries:
                break
            found.update(e.entry_id for e in response.entries)
            first = max(e.entry_id for e in response.entries) + 1
        return found


def test_dsk3_sudden_enospc_on_the_wal(tmp_path: Path, scenario: Scenario) -> None:
    """A bookie's data dir on a 24 MiB tmpfs, filled by a filler file while a
    writer streams to it; its read-only threshold cannot trip first (100 %,
    checked every 10 min), so RocksDB's WAL append meets ENOSPC itself."""
    seed = scenario.start("DSK-3", tmpfs="24m", N=N, E=3, Qw=2, Qa=2)
    full = "bookie-1"
    history = History()
    with tmpfs("dsk3", "24m") as disk:
        env = {
            full: {
                "QUIRE_BOOKIE_DATA_DIR": str(disk / full),
                "QUIRE_BOOKIE_READ_ONLY_USAGE": "1.0",
                "QUIRE_BOOKIE_WRITABLE_USAGE": "1.0",
                "QUIRE_BOOKIE_DISK_CHECK_INTERVAL_SECONDS": "600",
            }
        }
        with fault_cluster(tmp_path, bookies=4, bookie_env=env) as local, client_for(local) as client:
            bookie_id = local.bookie_id(full)
            ledger = new_ledger(client, history)
            while bookie_id not in client.ledger_metadata(ledger.qualified_name)[0].ensembles[0].bookie_ids:
                ledger = new_ledger(client, history)  # placement chose 3 of 4; take one on the small disk
            (writer,) = writers(local, [ledger], history, seed, pace_seconds=0.002)
            writer.start().wait_acked(300)
            filler = fill(disk, leave_bytes=256 * 1024)

            # Straight to the full bookie: 64 KiB adds until the disk refuses; every refusal's code.
            probe = LedgerId(0xD5C3, seed)
            acked: list[int] = []
            codes: dict[str, int] = {}
            for attempt in range(64):
                code = direct_add(bookie_id, probe, attempt * 64, 64)
                if code == "OK":
                    acked.extend(range(attempt * 64, attempt * 64 + 64))
                else:
                    codes[code] = codes.get(code, 0) + 1
                if codes.get("RESOURCE_EXHAUSTED", 0) >= 3:
                    break
            writer.join()
            assert writer.error is None, writer.error
            scenario.figures["refusal_codes"] = codes
            scenario.figures["probe_entries_acked_before_full"] = len(acked)
            log_text = local.log_path(full).read_text()
            scenario.figures["enospc_logged"] = "No space left on device" in log_text

            filler.unlink()
            # Space is back: the bookie reopens its store and takes adds again.
            started = time.monotonic()
            wait_until(
                "adds accepted after space returned",
                lambda: direct_add(bookie_id, probe, 10_000, 1) == "OK",
                poll_seconds=0.2,
            )
            acked.append(10_000)
            scenario.figures["seconds_to_accept_adds_after_space_returned"] = round(time.monotonic() - started, 2)

            local.kill(full)  # nothing acknowledged may depend on a clean stop
            local.start_process(full)
            local.wait_bookies_registered(4)
            kept = direct_read(bookie_id, probe, 10_000)
            scenario.figures["acked_but_not_durable"] = len(set(acked) - kept)
            finish(scenario, client, history, [ledger])
    assert codes and set(codes) == {"RESOURCE_EXHAUSTED"}, codes
    assert scenario.figures["acked_but_not_durable"] == 0


def test_met5_etcd_space_quota(tmp_path: Path, scenario: Scenario) -> None:
    """etcd with a 16 MiB backend quota, filled until it raises the NOSPACE
    alarm: creates fail RESOURCE_EXHAUSTED naming the alarm; existing ledgers
    still read."""
    quota = 16 * 1024 * 1024
    seed = scenario.start("MET-5", quota_backend_bytes=quota, N=500)
    history = History()
    etcd_args = ["--quota-backend-bytes", str(quota)]
    with fault_cluster(tmp_path, etcd_args=etcd_args) as local, client_for(local) as client:
        ledger = new_ledger(client, history)
        (writer,) = writers(local, [ledger], history, seed, count=500)
        writer.start().join()
        assert writer.error is None, writer.error
        client.close_ledger(ledger.qualified_name)
        scenario.figures["junk_puts_to_alarm"] = asyncio.run(fill_etcd(f"127.0.0.1:{local.ports.etcd}"))

        errors: list[QuireClientError | None] = []
        for _ in range(3):
            try:
                client.create_ledger(password=PASSWORD)
                errors.append(None)
            except QuireClientError as exc:
                errors.append(exc)
        misleading = [e for e in errors if e is None or e.code.name != "RESOURCE_EXHAUSTED" or "space" not in str(e)]
        scenario.figures["create_codes"] = [e.code.name if e else "OK" for e in errors]
        scenario.figures["create_message"] = str(errors[0])[:300]
        scenario.figures["misleading_error_codes"] = len(misleading)
        read = read_all(client, ledger.qualified_name, history, first=0, last=499)
        scenario.figures["entries_read_under_alarm"] = len(read)
        finish(scenario, client, history, [ledger])
    assert not misleading, errors
    assert len(read) == 500


async def fill_etcd(endpoint: str) -> int:
    """Put 256 KiB values under a junk prefix until etcd refuses for space."""
    client = etcd3aio.Etcd3Client([endpoint])
    await client.connect()
    assert client.kv is not None
    value = b"j" * (256 * 1024)
    try:
        for index in range(1000):
            try:
                await client.kv.put(f"/junk/{index}".encode(), value, timeout=10)
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                return index
        raise AssertionError("etcd took 250 MiB under a 16 MiB quota")
    finally:
        await client.close()
