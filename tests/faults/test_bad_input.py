"""Bad input rows (BAD-1 … BAD-12): hostile ids, entry ids, sizes, quorums,
BookieIds, service infos, protobuf bytes, deadlines, overload, admin HTTP
requests, command lines and settings, each against one real local cluster.

Every row runs a fixed, seeded corpus and counts how the services answered:
a wrong code, an UNKNOWN/INTERNAL, a traceback, a crash or a leak is a
failure. The row's figures go into the scenario record (docs/faults.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from quire_api.bookie_addresses import bookie_rpc_address
from quire_api.errors import QuireError
from quire_api.ids import U64_MAX, LedgerId, ledger_id_to_proto
from quire_client import QuireClient, cli
from quire_client.client import QuireClientError
from quire_client.cluster import LocalCluster, StandaloneBookie, free_port, grpc_serving
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.fuzz.rpc import FORBIDDEN_CODES, all_methods, call_raw, varint

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

Code = grpc.StatusCode  # for values; annotations spell grpc.StatusCode
MAX_ENTRY_BYTES = 1024 * 1024  # the gateway's configured entry limit in this module
MAX_INFLIGHT_BYTES = 1024 * 1024  # the gateway's per-ledger in-flight limit in this module (its minimum)
SESSION_WINDOW_ENTRIES = 1000  # entries a write session takes beyond what it has answered, in this module
PASSWORD = b"bad-input"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {
        "QUIRE_GATEWAY_MAX_ENTRY_BYTES": str(MAX_ENTRY_BYTES),
        "QUIRE_GATEWAY_MAX_INFLIGHT_BYTES": str(MAX_INFLIGHT_BYTES),
        "QUIRE_GATEWAY_SESSION_WINDOW_ENTRIES": str(SESSION_WINDOW_ENTRIES),
    }
    with fault_cluster(tmp_path_factory.mktemp("bad-input"), env=env) as local:
        yield local


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[QuireClient]:
    with QuireClient(cluster.gateway_target, timeout=30) as quire:
        yield quire


@pytest.fixture(scope="module")
def channels(cluster: LocalCluster) -> Iterator[dict[str, grpc.Channel]]:
    big = [("grpc.max_send_message_length", 128 * 1024 * 1024), ("grpc.max_receive_message_length", 128 * 1024**2)]
    opened = {
        "gateway": grpc.insecure_channel(cluster.gateway_target, options=big),
        "registry": grpc.insecure_channel(cluster.registry_target),
        "placement": grpc.insecure_channel(cluster.placement_target),
        "bookie": grpc.insecure_channel(cluster.bookie_id("bookie-1"), options=big),
    }
    yield opened
    for channel in opened.values():
        channel.close()


# -- the tally every row keeps ------------------------------------------------------------------


@dataclass
class Case:
    name: str
    expected: frozenset[grpc.StatusCode]
    got: grpc.StatusCode
    details: str
    mentions_ok: bool

    @property
    def ok(self) -> bool:
        return self.got in self.expected and self.mentions_ok and not _leaks_traceback(self.details)


def _leaks_traceback(text: str) -> bool:
    return "Traceback" in text or 'File "' in text


@dataclass
class Tally:
    cases: list[Case] = field(default_factory=list)

    def expect(
        self,
        name: str,
        expected: grpc.StatusCode | Sequence[grpc.StatusCode],
        call: Callable[[], object],
        *,
        mentions: Sequence[str] = (),
    ) -> Case:
        """Run `call`; record the status it ends with (OK, a gRPC code, or the
        code of a QuireError refused in the client before any call)."""
        try:
            result = call()
            if isinstance(result, Iterator):
                for _ in result:
                    pass
            got, details = Code.OK, ""
        except grpc.RpcError as exc:
            got, details = exc.code(), exc.details() or ""  # type: ignore[attr-defined]
        except QuireClientError as exc:
            got, details = exc.code, exc.message
        except QuireError as exc:
            got, details = Code[exc.code], exc.message
        wanted = frozenset([expected] if isinstance(expected, Code) else expected)
        case = Case(name, wanted, got, details, all(m in details for m in mentions))
        self.cases.append(case)
        return case

    def figures(self) -> dict[str, Any]:
        return {
            "corpus": len(self.cases),
            "wrong_codes": sum(1 for c in self.cases if not c.ok),
            "unknown_or_internal": sum(1 for c in self.cases if c.got in FORBIDDEN_CODES),
            "codes": dict(Counter(c.got.name for c in self.cases)),
        }

    def failures(self) -> list[str]:
        return [
            f"{c.name}: expected {sorted(e.name for e in c.expected)}, got {c.got.name}: {c.details[:200]}"
            for c in self.cases
            if not c.ok
        ]


def finish_tally(scenario: Scenario, tally: Tally) -> None:
    scenario.figures.update(tally.figures())
    assert scenario.figures["unknown_or_internal"] == 0, tally.failures()
    assert scenario.figures["wrong_codes"] == 0, tally.failures()


# -- helpers ---------------------------------------------------------------------------------------


def quire_cli(cluster: LocalCluster, *args: str, gateway: str | None = None, registry: str | None = None) -> Any:
    return subprocess.run(
        [
            sys.executable, "-m", "quire_client.cli",
            "--gateway", gateway or cluster.gateway_target,
            "--registry", registry or cluster.registry_target,
            "--placement", cluster.placement_target,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip


def quire_in_process(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The same command through `quire_client.cli.main` in this process: no
    interpreter start per run. An exception escaping main is what a user
    would see as a traceback."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["--gateway", cluster.gateway_target, "--registry", cluster.registry_target, *args]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            traceback.print_exc()
            status = 1
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def parallel(jobs: Sequence[Callable[[], Any]], workers: int = 4) -> list[Any]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: job(), jobs))


def json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in KiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def gateway_pid(cluster: LocalCluster) -> int:
    pid = cluster.pid("gateway")
    assert pid is not None, "the gateway is not running"
    return pid


def admin_status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10) as response:
        return dict(json.loads(response.read()))


def new_ledger(client: QuireClient, **options: Any) -> LedgerId:
    metadata = client.create_ledger(password=PASSWORD, **options)
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)


def everything_serving(cluster: LocalCluster) -> list[str]:
    return [
        name
        for name, process in cluster.processes.items()
        if process.health_target is not None and not grpc_serving(process.health_target)
    ]


# -- BAD-1 ledger id edges ---------------------------------------------------------------------------

VALID_IDS = [(0, 1), (0, U64_MAX), (1, 0), (U64_MAX, 0), (U64_MAX, U64_MAX), (5, 2**63 - 1)]
MALFORMED_NAMES = [
    "0000000g-0000-0000-0000-000000000001",  # not hex
    "00000000-0000-0000-0000-00000000001",  # 35 characters
    "00000000-0000-0000-0000-0000000000001",  # 37 characters
    "0000000000000000000000000000001",  # 31 hex digits
    "000000000000000000000000000000001",  # 33 hex digits
    "00000000_0000-0000-0000-000000000001",  # wrong separator
    "{00000000-0000-0000-0000-000000000001}",  # braces
    "00000000-0000-0000-0000-00000000000\uff11",  # a full-width digit
    "-1:5",
    "1:-5",
    "18446744073709551616:1",  # scope 2^64
    "1:18446744073709551616",  # ledger 2^64
    "abc:1",
    "1:",
    ":1",
    "1.5:2",
    "0x10:1",
    "\uff11:\uff12",  # full-width digits
    " ",
    "nonsense",
]


def test_bad1_ledger_id_edges(cluster: LocalCluster, channels: dict[str, grpc.Channel], scenario: Scenario) -> None:
    scenario.start("BAD-1", valid_ids=len(VALID_IDS), malformed_names=len(MALFORMED_NAMES))
    tally = Tally()
    gateway = ledger_pb2_grpc.LedgerServiceStub(channels["gateway"])
    round_trips = 0

    # Valid edges round-trip exactly: the API, the qualified name and the CLI.
    for scope, ledger in VALID_IDS:
        wanted = LedgerId(scope, ledger)
        proto = ledger_id_to_proto(wanted)
        case = tally.expect(
            f"create {scope}:{ledger}",
            Code.OK,
            partial(
                gateway.CreateLedger, ledger_pb2.CreateLedgerRequest(ledger_id=proto, password=PASSWORD), timeout=30
            ),
        )
        if case.got != Code.OK:
            continue
        gateway.AddEntry(ledger_pb2.AddEntryRequest(ledger_id=proto, payload=b"edge"), timeout=30)
        metadata = gateway.GetLedgerMetadata(ledger_pb2.GetLedgerMetadataRequest(ledger_id=proto), timeout=30)
        read = [
            e.payload
            for r in gateway.ReadEntries(ledger_pb2.ReadEntriesRequest(ledger_id=proto, last_entry_id=-1), timeout=30)
            for e in r.entries
        ]
        forms = (wanted.qualified_name, f"{scope}:{ledger}", wanted.qualified_name.upper())
        shown = [
            json_or_none(result.stdout)
            for result in parallel(
                [partial(quire_cli, cluster, "ledger", "meta", "-o", "json", "--", t) for t in forms]
            )
        ]
        exact = (
            (metadata.metadata.ledger_id.scope_id, metadata.metadata.ledger_id.ledger_id) == (scope, ledger)
            and read == [b"edge"]
            and all(s is not None and s.get("ledger") == wanted.qualified_name for s in shown)
            and LedgerId.parse(wanted.qualified_name) == wanted
        )
        round_trips += exact
        assert exact, (wanted, metadata, read, shown)
        gateway.DeleteLedger(ledger_pb2.DeleteLedgerRequest(ledger_id=proto), timeout=30)

    # A scope at the top of the range, scoped creation.
    case = tally.expect(
        "create in scope 2^64-1",
        Code.OK,
        lambda: gateway.CreateLedger(ledger_pb2.CreateLedgerRequest(scope_id=U64_MAX, password=PASSWORD), timeout=30),
    )
    # scope 0, ledger 0 names no ledger; an absent ledger id neither.
    for name, request in (
        ("create 0:0", ledger_pb2.CreateLedgerRequest(ledger_id=common_pb2.LedgerId())),
        ("meta without ledger_id", ledger_pb2.GetLedgerMetadataRequest()),
        ("meta 0:0", ledger_pb2.GetLedgerMetadataRequest(ledger_id=common_pb2.LedgerId())),
        ("read without ledger_id", ledger_pb2.ReadEntriesRequest()),
    ):
        method = {
            ledger_pb2.CreateLedgerRequest: gateway.CreateLedger,
            ledger_pb2.GetLedgerMetadataRequest: gateway.GetLedgerMetadata,
            ledger_pb2.ReadEntriesRequest: gateway.ReadEntries,
        }[type(request)]
        tally.expect(
            name,
            Code.INVALID_ARGUMENT,
            partial(method, request, timeout=30),
            mentions=["ledger_id"],
        )

    # Malformed names through the CLI (in this process; the first also as a process):
    # exit 2 (refused before sending), a JSON error naming the id, never a traceback.
    results = [quire_in_process(cluster, "ledger", "meta", "-o", "json", "--", text) for text in MALFORMED_NAMES]
    results[0] = quire_cli(cluster, "ledger", "meta", "-o", "json", "--", MALFORMED_NAMES[0])  # and once as a process
    cli_bad = 0
    for text, result in zip(MALFORMED_NAMES, results, strict=True):
        error = (json_or_none(result.stdout) or {}).get("error", {})
        fine = (
            result.returncode == 2
            and error.get("code") == "INVALID_ARGUMENT"
            and error.get("reason") == "ERROR_REASON_INVALID_LEDGER_ID"
            and any(name in error.get("message", "") for name in ("ledger id", "scope_id", "ledger_id"))
            and not _leaks_traceback(result.stderr)
        )
        cli_bad += not fine
        tally.cases.append(
            Case(
                f"cli {text!r}",
                frozenset([Code.INVALID_ARGUMENT]),
                Code[error.get("code", "UNKNOWN")],
                result.stderr,
                fine,
            )
        )

    # JSON (the protobuf JSON mapping a JSON client uses): u64 as a string
    # round-trips exactly; negatives, 2^64 and non-numbers are refused naming the field.
    exact_json = json_format.Parse(
        '{"ledgerId": {"scopeId": "18446744073709551615", "ledgerId": "0"}}', ledger_pb2.GetLedgerMetadataRequest()
    )
    json_exact = exact_json.ledger_id.scope_id == U64_MAX
    json_refused = 0
    bad_json = ['"-1"', "-1", '"18446744073709551616"', "18446744073709551616", '"abc"', "1.5", '"1e3x"', "true"]
    for value in bad_json:
        try:
            json_format.Parse(
                f'{{"ledgerId": {{"scopeId": {value}, "ledgerId": "1"}}}}', ledger_pb2.GetLedgerMetadataRequest()
            )
        except json_format.ParseError as exc:
            json_refused += "scopeId" in str(exc) or "scope_id" in str(exc)

    scenario.figures.update(
        valid_round_trips=round_trips,
        cli_malformed_names=len(MALFORMED_NAMES),
        cli_wrongly_answered=cli_bad,
        json_u64_exact=json_exact,
        json_refused_naming_field=f"{json_refused}/{len(bad_json)}",
    )
    assert round_trips == len(VALID_IDS)
    assert json_exact and json_refused == len(bad_json)
    finish_tally(scenario, tally)


# -- BAD-2 entry id misuse ---------------------------------------------------------------------------


def test_bad2_entry_id_misuse(
    cluster: LocalCluster, client: QuireClient, channels: dict[str, grpc.Channel], scenario: Scenario
) -> None:
    scenario.start("BAD-2")
    tally = Tally()
    gateway = ledger_pb2_grpc.LedgerServiceStub(channels["gateway"])
    ledger = new_ledger(client)
    client.append_all(ledger, [b"e%d" % i for i in range(10)])  # entries 0..9, LAC 9
    proto = ledger_id_to_proto(ledger)

    def read(first: int, last: int, unconfirmed: bool = False) -> Callable[[], object]:
        if unconfirmed:
            return lambda: gateway.ReadUnconfirmedEntries(
                ledger_pb2.ReadUnconfirmedEntriesRequest(ledger_id=proto, first_entry_id=first, last_entry_id=last),
                timeout=30,
            )
        return lambda: gateway.ReadEntries(
            ledger_pb2.ReadEntriesRequest(ledger_id=proto, first_entry_id=first, last_entry_id=last), timeout=30
        )

    invalid, out_of_range = Code.INVALID_ARGUMENT, Code.OUT_OF_RANGE
    tally.expect("read first > last", invalid, read(5, 3), mentions=["first_entry_id"])
    tally.expect("read negative first", invalid, read(-1, 3), mentions=["first_entry_id"])
    tally.expect("read last < -1", invalid, read(0, -2), mentions=["last_entry_id"])
    tally.expect("read int64 min", invalid, read(-(2**63), 3))
    tally.expect("read beyond LAC", out_of_range, read(0, 10))
    tally.expect("read far beyond LAC", out_of_range, read(2**63 - 1, 2**63 - 1))
    tally.expect("unconfirmed up to 'LAC'", invalid, read(0, -1, unconfirmed=True))
    tally.expect("unconfirmed first > last", invalid, read(3, 1, unconfirmed=True))
    tally.expect("unconfirmed never written", Code.NOT_FOUND, read(10, 12, unconfirmed=True))
    tally.expect("unconfirmed within", Code.OK, read(0, 9, unconfirmed=True))
    tally.expect(
        "tail negative first",
        invalid,
        lambda: gateway.TailEntries(ledger_pb2.TailEntriesRequest(ledger_id=proto, first_entry_id=-1), timeout=30),
    )
    # A closed ledger: no more adds, reads end at its last entry.
    client.close_ledger(ledger)
    precondition = Code.FAILED_PRECONDITION
    tally.expect(
        "add on closed",
        precondition,
        lambda: gateway.AddEntry(ledger_pb2.AddEntryRequest(ledger_id=proto, payload=b"late"), timeout=30),
        mentions=["closed"],
    )
    tally.expect(
        "append on closed",
        precondition,
        lambda: gateway.AppendEntries(
            iter([ledger_pb2.AppendEntriesRequest(ledger_id=proto, payloads=[b"late"])]), timeout=30
        ),
    )
    tally.expect("read past the end of closed", out_of_range, read(0, 10))
    tally.expect("unconfirmed past the end of closed", [Code.NOT_FOUND, out_of_range], read(10, 10, unconfirmed=True))
    tally.expect("read all of closed", Code.OK, read(0, -1))

    # The bookie's own API names entry ids explicitly.
    bookie = bookie_pb2_grpc.BookieServiceStub(channels["bookie"])
    target = LedgerId(0xBAD2, random.Random(scenario.seed).getrandbits(62))
    target_proto = ledger_id_to_proto(target)
    digester, key = Digester(DigestType.CRC32C, PASSWORD), master_key(PASSWORD)

    def add(entry_id: int, header_entry: int | None = None, mkey: bytes = key) -> Callable[[], object]:
        data = pack_entry(target, header_entry if header_entry is not None else entry_id, -1, 1, b"x", digester)
        return lambda: bookie.AddEntries(
            bookie_pb2.AddEntriesRequest(
                ledger_id=target_proto, master_key=mkey, entries=[bookie_pb2.PackedEntry(entry_id=entry_id, data=data)]
            ),
            timeout=30,
        )

    # Bookies take entries in any order and a resend of the same entry: the
    # writer's LAC orders them and an ensemble change resends (BookKeeper's rule).
    tally.expect("bookie gap: 5 before 4", Code.OK, add(5))
    tally.expect("bookie gap: then 4", Code.OK, add(4))
    tally.expect("bookie duplicate 4", Code.OK, add(4))
    tally.expect("bookie negative entry id", invalid, add(-1, header_entry=0))
    tally.expect("bookie header differs", invalid, add(6, header_entry=7))
    tally.expect("bookie wrong master key", Code.PERMISSION_DENIED, add(6, mkey=b"\0" * 20))
    tally.expect("bookie short master key", invalid, add(6, mkey=b"short"))
    tally.expect(
        "bookie read negative",
        invalid,
        lambda: bookie.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=target_proto, entry_id=-2), timeout=30),
    )
    tally.expect(
        "bookie read never written",
        Code.NOT_FOUND,
        lambda: bookie.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=target_proto, entry_id=6), timeout=30),
    )
    tally.expect(
        "bookie range first > last",
        invalid,
        lambda: bookie.ReadEntries(
            bookie_pb2.ReadEntriesRequest(
                ledger_id=target_proto, range=bookie_pb2.EntryRange(first_entry_id=5, last_entry_id=3)
            ),
            timeout=30,
        ),
    )
    tally.expect(
        "bookie negative entry in list",
        invalid,
        lambda: bookie.ReadEntries(bookie_pb2.ReadEntriesRequest(ledger_id=target_proto, entry_ids=[-1]), timeout=30),
    )
    bookie.FenceLedger(bookie_pb2.FenceLedgerRequest(ledger_id=target_proto, master_key=key), timeout=30)
    tally.expect("bookie add after fence", precondition, add(6))
    bookie.DeleteLedger(bookie_pb2.DeleteLedgerRequest(ledger_id=target_proto), timeout=30)
    finish_tally(scenario, tally)


# -- BAD-3 oversized entries ------------------------------------------------------------------------


def test_bad3_oversized_entries(
    cluster: LocalCluster, client: QuireClient, channels: dict[str, grpc.Channel], scenario: Scenario
) -> None:
    calls = 100
    scenario.start("BAD-3", configured_max_bytes=MAX_ENTRY_BYTES, rss_calls=calls, rss_entry_bytes=4 * 1024**2 + 1)
    tally = Tally()
    gateway = ledger_pb2_grpc.LedgerServiceStub(channels["gateway"])
    ledger = new_ledger(client)
    proto = ledger_id_to_proto(ledger)

    def add(size: int) -> Callable[[], object]:
        return lambda: gateway.AddEntry(ledger_pb2.AddEntryRequest(ledger_id=proto, payload=b"\0" * size), timeout=60)

    exhausted = Code.RESOURCE_EXHAUSTED
    tally.expect("at the configured max", Code.OK, add(MAX_ENTRY_BYTES))
    tally.expect("configured max + 1", exhausted, add(MAX_ENTRY_BYTES + 1), mentions=[str(MAX_ENTRY_BYTES)])
    tally.expect("4 MiB + 1", exhausted, add(4 * 1024**2 + 1))
    tally.expect(
        "in a write session",
        exhausted,
        lambda: gateway.AppendEntries(
            iter([ledger_pb2.AppendEntriesRequest(ledger_id=proto, payloads=[b"a", b"\0" * (MAX_ENTRY_BYTES + 1)])]),
            timeout=60,
        ),
    )
    tally.expect("above the 64 MiB message limit", exhausted, add(65 * 1024**2))
    tally.expect("the ledger still takes entries", Code.OK, add(10))
    bookie = bookie_pb2_grpc.BookieServiceStub(channels["bookie"])
    target = LedgerId(0xBAD3, 1)
    big = pack_entry(target, 0, -1, 1, b"\0" * (5 * 1024**2 + 1), Digester(DigestType.CRC32C))
    tally.expect(
        "bookie: above its 5 MiB limit",
        exhausted,
        lambda: bookie.AddEntries(
            bookie_pb2.AddEntriesRequest(
                ledger_id=ledger_id_to_proto(target),
                master_key=master_key(b""),
                entries=[bookie_pb2.PackedEntry(entry_id=0, data=big)],
            ),
            timeout=60,
        ),
    )

    pid = gateway_pid(cluster)
    payload = b"\0" * (4 * 1024**2 + 1)
    request = ledger_pb2.AddEntryRequest(ledger_id=proto, payload=payload)
    answers: Counter[str] = Counter()

    def refused_adds() -> int:
        """RSS growth in KiB over `calls` refused 4 MiB adds, one at a time."""
        before, _ = rss_kib(pid)
        for _ in range(calls):
            try:
                gateway.AddEntry(request, timeout=60)
                answers["OK"] += 1
            except grpc.RpcError as exc:
                answers[exc.code().name] += 1  # type: ignore[attr-defined]
        after, _ = rss_kib(pid)
        return after - before

    # The first round fills what the allocator keeps of 4 MiB buffers between requests (grpc's
    # slices, the bytes and the parsed message, across its arenas): 20-96 MiB here, more on a busy
    # machine. Retaining a refused request would add another 4 MiB for each call of the second.
    warm_growth = refused_adds()
    growth = refused_adds()
    scenario.figures.update(
        rss_warm_round_growth_kib=warm_growth,
        rss_growth_kib=growth,
        rss_peak_kib=rss_kib(pid)[1],
        oversized_answers=dict(answers),
    )
    assert answers == Counter({"RESOURCE_EXHAUSTED": 2 * calls}), answers
    assert growth < calls * 4 * 1024 // 4, scenario.figures
    finish_tally(scenario, tally)


# -- BAD-4 invalid quorum parameters ----------------------------------------------------------------


def test_bad4_invalid_quorums(
    cluster: LocalCluster, client: QuireClient, channels: dict[str, grpc.Channel], scenario: Scenario
) -> None:
    scenario.start("BAD-4", bookies=len(cluster.bookie_names))
    tally = Tally()
    gateway = ledger_pb2_grpc.LedgerServiceStub(channels["gateway"])
    placement = placement_pb2_grpc.PlacementServiceStub(channels["placement"])
    registry = registry_pb2_grpc.RegistryServiceStub(channels["registry"])

    def create(e: int, w: int, a: int) -> Callable[[], object]:
        return lambda: gateway.CreateLedger(
            ledger_pb2.CreateLedgerRequest(ensemble_size=e, write_quorum_size=w, ack_quorum_size=a), timeout=30
        )

    invalid = Code.INVALID_ARGUMENT
    tally.expect("E < W", invalid, create(2, 3, 2), mentions=["E=2", "W=3"])
    tally.expect("W < A", invalid, create(3, 2, 3), mentions=["W=2", "A=3"])
    tally.expect("E < W < A", invalid, create(1, 2, 3), mentions=["E=1"])
    tally.expect("E > bookies", Code.UNAVAILABLE, create(5, 2, 2), mentions=["5", "3"])
    tally.expect("E = 2^32-1", Code.UNAVAILABLE, create(2**32 - 1, 2, 2), mentions=[str(2**32 - 1)])
    # Zero is "the default" in CreateLedger (proto3 cannot tell it from unset): A=0 gets min(2, W).
    tally.expect("A = 0 means the default", Code.OK, create(3, 3, 0))
    defaulted = gateway.CreateLedger(
        ledger_pb2.CreateLedgerRequest(ensemble_size=3, write_quorum_size=3, ack_quorum_size=0), timeout=30
    ).metadata
    tally.expect(
        "client: negative E",
        invalid,
        lambda: client.create_ledger(ensemble_size=-1),
        mentions=["ensemble_size"],
    )
    for e, w, a in ((2, 3, 2), (3, 2, 3), (3, 2, 0)):
        tally.expect(
            f"placement {e}/{w}/{a}",
            invalid,
            partial(
                placement.NewEnsemble,
                placement_pb2.NewEnsembleRequest(ensemble_size=e, write_quorum_size=w, ack_quorum_size=a),
                timeout=30,
            ),
            mentions=[f"A={a}"],
        )
    bookies = [cluster.bookie_id(name) for name in cluster.bookie_names]
    for e, w, a in ((3, 2, 0), (2, 3, 2), (3, 2, 3)):
        metadata = common_pb2.LedgerMetadata(
            ensemble_size=e,
            write_quorum_size=w,
            ack_quorum_size=a,
            state=common_pb2.LEDGER_STATE_OPEN,
            last_entry_id=-1,
            ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=bookies[:e])],
        )
        tally.expect(
            f"registry metadata {e}/{w}/{a}",
            invalid,
            partial(
                registry.CreateLedgerMetadata, registry_pb2.CreateLedgerMetadataRequest(metadata=metadata), timeout=30
            ),
            mentions=[f"E={e}", f"W={w}", f"A={a}"],
        )
    cli = quire_cli(cluster, "ledger", "create", "-e", "2", "-w", "3")
    scenario.figures.update(cli_exit_code_e_below_w=cli.returncode, ack_quorum_for_zero=defaulted.ack_quorum_size)
    assert cli.returncode == 1 and "INVALID_QUORUM" in cli.stderr and "E=2" in cli.stderr, cli.stderr
    assert defaulted.ack_quorum_size == 2, defaulted
    finish_tally(scenario, tally)


# -- BAD-5 BookieId validation ---------------------------------------------------------------------

INVALID_BOOKIE_IDS = [
    "", "readonly", "READONLY", "ReadOnly", "rEaDoNlY", "bad id", " lead", "trail ", "a/b", "a@b", "a[b", "a]b",
    "a^b", "a\\b", "a\nb", "a\tb", "a\x00b", "a#b", "a?b", "a%2fb", "bookié", "日本", "b\u200bo", "x" * 256, "y" * 300,
]  # fmt: skip
VALID_EDGE_BOOKIE_IDS = ["z" * 255, "a_b.c:d-e", "readonly1"]


def register(
    registry: registry_pb2_grpc.RegistryServiceStub,
    bookie_id: str,
    info: common_pb2.BookieServiceInfo | None = None,
    then: common_pb2.BookieServiceInfo | None = None,
) -> Callable[[], object]:
    """A registration session: one request (a second one with `then`), then
    the stream ends and the registry drops the registration. Read-only, so
    placement never picks a probe."""

    def requests() -> Iterator[registry_pb2.RegisterBookieRequest]:
        yield registry_pb2.RegisterBookieRequest(bookie_id=bookie_id, read_only=True, service_info=info)
        if then is not None:
            yield registry_pb2.RegisterBookieRequest(bookie_id=bookie_id, read_only=True, service_info=then)

    return lambda: registry.RegisterBookie(requests(), timeout=30)


def registered_ids(registry: registry_pb2_grpc.RegistryServiceStub) -> set[str]:
    listed = registry.ListBookies(registry_pb2.ListBookiesRequest(state=registry_pb2.BOOKIE_STATE_ALL), timeout=30)
    return {record.bookie_id for record in listed.bookies}


def test_bad5_bookie_id_validation(
    cluster: LocalCluster, channels: dict[str, grpc.Channel], scenario: Scenario, tmp_path: Any
) -> None:
    scenario.start("BAD-5", invalid_ids=len(INVALID_BOOKIE_IDS), valid_edges=len(VALID_EDGE_BOOKIE_IDS))
    tally = Tally()
    registry = registry_pb2_grpc.RegistryServiceStub(channels["registry"])
    invalid = Code.INVALID_ARGUMENT
    for bookie_id in INVALID_BOOKIE_IDS:
        tally.expect(f"register {bookie_id[:20]!r}", invalid, register(registry, bookie_id), mentions=["BookieId"])
        tally.expect(
            f"lookup {bookie_id[:20]!r}",
            invalid,
            partial(
                registry.GetBookieServiceInfo, registry_pb2.GetBookieServiceInfoRequest(bookie_id=bookie_id), timeout=30
            ),
        )
        tally.expect(
            f"cookie {bookie_id[:20]!r}",
            invalid,
            partial(registry.GetCookie, registry_pb2.GetCookieRequest(bookie_id=bookie_id), timeout=30),
        )
    for bookie_id in VALID_EDGE_BOOKIE_IDS:
        tally.expect(f"register valid {bookie_id[:20]!r}", Code.OK, register(registry, bookie_id))
    accepted = registered_ids(registry) & set(INVALID_BOOKIE_IDS)

    # The bookie's own setting: refused at start, naming the variable, no traceback.
    config_ids = ["a@b", "ReadOnly", "bookié", "a/b"]

    def boot(bookie_id: str) -> subprocess.CompletedProcess[str]:
        bookie = StandaloneBookie(tmp_path / f"b{config_ids.index(bookie_id)}", env={"QUIRE_BOOKIE_ID": bookie_id})
        return subprocess.run(
            [sys.executable, "-m", "quire_bookie"], env=bookie.env, capture_output=True, text=True, timeout=60
        )

    boots = parallel([partial(boot, b) for b in config_ids])
    config_bad = [
        (b, r.returncode, r.stderr[-300:])
        for b, r in zip(config_ids, boots, strict=True)
        if r.returncode == 0 or "QUIRE_BOOKIE_ID" not in r.stderr or _leaks_traceback(r.stderr)
    ]
    scenario.figures.update(
        invalid_accepted=len(accepted), config_ids=len(config_ids), config_not_refused=len(config_bad)
    )
    assert not accepted and not config_bad, (accepted, config_bad)
    finish_tally(scenario, tally)


# -- BAD-6 BookieServiceInfo validation ------------------------------------------------------------


def endpoint(
    id: str = "rpc", port: int = 3181, protocol: str = "bookie-rpc", host: str = "127.0.0.1"
) -> common_pb2.Endpoint:
    return common_pb2.Endpoint(id=id, host=host, port=port, protocol=protocol)


def test_bad6_service_info_validation(
    cluster: LocalCluster, channels: dict[str, grpc.Channel], scenario: Scenario
) -> None:
    scenario.start("BAD-6")
    tally = Tally()
    registry = registry_pb2_grpc.RegistryServiceStub(channels["registry"])
    Info = common_pb2.BookieServiceInfo
    bad_infos = {
        "port 0": Info(endpoints=[endpoint(port=0)]),
        "port 70000": Info(endpoints=[endpoint(port=70000)]),
        "port -1": Info(endpoints=[endpoint(port=-1)]),
        "unknown protocol": Info(endpoints=[endpoint(protocol="gopher")]),
        "empty protocol": Info(endpoints=[endpoint(protocol="")]),
        "duplicate endpoint ids": Info(endpoints=[endpoint(), endpoint(port=3182)]),
        "empty endpoint id": Info(endpoints=[endpoint(id="")]),
        "empty host": Info(endpoints=[endpoint(host="")]),
        "1 MB property": Info(endpoints=[endpoint()], properties={"topology.rack": "r" * 1_000_000}),
        "10,000 properties": Info(properties={f"k{i}": "v" * 10 for i in range(10_000)}),
        "empty property name": Info(properties={"": "x"}),
    }
    probe = f"bad6-probe-{os.getpid()}"
    for name, info in bad_infos.items():
        tally.expect(f"register: {name}", Code.INVALID_ARGUMENT, register(registry, probe + "-r", info))
        # A heartbeat that changes the record to a bad one is refused the same way.
        tally.expect(
            f"heartbeat: {name}",
            Code.INVALID_ARGUMENT,
            register(registry, probe + "-h", Info(endpoints=[endpoint()]), then=info),
        )
    stored = [
        r
        for r in registry.ListBookies(registry_pb2.ListBookiesRequest(), timeout=30).bookies
        if r.bookie_id.startswith(probe)
    ]

    # Unknown extensions, auth names and protobuf fields are kept and ignored by readers.
    tolerant = Info(endpoints=[endpoint()])
    tolerant.endpoints[0].extensions.extend(["x-future-extension", "tls-1.4"])
    tolerant.endpoints[0].auth.extend(["x-unknown-auth"])
    unknown_field = b"\xf8\x06\x2a"  # field 111, varint 42: not in the schema
    raw_info = tolerant.SerializeToString() + unknown_field
    request = registry_pb2.RegisterBookieRequest(bookie_id=probe + "-t", read_only=True)
    raw_request = request.SerializeToString() + b"\x1a" + varint(len(raw_info)) + raw_info  # field 3, length-delimited
    release = threading.Event()
    first = threading.Event()

    def session() -> Iterator[bytes]:
        yield raw_request
        release.wait(30)

    raw_register = channels["registry"].stream_stream("/quire.registry.v1.RegistryService/RegisterBookie")
    calls = raw_register(session(), timeout=60)
    registered_error: list[str] = []

    def consume() -> None:
        try:
            for _ in calls:
                first.set()
        except grpc.RpcError as exc:
            if exc.code() != Code.CANCELLED:  # type: ignore[attr-defined]
                registered_error.append(f"{exc.code()}: {exc.details()}")  # type: ignore[attr-defined]
        finally:
            first.set()

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:
        assert first.wait(30) and not registered_error, registered_error
        got = registry.GetBookieServiceInfo(
            registry_pb2.GetBookieServiceInfoRequest(bookie_id=probe + "-t"), timeout=30
        )
        readers_ok = (
            list(got.record.service_info.endpoints[0].extensions) == ["x-future-extension", "tls-1.4"]
            and bookie_rpc_address(probe + "-t", got.record.service_info) == "127.0.0.1:3181"
        )
        shown = quire_cli(cluster, "bookie", "endpoints", probe + "-t", "-o", "json")
        cli_ok = (
            shown.returncode == 0 and (json_or_none(shown.stdout) or {}).get("resolved_address") == "127.0.0.1:3181"
        )
        listed = quire_cli(cluster, "bookie", "list", "-o", "json")
        list_ok = listed.returncode == 0 and json_or_none(listed.stdout) is not None
    finally:
        release.set()
        calls.cancel()
        consumer.join(30)
    scenario.figures.update(
        invalid_infos_stored=len(stored),
        unknown_extensions_tolerated=readers_ok and cli_ok and list_ok,
        services_down=everything_serving(cluster),
    )
    assert not stored, stored
    assert readers_ok and cli_ok and list_ok, (readers_ok, shown.stdout, shown.stderr, listed.stderr)
    assert not scenario.figures["services_down"]
    finish_tally(scenario, tally)


# -- BAD-7 garbage protobuf on a raw channel ---------------------------------------------------------


def hostile_messages(rng: random.Random) -> dict[str, bytes]:
    """One of each kind of broken request (tests/fuzz has the open-ended,
    hypothesis-driven version: `make fuzz`)."""
    field_number = rng.randint(1, 6)
    body = rng.randbytes(rng.randint(1, 40))
    return {
        "random-64": rng.randbytes(64),
        "random-512": rng.randbytes(512),
        "truncated": varint(field_number << 3 | 2) + varint(len(body) + 10) + body,
        "huge-length": varint(field_number << 3 | 2) + varint(2**63) + b"x",
        "wrong-wire-type": varint(1 << 3 | 5) + b"\xff" * 4 + varint(2 << 3 | 1) + b"\xff" * 8,
        "bad-varint": varint(field_number << 3 | 0) + b"\xff" * 11,
        "unknown-field": varint(rng.randint(1000, 2**29 - 1) << 3 | 0) + varint(7),
    }


def test_bad7_garbage_protobuf(cluster: LocalCluster, channels: dict[str, grpc.Channel], scenario: Scenario) -> None:
    methods = all_methods()
    seed = scenario.start("BAD-7", methods=len(methods), kinds=7)
    rng = random.Random(seed)
    calls = Counter[str]()
    forbidden: list[str] = []
    unknown_refused: list[str] = []
    for method in methods:
        channel = channels[method.service]
        for kind, message in hostile_messages(rng).items():
            outcome = call_raw(channel, method, [message], timeout=1.0)
            calls[outcome.code.name] += 1
            if outcome.code in FORBIDDEN_CODES or _leaks_traceback(outcome.details):
                forbidden.append(f"{method.path} {kind}: {outcome.code.name} {outcome.details[:120]}")
            if kind == "unknown-field" and "malformed request" in outcome.details:
                unknown_refused.append(method.path)  # an unknown field must be ignored, not refused
    # A probe registration that decoded from garbage ends with its stream; wait for the three bookies only.
    registry = registry_pb2_grpc.RegistryServiceStub(channels["registry"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        writable = registry.ListBookies(
            registry_pb2.ListBookiesRequest(state=registry_pb2.BOOKIE_STATE_WRITABLE), timeout=30
        ).bookies
        if {b.bookie_id for b in writable} == {cluster.bookie_id(n) for n in cluster.bookie_names}:
            break
        time.sleep(0.2)
    down = everything_serving(cluster)
    scenario.figures.update(
        calls=sum(calls.values()),
        codes=dict(calls),
        unknown_or_internal=len(forbidden),
        unknown_fields_refused=len(unknown_refused),
        crashes=len(down),
        fuzz_elsewhere="tests/fuzz (atheris on entry codec, metadata and ids; hypothesis on every RPC): make fuzz",
    )
    assert not forbidden, forbidden[:10]
    assert not unknown_refused, unknown_refused
    assert not down, down


# -- BAD-8 deadlines and cancellation ---------------------------------------------------------------


def _settled(port: int, baseline_tasks: int, within_seconds: float = 30.0) -> dict[str, Any]:
    """The gateway's /status once no stream is open and its tasks are back
    at the baseline, or the last one seen when that does not happen in time."""
    deadline = time.monotonic() + within_seconds
    while True:
        status = admin_status(port)
        if (
            not any(status["active_streams"].values()) and status["asyncio_tasks"] <= baseline_tasks
        ) or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def test_bad8_deadlines_and_cancellation(
    cluster: LocalCluster, client: QuireClient, channels: dict[str, grpc.Channel], scenario: Scenario
) -> None:
    calls = 1000
    scenario.start(
        "BAD-8",
        calls=calls,
        deadline_ms=1,
        big_reads_50ms=30,
        cancelled_tails=50,
        cancelled_reads=10,
        cancelled_appends=20,
    )
    gateway = ledger_pb2_grpc.LedgerServiceStub(channels["gateway"])
    ledger = new_ledger(client)
    client.append_all(ledger, [b"b8-%d" % i for i in range(200)])
    big = new_ledger(client)  # several response messages per read (4 MiB each)
    client.append_all(big, [b"\1" * MAX_ENTRY_BYTES for _ in range(12)], batch_size=1)
    proto, big_proto = ledger_id_to_proto(ledger), ledger_id_to_proto(big)
    port = cluster.ports.gateway_http
    pid = gateway_pid(cluster)
    baseline = _settled(port, 10**6, 0)
    fds_before = len(os.listdir(f"/proc/{pid}/fd"))
    gateway_log = cluster.log_path("gateway")
    log_before = gateway_log.stat().st_size

    codes: Counter[str] = Counter()
    futures = []
    for index in range(calls):
        kind = index % 4
        if kind == 0:
            futures.append(
                gateway.AddEntry.future(ledger_pb2.AddEntryRequest(ledger_id=proto, payload=b"d"), timeout=0.001)
            )
        elif kind == 1:
            futures.append(
                gateway.GetLedgerMetadata.future(ledger_pb2.GetLedgerMetadataRequest(ledger_id=proto), timeout=0.001)
            )
        elif kind == 2:
            futures.append(
                gateway.ReadLastAddConfirmed.future(
                    ledger_pb2.ReadLastAddConfirmedRequest(ledger_id=proto), timeout=0.001
                )
            )
        else:
            try:
                for _ in gateway.ReadEntries(
                    ledger_pb2.ReadEntriesRequest(ledger_id=proto, first_entry_id=0, last_entry_id=199), timeout=0.001
                ):
                    pass
                codes["OK"] += 1
            except grpc.RpcError as exc:
                codes[exc.code().name] += 1  # type: ignore[attr-defined]
    for future in futures:
        try:
            future.result()
            codes["OK"] += 1
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1  # type: ignore[attr-defined]

    # Deadlines that expire while the gateway is reading from the bookies (12 MiB per read).
    mid_stream: Counter[str] = Counter()
    for _ in range(30):
        try:
            for _ in gateway.ReadEntries(
                ledger_pb2.ReadEntriesRequest(ledger_id=big_proto, last_entry_id=-1), timeout=0.05
            ):
                pass
            mid_stream["OK"] += 1
        except grpc.RpcError as exc:
            mid_stream[exc.code().name] += 1  # type: ignore[attr-defined]

    # Streams cancelled midway: tails waiting for entries, reads between messages, write sessions.
    for _ in range(50):
        tail = gateway.TailEntries(ledger_pb2.TailEntriesRequest(ledger_id=proto, first_entry_id=0), timeout=60)
        next(tail)
        tail.cancel()
    for _ in range(10):
        read = gateway.ReadEntries(ledger_pb2.ReadEntriesRequest(ledger_id=big_proto, last_entry_id=-1), timeout=60)
        next(read)
        read.cancel()
    for _ in range(20):
        hold = threading.Event()

        def session(hold: threading.Event = hold) -> Iterator[ledger_pb2.AppendEntriesRequest]:
            yield ledger_pb2.AppendEntriesRequest(ledger_id=proto, payloads=[b"s"])
            hold.wait(30)

        append = gateway.AppendEntries(session(), timeout=60)
        next(append)
        append.cancel()
        hold.set()

    after = _settled(port, baseline["asyncio_tasks"])
    fds_after = len(os.listdir(f"/proc/{pid}/fd"))
    leaked_streams = sum(after["active_streams"].values())
    leaked_tasks = max(0, after["asyncio_tasks"] - baseline["asyncio_tasks"])
    with gateway_log.open("rb") as log:
        log.seek(log_before)
        logged = [json.loads(line) for line in log.read().splitlines() if line.startswith(b"{")]
    # An answer gRPC could no longer send (the deadline passed as the handler finished) is
    # the caller's doing: an INFO line, never an ERROR with a traceback (quire_common.logs).
    errors_logged = [line["msg"] for line in logged if line["level"] in ("ERROR", "CRITICAL")]
    scenario.figures.update(
        codes=dict(codes),
        big_read_50ms_deadline=dict(mid_stream),
        unknown_or_internal=codes["UNKNOWN"] + codes["INTERNAL"] + mid_stream["UNKNOWN"] + mid_stream["INTERNAL"],
        leaked_streams=leaked_streams,
        leaked_tasks=leaked_tasks,
        tasks_before=baseline["asyncio_tasks"],
        tasks_after=after["asyncio_tasks"],
        fds_before=fds_before,
        fds_after=fds_after,
        still_readable=len(list(client.read(ledger, 0, 199))) == 200,
        gateway_errors_logged=len(errors_logged),
        answers_after_the_call_ended=sum("the call ended before its answer was sent" in line["msg"] for line in logged),
    )
    assert errors_logged == [], errors_logged
    assert sum(codes.values()) == calls
    assert scenario.figures["unknown_or_internal"] == 0, codes
    assert leaked_streams == 0 and leaked_tasks == 0, (baseline, after)
    assert fds_after - fds_before < 20, scenario.figures
    assert scenario.figures["still_readable"]


# -- BAD-9 overload ------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return round(ordered[int(fraction * (len(ordered) - 1))], 1) if ordered else 0.0


HOLD_SECONDS = 1.0  # under the lab's 2 s add deadline and 3 s lease


def overload(
    cluster: LocalCluster,
    client: QuireClient,
    gateway: ledger_pb2_grpc.LedgerServiceStub,
    calls: int,
    entry_bytes: int,
    hold_bookies_seconds: float = 0.0,
) -> dict[str, Any]:
    """`calls` concurrent adds of `entry_bytes` on one new ledger: how each
    ended, how long it took, the gateway's RSS meanwhile; every acknowledged
    entry is read back. With `hold_bookies_seconds` the ledger's bookies are
    paused that long (under the add deadline) as the burst starts, so the
    excess piles up in the gateway however fast the bookies would drain it."""
    ledger = new_ledger(client)
    proto = ledger_id_to_proto(ledger)
    held = [
        next(n for n in cluster.bookie_names if cluster.bookie_id(n) == bookie_id)
        for bookie_id in client.ledger_metadata(ledger)[0].ensembles[0].bookie_ids
    ]

    def resume_held() -> None:
        for name in held:
            cluster.resume(name)

    release = threading.Timer(hold_bookies_seconds, resume_held)
    if hold_bookies_seconds:
        for name in held:
            cluster.pause(name)
        release.start()
    pid = gateway_pid(cluster)
    rss_before, _ = rss_kib(pid)
    rss_max = rss_before
    sampling = threading.Event()

    def sample() -> None:
        nonlocal rss_max
        while not sampling.is_set():
            rss_max = max(rss_max, rss_kib(pid)[0])
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    latencies: dict[str, list[float]] = {}
    acked: list[int] = []
    lock = threading.Lock()
    try:
        futures = []
        for index in range(calls):
            request = ledger_pb2.AddEntryRequest(ledger_id=proto, payload=bytes([index % 256]) * entry_bytes)
            future = gateway.AddEntry.future(request, timeout=120)
            sent = time.perf_counter()

            def done(f: grpc.Future, sent: float = sent) -> None:
                error = f.exception()
                code = error.code().name if error is not None else "OK"  # type: ignore[attr-defined]
                with lock:
                    latencies.setdefault(code, []).append((time.perf_counter() - sent) * 1000)
                    if error is None:
                        acked.append(f.result().entry_id)

            future.add_done_callback(done)
            futures.append(future)
        for future in futures:
            future.exception()
        deadline = time.monotonic() + 120  # generous: only a lost callback runs it out
        while sum(len(v) for v in latencies.values()) < calls and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sampling.set()
        sampler.join()
        if hold_bookies_seconds:
            release.cancel()
            for name in held:
                cluster.resume(name)
    read_back = {e.entry_id for e in client.read(ledger, 0, max(acked))} if acked else set()
    return {
        "codes": {code: len(values) for code, values in latencies.items()},
        "ack_p50_ms": percentile(latencies.get("OK", []), 0.5),
        "ack_p99_ms": percentile(latencies.get("OK", []), 0.99),
        "rejection_p99_ms": percentile(latencies.get("RESOURCE_EXHAUSTED", []), 0.99),
        "rss_before_kib": rss_before,
        "rss_max_kib": rss_max,
        "acked_not_read": len(set(acked) - read_back),
    }


def test_bad9_overload(
    cluster: LocalCluster, client: QuireClient, channels: dict[str, grpc.Channel], scenario: Scenario
) -> None:
    """10x the in-flight limit at once, as the gateway runs by default (adds
    wait for room: back-pressure) and with QUIRE_GATEWAY_MAX_WAITING_BYTES
    (what does not fit is refused at once, BookKeeper's ADD_ENTRY_REJECTED)."""
    entry_bytes = 64 * 1024
    calls = 10 * MAX_INFLIGHT_BYTES // entry_bytes
    waiting_cap = 2 * MAX_INFLIGHT_BYTES
    scenario.start(
        "BAD-9",
        inflight_limit_bytes=MAX_INFLIGHT_BYTES,
        waiting_cap_bytes=waiting_cap,
        calls=calls,
        entry_bytes=entry_bytes,
        factor=10,
        capped_run_bookies_held_seconds=HOLD_SECONDS,
    )
    gateway = ledger_pb2_grpc.LedgerServiceStub(channels["gateway"])
    waiting = overload(cluster, client, gateway, calls, entry_bytes)
    process = cluster.processes["gateway"]
    process.env["QUIRE_GATEWAY_MAX_WAITING_BYTES"] = str(waiting_cap)
    cluster.restart("gateway")
    try:
        with QuireClient(cluster.gateway_target, timeout=30) as fresh:
            # Paused bookies: how fast a loaded machine drains the burst must not decide the row.
            capped = overload(cluster, fresh, gateway, calls, entry_bytes, hold_bookies_seconds=HOLD_SECONDS)
    finally:
        del process.env["QUIRE_GATEWAY_MAX_WAITING_BYTES"]
        cluster.restart("gateway")
    scenario.figures.update({f"backpressure_{k}": v for k, v in waiting.items()})
    scenario.figures.update({f"capped_{k}": v for k, v in capped.items()})
    for run in (waiting, capped):
        assert set(run["codes"]) <= {"OK", "RESOURCE_EXHAUSTED"}, run  # no timeouts, no UNKNOWN/INTERNAL
        assert run["acked_not_read"] == 0, run
        # Ten times the limit queued in the gateway is 10 MiB of payload plus gRPC's buffers.
        assert run["rss_max_kib"] - run["rss_before_kib"] < 256 * 1024, run
    assert waiting["codes"] == {"OK": calls}, waiting  # by default nothing is refused: writers wait
    assert capped["codes"].get("RESOURCE_EXHAUSTED", 0) > 0, capped  # with the cap, the excess is refused
    assert capped["codes"].get("OK", 0) * entry_bytes >= MAX_INFLIGHT_BYTES, capped


def test_bad9_a_writer_that_reads_no_acknowledgements_is_held_back(
    cluster: LocalCluster, client: QuireClient, scenario: Scenario
) -> None:
    """A writer that streams entries and reads none of its acknowledgements:
    the gateway stops reading its messages once its session has
    SESSION_WINDOW_ENTRIES unanswered, and gRPC's flow control holds the
    writer back, rather than the gateway keeping an answer for every entry
    sent. Once the writer reads, every entry it sent is acknowledged, in
    order, and reads back. (Without the window the gateway reads all of
    them: tests/unit/test_write_session.py, the positive control.)"""
    total = 40_000  # 1 KiB each: far more than the window and every flow-control buffer on the way
    scenario.start("BAD-9", writer_reads_no_acks=True, entries=total, window_entries=SESSION_WINDOW_ENTRIES)
    ledger = new_ledger(client)
    proto = ledger_id_to_proto(ledger)
    taken = 0

    def requests() -> Iterator[ledger_pb2.AppendEntriesRequest]:
        nonlocal taken
        for index in range(total):
            taken += 1
            yield ledger_pb2.AppendEntriesRequest(
                ledger_id=proto if index == 0 else None, payloads=[index.to_bytes(4, "big") * 256]
            )

    # A writer whose receive buffers are full: a small window for the answers, not grown by
    # gRPC's bandwidth probe. (With gRPC's defaults a writer's buffers took the answers of all
    # 40,000 entries here: answers are tiny, and many entries are folded into each.)
    channel = grpc.insecure_channel(
        cluster.gateway_target, options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
    )
    gateway = ledger_pb2_grpc.LedgerServiceStub(channel)
    answers = gateway.AppendEntries(requests(), timeout=300)
    try:
        # Wait until the writer is held: nothing more taken for 5 s (or, without a hold, all of it).
        last, still_since = -1, time.monotonic()
        while taken < total and time.monotonic() - still_since < 5:
            if taken != last:
                last, still_since = taken, time.monotonic()
            time.sleep(0.1)
        held_at = taken
        scenario.figures["taken_before_reading"] = held_at
        assert held_at < total, "the gateway read every message of a writer that reads no acknowledgement"
        covered = [e for answer in answers for e in range(answer.first_entry_id, answer.last_entry_id + 1)]
    finally:
        answers.cancel()
        channel.close()
    assert covered == list(range(total))
    read_back = list(client.read(ledger, 0, total - 1))
    assert [e.payload for e in read_back] == [i.to_bytes(4, "big") * 256 for i in range(total)]


# -- BAD-10 admin HTTP: generated requests -------------------------------------------------------------

METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "G\x00T", "get", ""]
PATHS = [
    "/status", "/metrics", "/", "/status?x=1&y", "/metrics?", "/../../etc/passwd", "/%2e%2e/%2e%2e/", "*",
    "http://example/status", "/status/", "//status", "/STATUS", "/\x7f\x01", "/" + "a" * 9000, "/" + "b" * 70_000,
]  # fmt: skip
VERSIONS = ["HTTP/1.1", "HTTP/1.0", "HTTP/9.9", "", "garbage", "HTTP/1.1 extra"]


