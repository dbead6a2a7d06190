"""A real Prometheus (Debian's `prometheus`, started here on a free port with
a temporary config and data directory, stopped by PID) scrapes a local
cluster and evaluates the shipped alert rules: every target is up, every
query of the Grafana dashboard returns data (its variables filled in as
Grafana's "All" would), every alert is inactive on a healthy cluster, and
killing a bookie, then placement, the registry and the gateway makes each
one's down alert fire for that process alone.

The cluster runs in plaintext development mode, so /metrics is plain HTTP
without a token (under TLS it is HTTPS and needs an admin bearer token:
docs/runbook.md). The rules are the shipped ones, except that the down
alerts' `for:` is cut to a few seconds so the test need not wait two
minutes. Nothing here bounds wall-clock time: Prometheus's API is
polled with generous deadlines."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from quire_client import QuireClient
from quire_client.cluster import LocalCluster, free_port
from tests.e2e.conftest import running_cluster
from tests.monitoring.catalogue import (
    RULES,
    as_prometheus_query,
    dashboard_queries,
    dashboard_variables,
    variable_selector,
)

pytestmark = pytest.mark.e2e

T = TypeVar("T")
DEADLINE_SECONDS = 180.0
# Panels that stay empty on this cluster, and why.
EMPTY_HERE = {"Certificate days left": "plaintext development mode: no certificates"}
KILLED = "bookie-3"
# The process each down alert is about, in the order they are killed.
DOWN_ALERTS = {"placement": "QuirePlacementDown", "registry": "QuireRegistryDown", "gateway": "QuireGatewayDown"}


def wait_for(what: str, probe: Callable[[], T | None], deadline: float = DEADLINE_SECONDS) -> T:
    """Poll `probe` until it returns something other than None."""
    end = time.monotonic() + deadline
    last: T | None = None
    while True:
        last = probe()
        if last is not None:
            return last
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(1.0)


class Prometheus:
    def __init__(self, workdir: Path, cluster: LocalCluster) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus not found: scripts/setup.sh installs Debian's prometheus package")
        self.port = free_port()
        rules = yaml.safe_load(RULES.read_text())
        for group in rules["groups"]:
            for rule in group["rules"]:
                if rule["alert"] in {"QuireBookieDown", *DOWN_ALERTS.values()}:
                    rule["for"] = "3s"
        (workdir / "rules.yaml").write_text(yaml.safe_dump(rules))

        def job(name: str, targets: list[str]) -> dict[str, Any]:
            return {"job_name": name, "static_configs": [{"targets": targets}]}

        ports = cluster.ports
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(workdir / "rules.yaml")],
            "scrape_configs": [
                job("quire-bookie", [cluster.bookie_http(name) for name in cluster.bookie_names]),
                job("quire-gateway", [f"127.0.0.1:{ports.gateway_http}"]),
                job("quire-registry", [f"127.0.0.1:{ports.registry_http}"]),
                job("quire-placement", [f"127.0.0.1:{ports.placement_http}"]),
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = (workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.loads(response.read())
        except OSError:
            return None  # not listening yet
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]] | None:
        data = self.api("query", query=expr)
        return None if data is None else data["result"]

    def rules(self) -> list[dict[str, Any]]:
        data = self.api("rules") or {"groups": []}
        return [rule for group in data["groups"] for rule in group["rules"]]

    def firing(self, alertname: str) -> list[dict[str, Any]] | None:
        alerts = (self.api("alerts") or {}).get("alerts", [])
        return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"] or None

    def jobs_regex(self) -> str:
        """What Grafana's "All" makes of the dashboard's job variable: the
        alternation of the jobs its query finds."""
        query = variable_selector(dashboard_variables()["job"]["query"])
        jobs = self.api("label/job/values", **{"match[]": as_prometheus_query(query)}) or []
        return "(" + "|".join(sorted(jobs)) + ")"


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Prometheus]]:
    data = tmp_path_factory.mktemp("watched")
    # An audit round a second, so the cluster gauges show soon; no entry
    # cache, so reads go to the bookies and the read latency has samples.
    with running_cluster(data, QUIRE_AUDITOR_INTERVAL_SECONDS="1", QUIRE_GATEWAY_ENTRY_CACHE_BYTES="0") as cluster:
        prometheus = Prometheus(data, cluster)
        try:
            yield cluster, prometheus
        finally:
            prometheus.stop()


def traffic(cluster: LocalCluster) -> None:
    """Adds and reads, enough that one slow first add is not the p99."""
    with QuireClient(cluster.gateway_target, timeout=30) as client:
        for _ in range(2):
            metadata = client.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2)
            name = f"{metadata.ledger_id.scope_id}:{metadata.ledger_id.ledger_id}"
            for _ in range(20):
                client.append_all(name, [b"x" * 100] * 10)
            client.close_ledger(name)
            assert len(list(client.read(name))) == 200


def test_prometheus_scrapes_every_service_and_the_dashboard_has_data(watched):
    cluster, prometheus = watched
    traffic(cluster)

    def all_up() -> list[dict[str, Any]] | None:
        targets = (prometheus.api("targets") or {}).get("activeTargets", [])
        return targets if len(targets) == 6 and all(t["health"] == "up" for t in targets) else None

    jobs = {t["labels"]["job"] for t in wait_for("every target up", all_up)}
    assert jobs == {"quire-bookie", "quire-gateway", "quire-registry", "quire-placement"}
    # The job variable finds every service (each exports quire_build_info).
    wait_for("every job in the job variable", lambda: [1] if prometheus.jobs_regex().count("quire-") == 4 else None)

    queries = [(title, as_prometheus_query(expr, jobs=prometheus.jobs_regex())) for title, expr in dashboard_queries()]
    for title, query in queries:
        if title in EMPTY_HERE:
            assert prometheus.query(query) == [], f"{title}: expected no data ({EMPTY_HERE[title]})"
    waiting = [(title, query) for title, query in queries if title not in EMPTY_HERE]
    end = time.monotonic() + DEADLINE_SECONDS
    while waiting and time.monotonic() < end:
        waiting = [(title, query) for title, query in waiting if not prometheus.query(query)]
        time.sleep(1.0)
    assert not waiting, f"dashboard queries without data: {waiting}"


def test_a_killed_bookie_fires_bookie_down_and_nothing_else_fires_before(watched):
    cluster, prometheus = watched
    traffic(cluster)
    # The auditor's cluster view: three writable bookies.
    wait_for(
        "the auditor's bookie count",
        lambda: [1] if prometheus.query('quire_cluster_bookies{state="writable"} == 3') else None,
    )
    # ... and the largest ensemble in use (traffic's ledgers have 3), which QuireTooFewWritableBookies needs.
    wait_for(
        "the auditor's largest ensemble",
        lambda: [1] if prometheus.query("quire_cluster_largest_ensemble == 3") else None,
    )

    def quiet() -> list[dict[str, Any]] | None:
        rules = prometheus.rules()
        if not rules or any(r["health"] != "ok" or r["state"] != "inactive" for r in rules):
            return None
        return rules

    try:
        quiet_rules = wait_for("every alert inactive on a healthy cluster", quiet)
    except pytest.fail.Exception:
        states = {r["name"]: (r["state"], r["health"], r.get("lastError")) for r in prometheus.rules()}
        pytest.fail(f"alerts not all inactive: {states}")
    assert {r["name"] for r in quiet_rules} >= {"QuireBookieDown", "QuireUnderReplicatedEntries", "QuireNoAuditor"}

    target = cluster.bookie_http(KILLED)
    cluster.kill(KILLED)

    down = wait_for("QuireBookieDown firing", lambda: prometheus.firing("QuireBookieDown"))
    assert [a["labels"]["instance"] for a in down] == [target]
    assert down[0]["annotations"]["runbook_url"].startswith("https://")
    assert down[0]["annotations"]["runbook_url"].endswith("/runbook.md#quirebookiedown")
    # The auditor sees it too, once its registration lapses.
    wait_for(
        "the auditor counting the bookie missing",
        lambda: [1] if prometheus.query('quire_cluster_bookies{state="missing"} == 1') else None,
    )


def test_each_service_killed_in_turn_fires_its_own_down_alert(watched):
    cluster, prometheus = watched
    ports = cluster.ports
    admin = {
        "placement": f"127.0.0.1:{ports.placement_http}",
        "registry": f"127.0.0.1:{ports.registry_http}",
        "gateway": f"127.0.0.1:{ports.gateway_http}",
    }
    for process, alertname in DOWN_ALERTS.items():
        assert prometheus.firing(alertname) is None, f"{alertname} fired before {process} was killed"
        cluster.kill(process)
        down = wait_for(f"{alertname} firing", lambda alertname=alertname: prometheus.firing(alertname))
        assert [a["labels"]["instance"] for a in down] == [admin[process]]
        assert down[0]["annotations"]["runbook_url"].endswith(f"#{alertname.lower()}")
