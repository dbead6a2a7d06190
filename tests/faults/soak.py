"""The soak: a local cluster under steady write and read load with periodic
faults for a long time (`make soak`; SOAK_MINUTES, default 30). With the
partition nemesis (SOAK_PARTITIONS, on by default; needs root) the cluster
runs in the network lab and partitions take turns with the kills; docs/faults.md
lists the turn.

While it runs it samples every process's RSS and open file descriptors
(SOAK_SAMPLE_SECONDS) into build/soak/samples.jsonl. At the end it requires:

- the checker's invariants over every ledger written (acked_lost == 0,
  wrong_bytes == 0 and the rest), each ledger checked and deleted as soon as
  its writer ends, so the soak's own memory stays flat;
- no error line, traceback or asyncio/OpenTelemetry lifecycle error in any
  service log;
- every closed ledger back at its write quorum's copies of every entry
  (CopyCheck), and full service after every fault;
- memory and descriptors that flatten: for every process that lived through the
  last two thirds of the run, the growth over the last third must be at most
  half the growth over the second third, or within a small absolute slack.

The report goes to build/soak/report.md and build/soak/summary.json; the exit
status is 0 only if every check passed. `python -m tests.faults.soak`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc

from quire_api.ids import LedgerId
from quire_client import NotFoundError, QuireClient, QuireClientError
from quire_client.cluster import LocalCluster
from tests.faults.checker import Verdict, check, read_back
from tests.faults.history import History
from tests.faults.lab import fault_cluster, lab_cluster
from tests.faults.netns import NetLab
from tests.faults.scenarios import PASSWORD, new_ledger, thinly_replicated
from tests.faults.workload import READER_PROCESS, Writer, observe_lac, read_all

# Lines that must never appear in a service log: an unhandled exception, or a
# task, async generator or telemetry context left in a broken state.
T = TypeVar("T")

LOG_ERRORS = (
    '"level": "ERROR"',  # a service's error line: what a fault is expected to do logs at WARNING
    "Traceback",
    "Task was destroyed but it is pending",
    "Task exception was never retrieved",
    "aclose(): asynchronous generator is already running",
    "Failed to detach context",
)

# Growth allowed over the last third of the run whatever the second third did:
# one RocksDB memtable being filled before its flush (services/bookie/quire_bookie/storage.py
# bounds it), allocator fragmentation and a few gRPC connections being set up
# again after a fault. A leak at the reported rate (~7 MB a minute) exceeds it
# within three minutes.
RSS_SLACK_MB = 24.0
FDS_SLACK = 6


def _setting(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = -1.0
    if value <= 0:
        print(f"{name} must be a positive number, got {raw!r}", file=sys.stderr)
        raise SystemExit(2)
    return value


@dataclass
class Settings:
    minutes: float
    sample_seconds: float
    fault_seconds: float
    writers: int
    ledger_entries: int
    pace_seconds: float
    out: Path
    partitions: bool  # the network lab and the partition nemesis (needs root)

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            minutes=_setting("SOAK_MINUTES", 30),
            sample_seconds=_setting("SOAK_SAMPLE_SECONDS", 15),
            fault_seconds=_setting("SOAK_FAULT_SECONDS", 60),
            writers=int(_setting("SOAK_WRITERS", 2)),
            ledger_entries=int(_setting("SOAK_LEDGER_ENTRIES", 2000)),
            # A pause before each entry keeps the load steady rather than flat out
            # (the machine is shared); 2 ms: at most about 500 entries/s per writer.
            pace_seconds=_setting("SOAK_PACE_MS", 2) / 1000,
            out=Path(os.environ.get("SOAK_DIR", "build/soak")),
            partitions=os.environ.get("SOAK_PARTITIONS", "1") != "0",
        )


# -- sampling -----------------------------------------------------------------


def fd_kind(target: str, data_dir: Path) -> str:
    """socket, pipe, anon_inode:[eventfd]..., or a path (under the data dir, relative)."""
    for prefix in ("socket:", "pipe:"):
        if target.startswith(prefix):
            return prefix[:-1]
    if target.startswith("anon_inode:"):
        return target
    if target.startswith(str(data_dir)):
        parts = Path(target).relative_to(data_dir).parts
        # bookie-1/ledgers/000123.sst -> bookie-1/ledgers/*.sst
        return "/".join([*parts[:-1], "*" + Path(parts[-1]).suffix]) if parts else target
    return target


def sample_process(pid: int, data_dir: Path) -> dict[str, object] | None:
    try:
        rss_kb = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                return None  # killed, not yet reaped
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
        kinds: Counter[str] = Counter()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                kinds[fd_kind(os.readlink(f"/proc/{pid}/fd/{fd}"), data_dir)] += 1
            except OSError:
                continue
    except (OSError, ValueError):
        return None  # exited between the pid lookup and the read
    return {"rss_mb": round(rss_kb / 1024, 1), "fds": sum(kinds.values()), "fd_kinds": dict(kinds)}


class Sampler:
    def __init__(self, cluster: LocalCluster, path: Path, every: float, started: float) -> None:
        self.cluster, self.path, self.every, self.started = cluster, path, every, started
        self.samples: list[dict[str, object]] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def sample_once(self) -> None:
        now = round(time.monotonic() - self.started, 1)
        with self.path.open("a") as out:
            for name in self.cluster.processes:
                pid = self.cluster.pid(name)
                if pid is None:
                    continue
                facts = sample_process(pid, self.cluster.data_dir)
                if facts is None:
                    continue
                row = {"t": now, "process": name, "pid": pid, **facts}
                self.samples.append(row)
                out.write(json.dumps(row) + "\n")

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            self.sample_once()

    def start(self) -> None:
        self.sample_once()
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        self._thread.join(timeout=30)
        self.sample_once()


# -- load ---------------------------------------------------------------------


@dataclass
class Totals:
    verdict: Verdict = field(default_factory=Verdict)
    ledgers: int = 0
    reads: int = 0
    read_failures: int = 0
    errors: list[str] = field(default_factory=list)
    # Writers refused because their ledger was fenced, closed or taken over by a recovery.
    refused: Counter[str] = field(default_factory=Counter)
    copies_checked: int = 0  # closed ledgers found at W good copies of every entry
    thin_at_end: list[str] = field(default_factory=list)  # "ledger: n entries" still short of W
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, verdict: Verdict) -> None:
        with self.lock:
            self.ledgers += 1
            for name in ("acked", "acked_lost", "wrong_bytes", "beyond_lac_confirmed", "lac_regressions",
                         "meta_version_regressions", "adds_after_fence", "unknown_adds"):  # fmt: skip
                setattr(self.verdict, name, getattr(self.verdict, name) + getattr(verdict, name))
            self.verdict.ledgers += verdict.ledgers
            self.verdict.read_errors.extend(verdict.read_errors)


def retrying(action: Callable[[], T], what: str, attempts: int = 120) -> T:
    """Call `action` until it succeeds (a fault may be under way), 1 s apart."""
    for attempt in range(attempts):
        try:
            return action()
        except QuireClientError as exc:
            if attempt == attempts - 1:
                raise RuntimeError(f"{what} failed {attempts} times: {exc}") from exc
            time.sleep(1.0)
    raise AssertionError("unreachable")


def delete(client: QuireClient, ledger: LedgerId) -> None:
    """Delete a ledger, again while a fault is under way; NOT_FOUND after an
    attempt whose answer was lost means it is gone."""

    def once() -> None:
        with contextlib.suppress(NotFoundError):
            client.delete_ledger(ledger.qualified_name)

    retrying(once, "delete ledger")


class LedgerLoop:
    """One writer slot: a fresh ledger, `entries` entries into it (or until the
    session breaks), close it (or recover it, after a fault), read it back,
    check and delete it; again."""

    def __init__(self, cluster: LocalCluster, slot: int, settings: Settings, totals: Totals, stop: threading.Event):
        self.cluster, self.slot, self.settings, self.totals, self.stop = cluster, slot, settings, totals, stop
        self.current: tuple[str, History] | None = None  # the live ledger, for the reader
        self.copies: CopyCheck | None = None  # checks and deletes the ledgers read back
        self._thread = threading.Thread(target=self._run, name=f"ledger-loop-{slot}", daemon=True)

    def _run(self) -> None:
        seed = self.slot * 1_000_000
        try:
            with QuireClient(self.cluster.gateway_target, timeout=30) as client:
                while not self.stop.is_set():
                    seed += 1
                    self._one_ledger(client, seed)
        except Exception as exc:  # reported, and fails the soak
            with self.totals.lock:
                self.totals.errors.append(f"writer slot {self.slot}: {type(exc).__name__}: {exc}")

    def _one_ledger(self, client: QuireClient, seed: int) -> None:
        history = History()
        ledger = retrying(lambda: new_ledger(client, history), "create ledger")
        writer = Writer(
            self.cluster.gateway_target,
            self.cluster.registry_target,
            ledger,
            history,
            count=self.settings.ledger_entries,
            seed=seed,
            writer_id=self.slot,
            pace_seconds=self.settings.pace_seconds,
        )
        self.current = (ledger.qualified_name, history)
        writer.stop = self.stop
        writer.start()
        writer.join(timeout=900)
        self.current = None
        if writer.error is not None and writer.error.reason in REFUSED_AS_ENDED:
            with self.totals.lock:
                self.totals.refused[writer.error.reason] += 1
        if writer.error is None:
            # A writer that ended well closes its ledger, as applications do; recovery
            # (in read_back) does the closing only after a fault broke the session.
            with contextlib.suppress(QuireClientError):
                client.close_ledger(ledger.qualified_name)
        final = read_back(client, ledger.qualified_name, history, PASSWORD)
        for _ in range(120):  # recovery needs a registry, a gateway and enough bookies
            if not final.error:
                break
            time.sleep(1.0)
            final = read_back(client, ledger.qualified_name, history, PASSWORD)
        self.totals.add(check(history, [final]))
        if final.error:
            return
        if self.copies is not None:
            self.copies.put(ledger)
        else:
            delete(client, ledger)

    def start(self) -> LedgerLoop:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(timeout=1200)
        if self._thread.is_alive():
            self.totals.errors.append(f"writer slot {self.slot} did not finish")


REFUSED_AS_ENDED = {"ERROR_REASON_LEDGER_FENCED", "ERROR_REASON_LEDGER_CLOSED", "ERROR_REASON_LEDGER_OWNER_GONE"}
COPIES_DEADLINE_SECONDS = 600.0  # for the auditor to restore a closed ledger's copies after the faults


class CopyCheck:
    """Closed, checked ledgers wait here until every entry has W good copies
    on the bookies (the auditor repairs what faults left thin), then are
    deleted; one still short after COPIES_DEADLINE_SECONDS is reported."""

    def __init__(self, cluster: LocalCluster, totals: Totals) -> None:
        self.cluster, self.totals = cluster, totals
        self._waiting: list[tuple[LedgerId, float]] = []
        self._lock = threading.Lock()
        self._draining = threading.Event()
        self._thread = threading.Thread(target=self._run, name="copy-check", daemon=True)

    def put(self, ledger: LedgerId) -> None:
        with self._lock:
            self._waiting.append((ledger, time.monotonic()))

    def _run(self) -> None:
        with QuireClient(self.cluster.gateway_target, timeout=30) as client:
            while True:
                with self._lock:
                    batch, self._waiting = self._waiting, []
                if not batch and self._draining.is_set():
                    return
                for ledger, since in batch:
                    try:
                        self._check(client, ledger, since)
                    except Exception as exc:  # reported, and fails the soak; the others are still checked
                        with self.totals.lock:
                            self.totals.errors.append(f"copy check of {ledger.qualified_name}: {exc}")
                time.sleep(5.0)

    def _check(self, client: QuireClient, ledger: LedgerId, since: float) -> None:
        try:
            thin = thinly_replicated(self.cluster, client, ledger)
        except (QuireClientError, grpc.RpcError):
            thin = -1  # a fault under way: look again
        if thin and time.monotonic() - since < COPIES_DEADLINE_SECONDS:
            self.put_back(ledger, since)
            return
        with self.totals.lock:
            if thin:
                self.totals.thin_at_end.append(f"{ledger.qualified_name}: {thin} entries")
            else:
                self.totals.copies_checked += 1
        delete(client, ledger)

    def put_back(self, ledger: LedgerId, since: float) -> None:
        with self._lock:
            self._waiting.append((ledger, since))

    def start(self) -> CopyCheck:
        self._thread.start()
        return self

    def drain(self) -> None:
        """Wait until every ledger handed over is checked (or past its deadline)."""
        self._draining.set()
        self._thread.join(timeout=COPIES_DEADLINE_SECONDS + 120)
        if self._thread.is_alive():
            self.totals.errors.append("the copy check did not finish")


def abandon_read(client: QuireClient, ledger: str, lac: int) -> None:
    """Start reading up to 2,000 entries and stop after the first."""
    for _ in client.read(ledger, max(0, lac - 2000), lac):
        break  # the generator is dropped on return, which cancels the call


class Reader:
    """Tails the live ledgers: observes their LAC and reads the last entries up
    to it, recording into the ledger's history (the checker checks the bytes).
    Every fourth read asks for more and goes away after its first entry, as a
    reader that gives up does (the gateway must wind the read down cleanly)."""

    def __init__(self, cluster: LocalCluster, loops: list[LedgerLoop], totals: Totals, stop: threading.Event):
        self.cluster, self.loops, self.totals, self.stop = cluster, loops, totals, stop
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)

    def _run(self) -> None:
        with QuireClient(self.cluster.gateway_target, timeout=10) as client:
            while not self.stop.wait(0.5):
                for loop in self.loops:
                    current = loop.current
                    if current is None:
                        continue
                    name, history = current
                    try:
                        lac = observe_lac(client, name, history, READER_PROCESS)
                        if lac >= 0 and self.totals.reads % 4 == 3:
                            abandon_read(client, name, lac)
                        elif lac >= 0:
                            read_all(client, name, history, first=max(0, lac - 50), last=lac)
                        self.totals.reads += 1
                    except QuireClientError:
                        self.totals.read_failures += 1  # a fault under way; recorded in the history

    def start(self) -> Reader:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(timeout=60)


# -- faults -------------------------------------------------------------------


@dataclass
class Fault:
    t: float
    kind: str
    target: str
    seconds: float = 0.0
    error: str = ""
    # From the end of the fault (the heal, the restart, the resume) until a probe
    # creates, writes, closes and deletes a ledger through the gateway.
    to_service_seconds: float = 0.0


# bookie-3 is never killed or paused and bookie-2 only paused, so that bookies
# that live through the whole run are judged for memory. The single gateway,
# registry and placement are killed in the first third only (see Soak.faults):
# the incarnations that follow live through the last two thirds and are judged,
# while bookie kills, pauses and etcd restarts go on hitting them.
ROTATION = (
    ("kill", "bookie-1"),
    ("pause", "bookie-2"),
    ("kill", "gateway"),
    ("restart", "etcd"),
    ("kill", "registry"),
    ("kill", "bookie-1"),
    ("kill", "placement"),
    ("restart", "etcd"),
)
# With the network lab (SOAK_PARTITIONS, the default) partitions take turns with
# the kills: a process cut from all the others, the gateway cut from the metadata
# side only (registry and etcd), etcd's minority cut from its majority, and the
# gateway paused past its session lease. Each lasts PARTITION_SECONDS at random.
PARTITION_ROTATION = (
    ("kill", "bookie-1"),
    ("isolate", "bookie-1"),
    ("pause", "bookie-2"),
    ("cut-metadata", "gateway"),
    ("kill", "gateway"),
    ("etcd-minority", "etcd"),
    ("restart", "etcd"),
    ("pause-past-lease", "gateway"),
    ("kill", "registry"),
    ("isolate", "registry"),
    ("kill", "bookie-1"),
    ("isolate", "placement"),
    ("kill", "placement"),
    ("isolate", "gateway"),
)
SINGLETONS = {"gateway", "registry", "placement"}
PAUSE_SECONDS = 8.0
PARTITION_SECONDS = (5.0, 30.0)
SESSION_SECONDS = 10.0  # the gateway's default session lease (QUIRE_GATEWAY_SESSION_SECONDS)
PARTITION_KINDS = {"isolate", "cut-metadata", "etcd-minority", "pause-past-lease"}


def inject(cluster: LocalCluster, kind: str, target: str) -> None:
    if kind == "kill":
        cluster.kill(target)
        time.sleep(2.0)
        cluster.start_process(target, timeout=120)
    elif kind == "pause":
        cluster.pause(target)
        time.sleep(PAUSE_SECONDS)
        cluster.resume(target)
    elif kind == "restart":
        cluster.restart(target, timeout=120)


def partition(net: NetLab, cluster: LocalCluster, kind: str, target: str, seconds: float) -> None:
    """One partition-nemesis fault, healed after `seconds`."""
    etcd = cluster.etcd_names
    if kind == "isolate":
        net.isolate(target)
    elif kind == "cut-metadata":
        net.isolate(target, from_=["registry", *etcd])
    elif kind == "etcd-minority":
        for member in etcd[1:]:
            net.partition(etcd[0], member)
    elif kind == "pause-past-lease":
        cluster.pause(target)
        seconds += SESSION_SECONDS
    try:
        time.sleep(seconds)
    finally:
        if kind == "pause-past-lease":
            cluster.resume(target)
        else:
            net.heal()


def seconds_to_service(cluster: LocalCluster, deadline_seconds: float = 300.0) -> float:
    """How long until a ledger can be created, written, closed and deleted through the gateway."""
    started = time.monotonic()
    with QuireClient(cluster.gateway_target, timeout=10) as client:
        while time.monotonic() - started < deadline_seconds:
            try:
                ledger = new_ledger(client, History(), attempts=1)
                client.add_entry(ledger.qualified_name, b"probe")
                client.close_ledger(ledger.qualified_name)
                client.delete_ledger(ledger.qualified_name)
                return round(time.monotonic() - started, 1)
            except QuireClientError:
                time.sleep(0.5)
    raise RuntimeError(f"no service within {deadline_seconds:.0f} s")


# -- judging ------------------------------------------------------------------


def level(samples: list[dict[str, object]], key: str, start: float, end: float) -> float | None:
    """The median of `key` over samples in [start, end]."""
    values = [float(s[key]) for s in samples if start <= float(s["t"]) <= end]  # type: ignore[arg-type]
    return statistics.median(values) if values else None


def judge_growth(
    samples: list[dict[str, object]], run_seconds: float, key: str, slack: float
) -> tuple[str, float, float] | None:
    """(verdict, growth over the second third, growth over the last third) for
    one incarnation, from the medians over the last quarter of each third; None
    if it did not live through the last two thirds."""
    third = run_seconds / 3
    if not samples or float(samples[0]["t"]) > third or float(samples[-1]["t"]) < run_seconds - third / 4:  # type: ignore[arg-type]
        return None
    window = third / 4
    marks = [level(samples, key, end - window, end) for end in (third, 2 * third, run_seconds)]
    if any(m is None for m in marks):
        return None
    first, second, last = (float(m) for m in marks)  # type: ignore[arg-type]
    middle_growth, last_growth = second - first, last - second
    ok = last_growth <= max(slack, middle_growth / 2)
    return ("flat" if ok else "GROWING"), round(middle_growth, 1), round(last_growth, 1)


def scan_logs(logs: Path) -> dict[str, dict[str, object]]:
    """{log file: {pattern: count, "first": the first offending line}} for every hit."""
    found: dict[str, dict[str, object]] = {}
    for log in sorted(logs.glob("*.log")):
        hits: Counter[str] = Counter()
        first = ""
        with log.open(errors="replace") as text:
            for line in text:
                for pattern in LOG_ERRORS:
                    if pattern in line:
                        hits[pattern] += 1
                        first = first or line.strip()[:300]
        if hits:
            found[log.name] = {**hits, "first": first}
    return found


# -- the run ------------------------------------------------------------------


class Soak:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.run_seconds = settings.minutes * 60
        self.faults: list[Fault] = []
        self.rng = random.Random(int(_setting("SOAK_SEED", 1)))

    @contextlib.contextmanager
    def cluster(self) -> Iterator[tuple[NetLab | None, LocalCluster]]:
        """Four bookies and three etcd members in the network lab with the
        partition nemesis; the plain local cluster without it."""
        data_dir = self.settings.out / "cluster"
        if self.settings.partitions:
            with lab_cluster(data_dir, bookies=4, etcd_members=3) as (net, cluster):
                yield net, cluster
        else:
            with fault_cluster(data_dir) as cluster:
                yield None, cluster

    def run(self) -> int:
        out = self.settings.out
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        stop = threading.Event()
        totals = Totals()
        with self.cluster() as (net, cluster):
            started = time.monotonic()
            sampler = Sampler(cluster, out / "samples.jsonl", self.settings.sample_seconds, started)
            sampler.start()
            loops = [
                LedgerLoop(cluster, slot, self.settings, totals, stop).start() for slot in range(self.settings.writers)
            ]
            reader = Reader(cluster, loops, totals, stop).start()
            copies = CopyCheck(cluster, totals).start()
            for loop in loops:
                loop.copies = copies
            try:
                self._inject_faults(cluster, net, started)
            finally:
                stop.set()
                for loop in loops:
                    loop.join()
                reader.join()
                copies.drain()
                sampler.close()
            elapsed = time.monotonic() - started
            log_errors = scan_logs(cluster.data_dir / "logs")
        return self._report(sampler.samples, totals, log_errors, elapsed)

    def _inject_faults(self, cluster: LocalCluster, net: NetLab | None, started: float) -> None:
        rotation = ROTATION if net is None else PARTITION_ROTATION
        step = 0
        while True:
            now = time.monotonic() - started
            next_at = (len(self.faults) + 1) * self.settings.fault_seconds
            if next_at > self.run_seconds - self.settings.fault_seconds / 2:
                time.sleep(max(0.0, self.run_seconds - now))
                return
            time.sleep(max(0.0, next_at - now))
            kind, target = rotation[step % len(rotation)]
            step += 1
            while kind == "kill" and target in SINGLETONS and next_at > self.run_seconds / 3:
                kind, target = rotation[step % len(rotation)]
                step += 1
            fault = Fault(round(time.monotonic() - started, 1), kind, target)
            began = time.monotonic()
            try:
                if net is not None and kind in PARTITION_KINDS:
                    partition(net, cluster, kind, target, self.rng.uniform(*PARTITION_SECONDS))
                else:
                    inject(cluster, kind, target)
                fault.seconds = round(time.monotonic() - began, 1)
                fault.to_service_seconds = seconds_to_service(cluster)
            except Exception as exc:  # a service that does not come back fails the soak
                fault.error = f"{type(exc).__name__}: {exc}"
                fault.seconds = round(time.monotonic() - began, 1)
            self.faults.append(fault)
            print(f"[soak] t={fault.t:.0f}s {kind} {target} ({fault.seconds}s, service after "
                  f"{fault.to_service_seconds}s) {fault.error}", flush=True)  # fmt: skip

    def _report(
        self, samples: list[dict[str, object]], totals: Totals, log_errors: dict[str, dict[str, object]], elapsed: float
    ) -> int:
        incarnations: dict[tuple[str, int], list[dict[str, object]]] = {}
        for row in samples:
            incarnations.setdefault((str(row["process"]), int(row["pid"])), []).append(row)  # type: ignore[call-overload]
        rows = []
        failures: list[str] = []
        for (name, pid), series in incarnations.items():
            memory = judge_growth(series, elapsed, "rss_mb", RSS_SLACK_MB)
            fds = judge_growth(series, elapsed, "fds", FDS_SLACK)
            middle = series[len(series) // 2]
            rows.append({
                "process": name, "pid": pid, "from_s": series[0]["t"], "to_s": series[-1]["t"],
                "rss_mb": [series[0]["rss_mb"], middle["rss_mb"], series[-1]["rss_mb"]],
                "fds": [series[0]["fds"], middle["fds"], series[-1]["fds"]],
                "rss_verdict": memory, "fds_verdict": fds,
                "fd_kinds_end": series[-1]["fd_kinds"],
            })  # fmt: skip
            for what, judged in (("RSS", memory), ("open fds", fds)):
                if judged is not None and judged[0] != "flat":
                    failures.append(f"{name} (pid {pid}) {what} still growing: +{judged[1]} then +{judged[2]}")
        verdict = totals.verdict
        if verdict.acked_lost or verdict.wrong_bytes or not verdict.clean:
            failures.append(f"checker: {verdict.figures()}")
        if verdict.read_errors:
            failures.append(f"ledgers not read back: {verdict.read_errors[:5]}")
        failures.extend(totals.errors)
        failures.extend(f"fault {f.kind} {f.target} at {f.t}s: {f.error}" for f in self.faults if f.error)
        failures.extend(f"entries short of their write quorum's copies: {thin}" for thin in totals.thin_at_end)
        longest: dict[str, float] = {}
        for f in self.faults:
            longest[f.kind] = max(longest.get(f.kind, 0.0), f.to_service_seconds)
        for log, hits in log_errors.items():
            failures.append(f"{log}: {hits}")
        summary = {
            "minutes": round(elapsed / 60, 1),
            "faults": [asdict(f) for f in self.faults],
            "fault_counts": dict(Counter(f"{f.kind} {f.target}" for f in self.faults)),
            "longest_to_service_seconds": longest,
            "refused_as_ended": dict(totals.refused),
            "ledgers_at_full_copies": totals.copies_checked,
            "ledgers_thin_at_end": totals.thin_at_end,
            "ledgers": totals.ledgers,
            "tail_reads": totals.reads,
            "tail_read_failures": totals.read_failures,
            "verdict": verdict.figures(),
            "log_errors": log_errors,
            "processes": rows,
            "failures": failures,
        }
        out = self.settings.out
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out / "report.md").write_text(markdown(summary))
        print((out / "report.md").read_text())
        return 1 if failures else 0


def markdown(summary: dict) -> str:  # type: ignore[type-arg]
    v = summary["verdict"]
    lines = [
        f"# Soak: {summary['minutes']} minutes",
        "",
        f"- faults: {len(summary['faults'])} ({', '.join(f'{k} x{n}' for k, n in summary['fault_counts'].items())})",
        f"- ledgers written, checked and deleted: {summary['ledgers']}; acked entries {v['acked']}, "
        f"acked_lost {v['acked_lost']}, wrong_bytes {v['wrong_bytes']}, unknown adds {v['unknown_adds']}",
        f"- tail reads: {summary['tail_reads']} ({summary['tail_read_failures']} failed during faults)",
        f"- longest time from a fault's end to full service, by kind (s): {summary['longest_to_service_seconds']}",
        f"- writers refused as their ledger was ended elsewhere: {summary['refused_as_ended'] or 'none'}",
        f"- closed ledgers back at W copies of every entry: {summary['ledgers_at_full_copies']}; "
        f"still short at the end: {len(summary['ledgers_thin_at_end'])}",
        f"- log errors: {summary['log_errors'] or 'none'}",
        "",
        "| process | pid | lived (s) | RSS MB start / mid / end | fds start / mid / end "
        "| RSS growth 2nd / 3rd third | fds growth 2nd / 3rd third |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary["processes"]:
        memory, fds = row["rss_verdict"], row["fds_verdict"]
        lines.append(
            f"| {row['process']} | {row['pid']} | {row['from_s']:.0f}-{row['to_s']:.0f} | "
            f"{' / '.join(map(str, row['rss_mb']))} | {' / '.join(map(str, row['fds']))} | "
            f"{f'{memory[1]:+} / {memory[2]:+} ({memory[0]})' if memory else 'not judged'} | "
            f"{f'{fds[1]:+} / {fds[2]:+} ({fds[0]})' if fds else 'not judged'} |"
        )
    lines += ["", "## Result", ""]
    lines += [f"- FAIL: {f}" for f in summary["failures"]] or ["- PASS"]
    return "\n".join(lines) + "\n"


def main() -> int:
    return Soak(Settings.from_env()).run()


if __name__ == "__main__":
    sys.exit(main())
