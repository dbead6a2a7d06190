"""The catalog of settings (quire_common.settings) is the services'
declarations, docs/configuration.md is rendered from them, and a misspelt
setting under a service's own prefix stops that service."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from quire_common.config import ConfigError, declared_settings
from quire_common.settings import KNOWN_SETTINGS, SERVICE_SETTINGS, check_own_settings, service_settings_type

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"
NAME = r"(?<![A-Z_])QUIRE_[A-Z0-9_]*[A-Z0-9]"
# Prefixes and the fault rules' variable named as such in prose and messages.
PREFIX_WORDS = {
    "QUIRE_AUDITOR",
    "QUIRE_AUTH",
    "QUIRE_BOOKIE",
    "QUIRE_ETCD",
    "QUIRE_GATEWAY",
    "QUIRE_PLACEMENT",
    "QUIRE_REGISTRY",
    "QUIRE_TELEMETRY",
    "QUIRE_TLS",
}


def test_every_name_the_services_mention_is_declared():
    used: set[str] = set()
    for path in SERVICES.rglob("*.py"):
        if "generated" not in path.parts:
            used.update(re.findall(NAME, path.read_text()))
    assert sorted(used - PREFIX_WORDS - KNOWN_SETTINGS) == []


def test_no_service_code_reads_the_environment_outside_the_declarations():
    readers = []
    for path in SERVICES.rglob("*.py"):
        text = path.read_text()
        if "generated" in path.parts or (path.name == "config.py" and "quire_common" in path.parts):
            continue
        if re.search(r"os\.environ\.get\(\s*\"QUIRE_|getenv\(\s*\"QUIRE_", text):
            readers.append(str(path.relative_to(ROOT)))
    assert readers == []


def test_the_configuration_reference_is_rendered_from_the_declarations():
    spec = importlib.util.spec_from_file_location("gen_config_docs", ROOT / "scripts" / "gen_config_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render() == (ROOT / "docs" / "configuration.md").read_text()


def test_each_name_is_declared_once():
    for service in SERVICE_SETTINGS:
        names = [meta.env for meta, _ in declared_settings(service_settings_type(service))]
        assert len(names) == len(set(names)), service


def test_durations_are_seconds_and_say_so_last():
    for service in SERVICE_SETTINGS:
        for meta, _ in declared_settings(service_settings_type(service)):
            assert not re.search(r"_MS$|_MILLIS|_SECONDS_", meta.env), meta.env
            assert (meta.unit == "seconds") == meta.env.endswith("_SECONDS"), meta.env


def test_a_misspelt_own_setting_stops_the_service_and_names_the_real_one():
    with pytest.raises(
        ConfigError, match=r"QUIRE_GATEWAY_ADD_TIMEOUT_SECOND .*did you mean QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS"
    ):
        check_own_settings("gateway", {"QUIRE_GATEWAY_ADD_TIMEOUT_SECOND": "2"})
    with pytest.raises(ConfigError, match="QUIRE_ETCD_ENDPOINT "):
        check_own_settings("registry", {"QUIRE_ETCD_ENDPOINT": "x:1"})


def test_a_renamed_settings_old_name_is_not_taken_for_a_misspelling():
    check_own_settings("bookie", {"QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS": "5"})


def test_other_services_and_tools_variables_are_left_alone():
    environ = {
        "QUIRE_BOOKIE_TTL_SECONDS": "3",  # read by the bookie; the gateway just passes through
        "QUIRE_GATEWAY_SOMETHING_ELSE": "1",  # the gateway's prefix, but this is the bookie checking
        "QUIRE_CONTAINER_TESTS": "required",  # a test harness variable
        "QUIRE_GATEWAY_ADDRESS": "127.0.0.1:7000",
    }
    check_own_settings("bookie", environ)
    check_own_settings("gateway", {k: v for k, v in environ.items() if k != "QUIRE_GATEWAY_SOMETHING_ELSE"})
    check_own_settings("telemetry", {"QUIRE_TELEMETRY_WHATEVER": "1"})  # no own prefixes
