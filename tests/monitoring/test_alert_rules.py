"""The shipped alert rules (deploy/monitoring/alerts.yaml) pass `promtool check
rules` and the unit tests in alerts_test.yaml, where every alert is seen
both firing and not firing; each alert's runbook_url is a link to its section
of docs/runbook.md under the one configurable base."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "monitoring" / "alerts.yaml"
RULE_TESTS = Path(__file__).with_name("alerts_test.yaml")
RUNBOOK = ROOT / "docs" / "runbook.md"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found: scripts/setup.sh installs Debian's prometheus package, which has it")
    return found


def alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"] if "alert" in rule]


def test_promtool_accepts_the_rules():
    result = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass():
    result = subprocess.run(
        [promtool(), "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_tested_firing_and_quiet():
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in alerts()}
    assert names - fired == set(), "alerts never seen firing"
    assert names - quiet == set(), "alerts never seen quiet"


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_links_its_runbook_section_under_one_absolute_base():
    anchors = {anchor(line.lstrip("#")) for line in RUNBOOK.read_text().splitlines() if line.startswith("## ")}
    bases = set()
    for rule in alerts():
        base, _, section = rule["annotations"]["runbook_url"].partition("#")
        bases.add(base)
        assert section == anchor(rule["alert"]), rule["alert"]
        assert section in anchors, f"docs/runbook.md has no section for {rule['alert']}"
        assert rule.get("for"), f"{rule['alert']} fires on a single evaluation"
    # One base (deploy/monitoring/generate.py --runbook-base sets it), and a link, not a path.
    assert len(bases) == 1, bases
    assert re.fullmatch(r"https?://[^/#\s]+/\S*", bases.pop())
