"""The Grafana dashboard (deploy/monitoring/grafana-dashboard.json) queries only
metrics the services export, and so do the alert rules. That the queries
return data from a real cluster is checked end to end (tests/e2e/test_prometheus.py)."""

from __future__ import annotations

import json

import yaml

from tests.monitoring.catalogue import (
    DASHBOARD,
    PROMETHEUS_OWN,
    RULES,
    dashboard_queries,
    exported_metric_names,
    metric_names,
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
        "rpc_server_duration_seconds_count",
        "quire_build_info",
    ):
        assert expected in names
    assert not any(name.endswith("_milliseconds_bucket") for name in names)


def test_the_expression_parser_finds_metric_names():
    expr = (
        'histogram_quantile(0.99, sum by (instance, le) (rate(a_bucket{job="x", le!="1"}[$__rate_interval])))'
        " / on (instance) group_left b_total offset 5m > 1e-9 and c or vector(0)"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}


def test_every_dashboard_query_names_only_exported_metrics():
    known = exported_metric_names() | PROMETHEUS_OWN
    queries = dashboard_queries()
    assert len(queries) >= 20
    for title, expr in queries:
        unknown = metric_names(expr) - known
        assert not unknown, f"panel {title!r} queries {sorted(unknown)}, which no service exports"


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
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
