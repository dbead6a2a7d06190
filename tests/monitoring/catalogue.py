"""What the services export, read from their code, and the metric names a
PromQL expression uses: shared by the dashboard test and the end-to-end
scrape (tests/e2e/test_prometheus.py)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "monitoring" / "grafana-dashboard.json"
RULES = ROOT / "deploy" / "monitoring" / "alerts.yaml"

_COUNTERS = {"create_counter", "create_observable_counter"}
_GAUGES = {"create_observable_gauge", "create_gauge", "create_up_down_counter", "create_observable_up_down_counter"}
_HISTOGRAMS = {"create_histogram"}
_UNIT_SUFFIX = {"s": "_seconds", "By": "_bytes"}
# Series Prometheus adds itself to every target.
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
# /metrics serves prometheus_client's default registry (quire_common.telemetry),
# whose process collector adds these on Linux (test_dashboard.py checks them
# against the library).
PROCESS_SERIES = {
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
}
# The dashboard's variables, and what "All" stands for where a label may be
# absent (a Prometheus without cluster or namespace labels).
SCOPE_MATCHERS = ('cluster=~"$cluster"', 'namespace=~"$namespace"', 'job=~"$job"')


def _prometheus_names(name: str, unit: str, kind: str) -> set[str]:
    """The series names the OpenTelemetry Prometheus exporter makes of an instrument."""
    base = name.replace(".", "_") + _UNIT_SUFFIX.get(unit, "")
    if kind == "counter":
        return {f"{base}_total"}
    if kind == "histogram":
        return {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return {base}


def exported_metric_names() -> set[str]:
    """Every quire_* series name the services can export: their OpenTelemetry
    instruments, found in the code (/metrics has nothing else)."""
    names: set[str] = set()
    for path in (ROOT / "services").rglob("*.py"):
        if "generated" in path.parts:
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call):
                continue
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            units = [k.value.value for k in node.keywords if k.arg == "unit" and isinstance(k.value, ast.Constant)]
            unit = units[0] if units else ""
            if function == "duration_histogram" and strings:
                names |= _prometheus_names(strings[0], "s", "histogram")
            elif function == "deferred_histogram" and len(strings) >= 2:  # (meter, name, unit, description)
                names |= _prometheus_names(strings[0], strings[1], "histogram")
            elif strings and function in _COUNTERS | _GAUGES | _HISTOGRAMS:
                kind = "counter" if function in _COUNTERS else "histogram" if function in _HISTOGRAMS else "gauge"
                names |= _prometheus_names(strings[0], str(unit), kind)
    return names


_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "group_left", "group_right"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, labels or keywords)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery windows
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    found = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        following = text[match.end() :].lstrip()
        if following.startswith("(") or match.group() in _KEYWORDS:
            continue
        if match.start() and (text[match.start() - 1].isdigit() or text[match.start() - 1] == "."):
            continue  # the exponent or unit of a number, e.g. 1e-9
        found.add(match.group())
    return found


def dashboard_panels() -> list[dict]:
    return list(json.loads(DASHBOARD.read_text())["panels"])


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every target in the Grafana dashboard."""
    queries = []
    for panel in dashboard_panels():
        for target in panel.get("targets", []):
            queries.append((panel["title"], target["expr"]))
    return queries


def dashboard_variables() -> dict[str, dict]:
    """The dashboard's template variables by name."""
    return {variable["name"]: variable for variable in json.loads(DASHBOARD.read_text())["templating"]["list"]}


def variable_selector(query: str) -> str:
    """The series selector of a `label_values(selector, label)` variable query."""
    match = re.fullmatch(r"label_values\((.*),\s*[a-z_]+\)", query)
    assert match, query
    return match.group(1)


def as_prometheus_query(expr: str, rate_window: str = "1m", jobs: str = ".*") -> str:
    """A dashboard expression with Grafana's variables filled in, for Prometheus's
    API: every cluster and namespace ("All" matches a missing label too), and
    `jobs` (a regex: Grafana's "All" is the alternation of the job variable's values)."""
    for name, value in (("$__rate_interval", rate_window), ("$cluster", ".*"), ("$namespace", ".*"), ("$job", jobs)):
        expr = expr.replace(name, value)
    return expr
