"""The Prometheus Operator component ships the one rules file as a
PrometheusRule and the one dashboard as a Grafana sidecar ConfigMap, generated
by deploy/monitoring/generate.py: the generated files say exactly what the
sources say, the script notices when they do not, and it sets the runbook
links' base."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.deploy.kustomize import render
from tests.monitoring.catalogue import DASHBOARD, ROOT, RULES
from tests.monitoring.test_alert_rules import promtool

COMPONENT = ROOT / "deploy" / "kubernetes" / "components" / "prometheus-operator"
GENERATE = ROOT / "deploy" / "monitoring" / "generate.py"


def generate(*args: str, script: Path = GENERATE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60)


def production() -> list[dict]:
    return render(ROOT / "deploy" / "kubernetes" / "overlays" / "production")


def one(manifests: list[dict], kind: str, name: str) -> dict:
    (found,) = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def test_the_prometheus_rule_is_the_rules_file():
    rule = one(production(), "PrometheusRule", "quire")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "quire"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())


def test_the_prometheus_rule_passes_promtool(tmp_path: Path):
    spec = yaml.safe_load((COMPONENT / "prometheusrule.yaml").read_text())["spec"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec))
    result = subprocess.run(
        [promtool(), "check", "rules", str(tmp_path / "rules.yaml")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_config_map_is_the_dashboard_for_grafanas_sidecar():
    config_map = one(production(), "ConfigMap", "quire-grafana-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == "quire"
    (key,) = config_map["data"]
    assert key.endswith(".json")
    assert json.loads(config_map["data"][key]) == json.loads(DASHBOARD.read_text())


def test_the_generated_files_are_current():
    result = generate("--check")
    assert result.returncode == 0, result.stderr


def copy_of_the_sources(tmp_path: Path) -> Path:
    """deploy/monitoring and the component in their places under tmp_path; the copied script."""
    shutil.copytree(ROOT / "deploy" / "monitoring", tmp_path / "deploy" / "monitoring")
    shutil.copytree(COMPONENT, tmp_path / "deploy" / "kubernetes" / "components" / "prometheus-operator")
    return tmp_path / "deploy" / "monitoring" / "generate.py"


def test_check_names_a_generated_file_the_sources_moved_away_from(tmp_path: Path):
    script = copy_of_the_sources(tmp_path)
    rules = tmp_path / "deploy" / "monitoring" / "alerts.yaml"
    rules.write_text(rules.read_text().replace("for: 2m", "for: 3m", 1))
    dashboard = tmp_path / "deploy" / "monitoring" / "grafana-dashboard.json"
    dashboard.write_text(dashboard.read_text().replace('"refresh": "30s"', '"refresh": "1m"'))
    result = generate("--check", script=script)
    assert result.returncode == 1
    assert "prometheusrule.yaml is stale" in result.stderr and "grafana-dashboard.yaml is stale" in result.stderr
    # Generating brings them in line again.
    assert generate(script=script).returncode == 0
    assert generate("--check", script=script).returncode == 0


def test_runbook_base_sets_every_link_in_both_places(tmp_path: Path):
    script = copy_of_the_sources(tmp_path)
    base = "https://git.example.org/ops/quire/blob/v0.1.0/docs/runbook.md"
    result = generate("--runbook-base", base, script=script)
    assert result.returncode == 0, result.stderr
    rules = yaml.safe_load((tmp_path / "deploy" / "monitoring" / "alerts.yaml").read_text())
    component = tmp_path / "deploy" / "kubernetes" / "components" / "prometheus-operator"
    assert yaml.safe_load((component / "prometheusrule.yaml").read_text())["spec"] == rules
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert len(alerts) > 10
    for rule in alerts:
        assert rule["annotations"]["runbook_url"] == f"{base}#{rule['alert'].lower()}"
    assert generate("--check", script=script).returncode == 0


def test_a_bad_runbook_base_is_refused_without_a_traceback(tmp_path: Path):
    script = copy_of_the_sources(tmp_path)
    before = (tmp_path / "deploy" / "monitoring" / "alerts.yaml").read_text()
    for bad in ("docs/runbook.md", "https://example.org/runbook.md#top", "ftp://example.org/runbook.md"):
        result = generate("--runbook-base", bad, script=script)
        assert result.returncode == 2, bad
        assert "--runbook-base" in result.stderr and "Traceback" not in result.stderr
    assert (tmp_path / "deploy" / "monitoring" / "alerts.yaml").read_text() == before
