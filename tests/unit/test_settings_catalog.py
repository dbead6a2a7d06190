"""The catalog of settings (quire_common.settings) matches the code, and a
misspelt setting under a service's own prefix stops that service."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from quire_common.config import ConfigError
from quire_common.settings import KNOWN_SETTINGS, check_own_settings

SERVICES = Path(__file__).resolve().parents[2] / "services"
PREFIX_WORDS = {
    "QUIRE_AUTH",
    "QUIRE_BOOKIE",
    "QUIRE_ETCD",
    "QUIRE_PLACEMENT",
    "QUIRE_REGISTRY",
    "QUIRE_TELEMETRY",
    "QUIRE_TLS",
}


def test_the_catalog_lists_exactly_the_names_the_services_use():
    used: set[str] = set()
    for path in SERVICES.rglob("*.py"):
        if "generated" in path.parts or path.name == "settings.py":
            continue
        used.update(re.findall(r"(?<![A-Z_])QUIRE_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    assert KNOWN_SETTINGS == used - PREFIX_WORDS


def test_every_setting_is_documented():
    documented = set(
        re.findall(r"QUIRE_[A-Z0-9_]*[A-Z0-9]", (SERVICES.parent / "docs" / "configuration.md").read_text())
    )
    faults = set(re.findall(r"QUIRE_[A-Z0-9_]*[A-Z0-9]", (SERVICES.parent / "docs" / "faults.md").read_text()))
    assert sorted(KNOWN_SETTINGS - documented - faults) == []


def test_a_misspelt_own_setting_stops_the_service_and_names_the_real_one():
    with pytest.raises(
        ConfigError, match=r"QUIRE_GATEWAY_ADD_TIMEOUT_SECOND .*did you mean QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS"
    ):
        check_own_settings("gateway", {"QUIRE_GATEWAY_ADD_TIMEOUT_SECOND": "2"})
    with pytest.raises(ConfigError, match="QUIRE_ETCD_ENDPOINT "):
        check_own_settings("registry", {"QUIRE_ETCD_ENDPOINT": "x:1"})


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
