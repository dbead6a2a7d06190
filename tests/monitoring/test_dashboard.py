"""The Grafana dashboard (deploy/monitoring/grafana-dashboard.json) queries only
metrics the services export, each scoped by the cluster, namespace and job
variables, and so do the alert rules. That the queries return data from a real
cluster is checked end to end (tests/e2e/test_prometheus.py)."""

from __future__ import annotations

import json
import re

import yaml
from prometheus_client import ProcessCollector

from tests.monitoring.catalogue import (
    DASHBOARD,
    PROCESS_SERIES,
    PROMETHEUS_OWN,
    ROOT,
    RULES,
    SCOPE_MATCHERS,
    dashboard_panels,
    dashboard_queries,
    dashboard_variables,
    exported_metric_names,
    metric_names,
    variable_selector,
)


def test_the_catalogue_knows_the_services_metrics():
    names = exported_metric_names()
    for expected in (
        "quire_gateway_add_duration_seconds_bucket",
        "quire_bookie_written_bytes_total",
        "quire_etcd_operation_duration_seconds_count",
        "quire_cluster_bookies",
        "quire_tls_certificate_not_after_seconds",
        "quire_bookie_disk_free_bytes",
        "quire_gateway_active_streams",
        "quire_placement_selections_total",
        "quire_bookie_sync_disabled",
        "quire_gateway_digest_mismatches_total",
        "rpc_server_duration_seconds_count",
        "quire_build_info",
    ):
        assert expected in names
    assert not any(name.endswith("_milliseconds_bucket") for name in names)


def test_the_process_series_are_those_of_the_registry_metrics_serves():
    telemetry = (ROOT / "services" / "common" / "quire_common" / "telemetry.py").read_text()
    assert "generate_latest(REGISTRY)" in telemetry  # the default registry, which has the process collector
    collected = {sample.name for family in ProcessCollector(registry=None).collect() for sample in family.samples}
    assert collected == PROCESS_SERIES


def test_the_expression_parser_finds_metric_names():
    expr = (
        'histogram_quantile(0.99, sum by (instance, le) (rate(a_bucket{job="x", le!="1"}[$__rate_interval])))'
        " / on (instance) group_left b_total offset 5m > 1e-9 and c or vector(0)"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}


def test_every_dashboard_query_names_only_exported_metrics():
    known = exported_metric_names() | PROMETHEUS_OWN | PROCESS_SERIES
    queries = dashboard_queries()
    assert len(queries) >= 20
    for title, expr in queries:
        unknown = metric_names(expr) - known
        assert not unknown, f"panel {title!r} queries {sorted(unknown)}, which no service exports"


def unscoped_selectors(expr: str) -> list[str]:
    """The selectors of `expr` that lack one of the cluster, namespace and job matchers."""
    found = []
    for name in metric_names(expr):
        for match in re.finditer(rf"(?<![\w:]){re.escape(name)}(\{{[^}}]*\}})?(?![\w:(])", expr):
            if not all(matcher in (match.group(1) or "") for matcher in SCOPE_MATCHERS):
                found.append(match.group(0))
    return found


def test_every_dashboard_selector_is_scoped_by_cluster_namespace_and_job():
    for title, expr in dashboard_queries():
        assert not unscoped_selectors(expr), f"panel {title!r} sums over every cluster: {unscoped_selectors(expr)}"
    # The check can fail.
    assert sorted(unscoped_selectors('sum(rate(a_total{cluster=~"$cluster", job=~"$job"}[5m])) / b')) == [
        'a_total{cluster=~"$cluster", job=~"$job"}',
        "b",
    ]


def test_the_variables_pick_one_deployment_and_all_matches_missing_labels():
    variables = dashboard_variables()
    assert list(variables) == ["datasource", "cluster", "namespace", "job"]
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    known = exported_metric_names()
    for name, narrower in (("cluster", ()), ("namespace", ("$cluster",)), ("job", ("$cluster", "$namespace"))):
        variable = variables[name]
        assert variable["type"] == "query" and variable["datasource"]["uid"] == "${datasource}"
        assert variable["query"].endswith(f", {name})"), variable["query"]
        selector = variable_selector(variable["query"])
        assert metric_names(selector) <= known, selector
        assert all(f'=~"{used}"' in selector for used in narrower), selector
        assert variable["includeAll"]
    # A Prometheus without cluster or namespace labels: "All" must match the empty value.
    assert variables["cluster"]["allValue"] == variables["namespace"]["allValue"] == ".*"
    # "All" jobs are the Quire jobs found (Grafana's alternation), not every job in the namespace.
    assert "allValue" not in variables["job"] and variables["job"]["multi"]


def test_the_dashboard_opens_on_a_stat_row_of_the_state_now():
    panels = sorted(dashboard_panels(), key=lambda panel: (panel["gridPos"]["y"], panel["gridPos"]["x"]))
    assert panels[0]["type"] == "row"
    first_row = []
    for panel in panels[1:]:
        if panel["type"] == "row":
            break
        first_row.append(panel)
    assert first_row and all(panel["type"] == "stat" for panel in first_row)
    expressions = " ".join(target["expr"] for panel in first_row for target in panel["targets"])
    for needed in ("up", "quire_cluster_bookies", "rpc_server_duration_seconds_count", "quire_bookie_sync_disabled"):
        assert needed in metric_names(expressions), needed
    assert "quire_gateway_digest_mismatches_total" in metric_names(expressions)


def test_errors_cpu_memory_and_entries_have_panels():
    by_metric: dict[str, list[str]] = {}
    for title, expr in dashboard_queries():
        for name in metric_names(expr):
            by_metric.setdefault(name, []).append(title)
    for name in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "rpc_server_duration_seconds_count",
        "quire_bookie_group_commit_entries_sum",
    ):
        assert name in by_metric, name
    # Server errors by their numeric codes.
    assert any('rpc_grpc_status_code=~"2|13|14|15"' in expr for _, expr in dashboard_queries())
    # Entries per second are entries: no panel calls the gateways' runs of entries "adds".
    for title, expr in dashboard_queries():
        if "quire_gateway_add_duration_seconds_count" in metric_names(expr):
            assert "add" not in title.lower(), title


def test_every_alert_names_only_exported_metrics():
    known = exported_metric_names() | PROMETHEUS_OWN
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            unknown = metric_names(rule["expr"]) - known
            assert not unknown, f"{rule['alert']} uses {sorted(unknown)}, which no service exports"


def test_the_dashboard_is_importable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] == "Quire"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert len(titles) == len(set(titles)), "panel titles name panels in tests/e2e/test_prometheus.py"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}", panel["title"]
