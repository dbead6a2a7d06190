"""Observability rows: every client add has a trace from the gateway to the
bookies that stored it, with the RPC attributes on every RPC span (OBS-2)."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from quire_client.cluster import LocalCluster
from tests.faults.history import History
from tests.faults.lab import fault_cluster
from tests.faults.report import Scenario
from tests.faults.scenarios import client_for, new_ledger

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

SEQUENTIAL, CONCURRENT_WRITERS, CONCURRENT_EACH = 40, 16, 10
RPC_ATTRIBUTES = ("rpc.system", "rpc.service", "rpc.method")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("traced")
    with fault_cluster(data_dir, env={"QUIRE_TELEMETRY_DIR": str(data_dir / "telemetry")}) as local:
        yield local


def read_spans(cluster: LocalCluster) -> list[dict[str, Any]]:
    spans = []
    for path in (cluster.data_dir / "telemetry").glob("*-spans.*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                spans.append(json.loads(line))
    return spans


def server_spans(spans: list[dict[str, Any]], service: str, method: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["service"] == service and s["kind"] == "SERVER" and s["name"].endswith(f"/{method}")]


def test_obs2_every_add_is_traced_to_its_bookies(cluster: LocalCluster, scenario: Scenario) -> None:
    scenario.start("OBS-2", sequential_adds=SEQUENTIAL, concurrent_adds=CONCURRENT_WRITERS * CONCURRENT_EACH, W=2)
    history = History()
    with client_for(cluster) as client:
        ledger = new_ledger(client, history).qualified_name
        for index in range(SEQUENTIAL):
            client.add_entry(ledger, b"sequential %d" % index)

        def add_many(writer: int) -> None:
            for index in range(CONCURRENT_EACH):
                client.add_entry(ledger, b"concurrent %d %d" % (writer, index))

        threads = [threading.Thread(target=add_many, args=(w,)) for w in range(CONCURRENT_WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert client.last_add_confirmed(ledger) == SEQUENTIAL + CONCURRENT_WRITERS * CONCURRENT_EACH - 1
    total_adds = SEQUENTIAL + CONCURRENT_WRITERS * CONCURRENT_EACH

    # Spans are exported in batches every half second, each process on its own:
    # wait for every add's server span, then one more round for the bookies'.
    deadline = time.monotonic() + 120  # generous: a busy machine exports late
    while len(server_spans(read_spans(cluster), "gateway", "AddEntry")) < total_adds and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.5)
    spans = read_spans(cluster)
    adds = server_spans(spans, "gateway", "AddEntry")
    # A bookie's add: its AddStream `bookie.add` span (under the writer's traceparent), or an AddEntries call.
    bookie_servers = [
        s for s in spans if s["service"] == "bookie" and s["kind"] == "SERVER" and s["name"] == "bookie.add"
    ] + server_spans(spans, "bookie", "AddEntries")
    assert len(adds) == total_adds, f"{len(adds)} AddEntry server spans for {total_adds} adds"

    # Which traces reach the bookies: a bookie server span in the trace itself,
    # or a gateway batch span (bookie_add) that links to the add's span.
    bookies_by_trace: dict[str, set[str]] = defaultdict(set)
    for span in bookie_servers:
        bookies_by_trace[span["trace_id"]].add(span["instance"])
    batch_spans = {s["span_id"]: s for s in spans if s["name"] == "quire.gateway.bookie_add"}
    linked_traces: set[str] = set()
    for batch in batch_spans.values():
        if bookies_by_trace.get(batch["trace_id"]):
            linked_traces.update(link["trace_id"] for link in batch.get("links", []))

    own_trace = [a for a in adds if len(bookies_by_trace.get(a["trace_id"], ())) >= 2]
    by_link = [a for a in adds if a not in own_trace and a["trace_id"] in linked_traces]
    sequential = sorted(adds, key=lambda s: s["start_unix_nano"])[:SEQUENTIAL]
    rpc_spans = [s for s in spans if s["kind"] in ("SERVER", "CLIENT") and "/" in s["name"]]
    missing = [s["name"] for s in rpc_spans if any(a not in s["attributes"] for a in RPC_ATTRIBUTES)]
    distinct_traces = len({a["trace_id"] for a in adds})
    scenario.figures.update(
        {
            "adds": total_adds,
            "traces": distinct_traces,
            "adds_traced_to_W_bookies": len(own_trace),
            "adds_reaching_bookies_by_link": len(by_link),
            "adds_not_reaching_bookies": total_adds - len(own_trace) - len(by_link),
            "sequential_adds_traced_to_W_bookies": sum(1 for a in sequential if a in own_trace),
            "rpc_spans": len(rpc_spans),
            "spans_missing_required_attributes": len(missing),
        }
    )
    assert distinct_traces == total_adds, "one trace per client add"
    assert all(a in own_trace for a in sequential), "a lone add's trace holds the W bookies that stored it"
    assert len(own_trace) + len(by_link) == total_adds
    assert not missing, sorted(set(missing))
