"""The settings machinery (quire_common.config): every declared setting
parses its own default, a bad value of each type is refused naming the
variable, and a renamed setting's old name is read and reported."""

from __future__ import annotations

import dataclasses

import pytest

from quire_common.config import ConfigError, Renamed, declared_settings, load_settings, renamed_in_use, setting
from quire_common.settings import SERVICE_SETTINGS, LogEnv, service_settings_type

SERVICES = sorted(SERVICE_SETTINGS)


def _as_text(default):
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, tuple):
        return ",".join(default)
    return str(default)


@pytest.mark.parametrize("service", SERVICES)
def test_with_nothing_set_every_field_has_its_declared_default(service):
    kind = service_settings_type(service)
    assert load_settings(kind, {}) == kind()


@pytest.mark.parametrize("service", SERVICES)
def test_every_declared_default_written_out_parses_back_to_itself(service):
    kind = service_settings_type(service)
    environ = {
        meta.env: _as_text(default) for meta, default in declared_settings(kind) if default not in (None, "", ())
    }
    assert load_settings(kind, environ) == kind()


def _bad_value(kind):
    return {int: "1.5x", float: "fast", bool: "maybe"}.get(kind)


@pytest.mark.parametrize("service", SERVICES)
def test_a_bad_value_of_every_typed_setting_is_refused_naming_it(service):
    kind = service_settings_type(service)
    checked = 0
    for meta, default in declared_settings(kind):
        value_kind = type(default) if default is not None else (bool if "ENABLED" in meta.env else int)
        bad = _bad_value(value_kind)
        if meta.choices:
            bad = "not-a-choice"
        if bad is None:
            continue
        with pytest.raises(ConfigError, match=meta.env):
            load_settings(kind, {meta.env: bad})
        checked += 1
    assert checked > 5


def test_bounds_are_checked_and_named():
    gateway = service_settings_type("gateway")
    with pytest.raises(ConfigError, match=r"QUIRE_GATEWAY_SESSION_SECONDS=1 is below the minimum 2"):
        load_settings(gateway, {"QUIRE_GATEWAY_SESSION_SECONDS": "1"})
    with pytest.raises(ConfigError, match=r"QUIRE_GATEWAY_HTTP_PORT=70000 is above the maximum 65535"):
        load_settings(gateway, {"QUIRE_GATEWAY_HTTP_PORT": "70000"})
    with pytest.raises(ConfigError, match="QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS='nan' is not a finite number"):
        load_settings(gateway, {"QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS": "nan"})


def test_the_log_level_is_checked_whatever_its_case():
    assert load_settings(LogEnv, {"QUIRE_LOG_LEVEL": "debug"}).level == "debug"
    with pytest.raises(ConfigError, match="QUIRE_LOG_LEVEL='verbose'"):
        load_settings(LogEnv, {"QUIRE_LOG_LEVEL": "verbose"})


@dataclasses.dataclass(frozen=True)
class Sample:
    wait_seconds: float = setting(
        "QUIRE_SAMPLE_WAIT_SECONDS",
        1.0,
        "how long",
        services="test",
        section="test",
        unit="seconds",
        maximum=10,
        renamed_from=Renamed("QUIRE_SAMPLE_WAIT_MS", 1 / 1000),
    )
    names: tuple[str, ...] = setting("QUIRE_SAMPLE_NAMES", (), "which", services="test", section="test")


def test_a_renamed_setting_reads_its_old_name_in_the_old_unit_and_is_reported():
    assert load_settings(Sample, {"QUIRE_SAMPLE_WAIT_MS": "250"}).wait_seconds == 0.25
    assert load_settings(Sample, {"QUIRE_SAMPLE_WAIT_MS": "250", "QUIRE_SAMPLE_WAIT_SECONDS": "2"}).wait_seconds == 2
    (warning,) = renamed_in_use(Sample, {"QUIRE_SAMPLE_WAIT_MS": "250"})
    assert "QUIRE_SAMPLE_WAIT_MS is renamed QUIRE_SAMPLE_WAIT_SECONDS" in warning
    assert renamed_in_use(Sample, {"QUIRE_SAMPLE_WAIT_SECONDS": "2"}) == []
    with pytest.raises(ConfigError, match="QUIRE_SAMPLE_WAIT_MS"):
        load_settings(Sample, {"QUIRE_SAMPLE_WAIT_MS": "20000"})


def test_lists_are_comma_separated():
    assert load_settings(Sample, {"QUIRE_SAMPLE_NAMES": " a, b ,,c"}).names == ("a", "b", "c")


def test_a_duration_must_say_seconds_last():
    with pytest.raises(AssertionError, match="_SECONDS"):
        setting("QUIRE_SAMPLE_WAIT_MS", 1.0, "x", services="test", section="test", unit="seconds")