def http_request(rng: random.Random) -> bytes:
    """One generated request: method, path, version, headers, maybe a body."""
    path = rng.choice(PATHS) if rng.random() < 0.7 else "/" + "".join(chr(rng.randint(33, 126)) for _ in range(50))
    line = " ".join(p for p in (rng.choice(METHODS), path, rng.choice(VERSIONS)) if p)
    headers = [f"X-{i}: {'v' * rng.randint(0, 40)}" for i in range(rng.choice([0, 1, 3, 150]))]
    extra = rng.random()
    if extra < 0.1:
        headers.append("Authorization: Bearer " + "x" * 100)
    elif extra < 0.2:
        headers.append("Huge: " + "h" * 70_000)
    elif extra < 0.3:
        headers.append("no colon at all")
    elif extra < 0.35:
        headers.append("Bin: " + rng.randbytes(30).decode("latin-1"))
    ending = rng.choice(["\r\n", "\n"])
    body = rng.randbytes(rng.randint(0, 200)) if rng.random() < 0.3 else b""
    return (line + ending + ending.join(headers) + (ending if headers else "") + ending).encode("latin-1") + body


def http_exchange(port: int, request: bytes) -> str:
    """The status line answered, or "" when the connection closed without one."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        try:
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before reading everything
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer.split(b"\r\n", 1)[0].decode("latin-1")


def test_bad10_admin_http_generated_requests(cluster: LocalCluster, scenario: Scenario) -> None:
    per_target = 60
    targets = {
        "gateway": cluster.ports.gateway_http,
        "registry": cluster.ports.registry_http,
        "placement": cluster.ports.placement_http,
        "bookie-1": cluster.ports.http_port(0),
    }
    seed = scenario.start("BAD-10", requests_per_target=per_target, targets=sorted(targets), openapi_document=False)
    rng = random.Random(seed)
    statuses: Counter[str] = Counter()
    unanswered: list[str] = []
    server_errors: list[str] = []
    for name, port in targets.items():
        for _ in range(per_target):
            request = http_request(rng)
            status_line = http_exchange(port, request)
            parts = status_line.split()
            if len(parts) < 2 or not parts[1].isdigit():
                unanswered.append(f"{name}: {request[:80]!r} -> {status_line!r}")
                continue
            statuses[parts[1]] += 1
            if parts[1].startswith("5"):
                server_errors.append(f"{name}: {request[:80]!r} -> {status_line}")
    documented = {"200", "400", "404", "405"}  # plaintext development mode: no 401/403 here
    still_up = all(isinstance(admin_status(port), dict) for port in targets.values())
    scenario.figures.update(
        requests=per_target * len(targets),
        statuses=dict(statuses),
        responses_5xx=len(server_errors),
        unanswered=len(unanswered),
        undocumented_statuses=sorted(set(statuses) - documented),
        still_up=still_up,
    )
    assert not server_errors, server_errors[:5]
    assert not unanswered, unanswered[:5]
    assert set(statuses) <= documented, statuses
    assert still_up and not everything_serving(cluster)


# -- BAD-11 command-line misuse ------------------------------------------------------------------------


def test_bad11_cli_misuse(cluster: LocalCluster, client: QuireClient, scenario: Scenario) -> None:
    scenario.start("BAD-11")
    ledger = new_ledger(client).qualified_name
    closed = free_port()  # nothing listens here
    unreachable = f"127.0.0.1:{closed}"
    usage = [
        [], ["ledger"], ["ledger", "frobnicate"], ["ledger", "read"], ["ledger", "read", ledger, "--from", "abc"],
        ["--bogus", "ledger", "list"], ["ledger", "list", "-o", "xml"], ["bookie", "list", "--state", "maybe"],
        ["ledger", "create", "-e", "three"], ["ledger", "delete"],
    ]  # fmt: skip
    # Input the client refuses itself (a malformed id, a number its field cannot hold) exits 2: nothing was sent.
    refused_before_sending = {"nonsense", "readonly", "-1", "18446744073709551616"}
    json_errors = [
        (["ledger", "meta", "00000000-0000-0000-0000-00000000beef", "-o", "json"], "NOT_FOUND"),
        (["ledger", "meta", "nonsense", "-o", "json"], "INVALID_ARGUMENT"),
        (["bookie", "endpoints", "readonly", "-o", "json"], "INVALID_ARGUMENT"),
        (["bookie", "endpoints", "never-registered", "-o", "json"], "NOT_FOUND"),
        (["ledger", "list", "--scope", "-1", "-o", "json"], "INVALID_ARGUMENT"),
        (["ledger", "list", "--scope", "18446744073709551616", "-o", "json"], "INVALID_ARGUMENT"),
        (["ledger", "meta", ledger, "-o", "json"], "OK"),
        (["ledger", "list", "-o", "json"], "OK"),
        (["bookie", "list", "-o", "json"], "OK"),
        (["recovery", "status", "-o", "json"], "OK"),
    ]
    text_errors = [
        ["ledger", "create", "--scope", "-1"],
        ["ledger", "create", "--scope", "18446744073709551616"],
        ["ledger", "create", "--id=-1:5"],
        ["ledger", "read", ledger, "--from", "99999999999999999999"],
        ["ledger", "create", "-e", "-1"],
        ["blob", "put", "/dev/null", "--scope", "-1"],
    ]
    unreachable_runs = [
        (dict(gateway=unreachable), ["ledger", "list"], unreachable),
        (dict(gateway=unreachable), ["ledger", "list", "-o", "json"], unreachable),
        (dict(gateway=unreachable), ["bookie", "list", "-o", "json"], unreachable),  # the admin API's path
        (dict(registry=unreachable), ["--direct", "bookie", "list", "-o", "json"], unreachable),  # break-glass
    ]
    jobs: list[Callable[[], Any]] = [partial(quire_cli, cluster, *a) for a in usage]
    jobs += [partial(quire_cli, cluster, *a) for a, _ in json_errors]
    jobs += [partial(quire_cli, cluster, *a) for a in text_errors]
    jobs += [partial(quire_cli, cluster, *a, **k) for k, a, _ in unreachable_runs]
    results = iter(parallel(jobs))
    problems: list[str] = []
    invalid_json = tracebacks = 0
    for args in usage:
        r = next(results)
        tracebacks += _leaks_traceback(r.stderr)
        if r.returncode != 2 or "usage:" not in r.stderr.lower():
            problems.append(f"usage {args}: exit {r.returncode} {r.stderr[-200:]!r}")
    for args, code in json_errors:
        r = next(results)
        tracebacks += _leaks_traceback(r.stderr)
        document = json_or_none(r.stdout)
        invalid_json += document is None
        got = (
            "OK"
            if r.returncode == 0
            else (document or {}).get("error", {}).get("code")
            if isinstance(document, dict)
            else None
        )
        status = 2 if refused_before_sending & set(args) else 1
        if got != code or (code != "OK" and r.returncode != status):
            problems.append(
                f"json {args}: exit {r.returncode}, {got} != {code}: {r.stdout[-200:]!r} {r.stderr[-200:]!r}"
            )
    for args in text_errors:
        r = next(results)
        tracebacks += _leaks_traceback(r.stderr)
        if r.returncode not in (1, 2) or "error" not in r.stderr:
            problems.append(f"text {args}: exit {r.returncode} {r.stderr[-300:]!r}")
    for _, args, where in unreachable_runs:
        r = next(results)
        tracebacks += _leaks_traceback(r.stderr)
        if "json" in args:
            invalid_json += json_or_none(r.stdout) is None
        if r.returncode != 3 or where not in r.stderr or "UNAVAILABLE" not in r.stderr:
            problems.append(f"unreachable {args}: exit {r.returncode} {r.stderr[-300:]!r}")

    # Destructive without --force is refused and changes nothing; with it, it deletes.
    refused = quire_cli(cluster, "ledger", "delete", ledger)
    still_there = quire_cli(cluster, "ledger", "meta", ledger).returncode == 0
    deleted = quire_cli(cluster, "ledger", "delete", ledger, "--force")
    gone = quire_cli(cluster, "ledger", "meta", ledger, "-o", "json")
    destructive_ok = (
        refused.returncode == 2
        and "--force" in refused.stderr
        and still_there
        and deleted.returncode == 0
        and gone.returncode == 1
        and (json_or_none(gone.stdout) or {}).get("error", {}).get("code") == "NOT_FOUND"
    )
    runs = len(usage) + len(json_errors) + len(text_errors) + len(unreachable_runs) + 4
    scenario.figures.update(
        runs=runs,
        invalid_json_outputs=invalid_json,
        wrong_exits=len(problems),
        tracebacks=tracebacks,
        refused_without_force=destructive_ok,
    )
    assert invalid_json == 0 and tracebacks == 0 and not problems, problems
    assert destructive_ok, (refused.stderr, deleted.stderr, gone.stdout)


# -- BAD-12 bad configuration -----------------------------------------------------------------------


@dataclass(frozen=True)
class BadSetting:
    service: str  # a LocalCluster process name
    why: str
    env: dict[str, str]
    names: str  # what stderr must name


def bad_settings(cluster: LocalCluster) -> list[BadSetting]:
    other, third = free_port(), free_port()
    return [
        BadSetting("registry", "wrong type", {"QUIRE_REGISTRY_HTTP_PORT": "abc"}, "QUIRE_REGISTRY_HTTP_PORT"),
        BadSetting("registry", "out of range", {"QUIRE_BOOKIE_TTL_SECONDS": "1"}, "QUIRE_BOOKIE_TTL_SECONDS"),
        BadSetting("registry", "malformed etcd endpoint", {"QUIRE_ETCD_ENDPOINTS": "nohost"}, "QUIRE_ETCD_ENDPOINTS"),
        BadSetting("registry", "no etcd endpoint", {"QUIRE_ETCD_ENDPOINTS": " , "}, "QUIRE_ETCD_ENDPOINTS"),
        # An etcd that is configured right but not up yet is waited for, not refused (DUR-7).
        BadSetting(
            "registry",
            "gRPC and HTTP on one port",
            {"QUIRE_REGISTRY_ADDRESS": f"127.0.0.1:{other}", "QUIRE_REGISTRY_HTTP_PORT": str(other)},
            "QUIRE_REGISTRY_HTTP_PORT",
        ),
        BadSetting(
            "registry", "port taken", {"QUIRE_REGISTRY_ADDRESS": cluster.gateway_target}, "QUIRE_REGISTRY_ADDRESS"
        ),
        BadSetting("placement", "unknown policy", {"QUIRE_PLACEMENT_POLICY": "bogus"}, "QUIRE_PLACEMENT_POLICY"),
        BadSetting("placement", "below minimum", {"QUIRE_PLACEMENT_HTTP_PORT": "-5"}, "QUIRE_PLACEMENT_HTTP_PORT"),
        BadSetting(
            "placement", "port taken", {"QUIRE_PLACEMENT_ADDRESS": cluster.registry_target}, "QUIRE_PLACEMENT_ADDRESS"
        ),
        BadSetting(
            "gateway", "wrong type", {"QUIRE_GATEWAY_MAX_INFLIGHT_BYTES": "lots"}, "QUIRE_GATEWAY_MAX_INFLIGHT_BYTES"
        ),
        BadSetting("gateway", "above maximum", {"QUIRE_GATEWAY_HTTP_PORT": "99999"}, "QUIRE_GATEWAY_HTTP_PORT"),
        BadSetting(
            "gateway",
            "not host:port",
            {"QUIRE_GATEWAY_ADVERTISED_ADDRESS": "gateway-without-port"},
            "QUIRE_GATEWAY_ADVERTISED_ADDRESS",
        ),
        BadSetting("gateway", "below minimum", {"QUIRE_GATEWAY_SESSION_SECONDS": "1"}, "QUIRE_GATEWAY_SESSION_SECONDS"),
        BadSetting("gateway", "bad boolean", {"QUIRE_RESOLVER_ENABLED": "maybe"}, "QUIRE_RESOLVER_ENABLED"),
        BadSetting(
            "gateway", "port taken", {"QUIRE_GATEWAY_ADDRESS": cluster.placement_target}, "QUIRE_GATEWAY_ADDRESS"
        ),
        BadSetting("bookie", "wrong type", {"QUIRE_BOOKIE_PORT": "abc"}, "QUIRE_BOOKIE_PORT"),
        BadSetting(
            "bookie",
            "gRPC and HTTP on one port",
            {"QUIRE_BOOKIE_PORT": str(third), "QUIRE_BOOKIE_HTTP_PORT": str(third)},
            "QUIRE_BOOKIE_HTTP_PORT",
        ),
        BadSetting("bookie", "port taken", {"QUIRE_BOOKIE_PORT": str(cluster.ports.gateway)}, "QUIRE_BOOKIE_PORT"),
        # Shared settings read before anything else starts (telemetry, logs).
        BadSetting(
            "gateway", "wrong type", {"QUIRE_TELEMETRY_FILE_MAX_BYTES": "abc"}, "QUIRE_TELEMETRY_FILE_MAX_BYTES"
        ),
        BadSetting("registry", "unknown log level", {"QUIRE_LOG_LEVEL": "verbose"}, "QUIRE_LOG_LEVEL"),
        BadSetting(
            "bookie",
            "below minimum",
            {"QUIRE_BOOKIE_MAX_LONG_POLL_SECONDS": "-1"},
            "QUIRE_BOOKIE_MAX_LONG_POLL_SECONDS",
        ),
        # A renamed setting's old name is still read, and checked under that name.
        BadSetting(
            "bookie",
            "old name, wrong type",
            {"QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS": "soon"},
            "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS",
        ),
        # Unknown keys under a service's own prefix (misspelt settings).
        BadSetting(
            "gateway",
            "unknown key",
            {"QUIRE_GATEWAY_ADD_TIMEOUT_SECOND": "2"},
            "did you mean QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS",
        ),
        BadSetting("registry", "unknown key", {"QUIRE_ETCD_ENDPOINT": "127.0.0.1:1"}, "QUIRE_ETCD_ENDPOINT "),
        BadSetting("placement", "unknown key", {"QUIRE_PLACEMENT_POLCY": "rack"}, "QUIRE_PLACEMENT_POLCY"),
        BadSetting("bookie", "unknown key", {"QUIRE_BOOKIE_DATADIR": "/tmp/x"}, "QUIRE_BOOKIE_DATADIR"),
    ]


def test_bad12_bad_configuration(cluster: LocalCluster, scenario: Scenario, tmp_path: Any) -> None:
    settings = bad_settings(cluster)
    scenario.start("BAD-12", settings=len(settings), unknown_keys_checked=True)
    modules = {"registry": "quire_registry", "placement": "quire_placement", "gateway": "quire_gateway"}

    def start(index: int, setting: BadSetting) -> subprocess.CompletedProcess[str]:
        if setting.service == "bookie":  # standalone: no registry, no cookie; the settings decide alone
            env = StandaloneBookie(tmp_path / f"bookie-{index}").env
            module = "quire_bookie"
        else:
            env = dict(cluster.processes[setting.service].env)
            module = modules[setting.service]
            # Its own free ports, so that only the bad setting can stop it.
            prefix = f"QUIRE_{setting.service.upper()}"
            env.update({f"{prefix}_ADDRESS": f"127.0.0.1:{free_port()}", f"{prefix}_HTTP_PORT": str(free_port())})
        env.update(setting.env)
        try:
            return subprocess.run([sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:  # it started despite the bad setting (and was killed)
            return subprocess.CompletedProcess(module, 0, "", "still running after 60 s")

    results = parallel([partial(start, i, s) for i, s in enumerate(settings)])
    problems = []
    traceback_only = 0
    for setting, result in zip(settings, results, strict=True):
        leaked = _leaks_traceback(result.stderr)
        named = setting.names in result.stderr
        traceback_only += leaked and not named
        if result.returncode == 0 or leaked or not named:
            problems.append(f"{setting.service} {setting.why}: exit {result.returncode}: {result.stderr[-400:]!r}")
    scenario.figures.update(
        exits_nonzero=sum(r.returncode != 0 for r in results),
        named_the_setting=sum(s.names in r.stderr for s, r in zip(settings, results, strict=True)),
        tracebacks=sum(_leaks_traceback(r.stderr) for r in results),
        traceback_only_failures=traceback_only,
        problems=len(problems),
    )
    assert not problems, problems
    assert not everything_serving(cluster)
