"""Bookie settings from the environment: defaults, and bad values named."""

import pytest

from quire_bookie.config import BookieConfig
from quire_common.config import ConfigError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("QUIRE_BOOKIE_"):
            monkeypatch.delenv(name)


def test_defaults(monkeypatch):
    monkeypatch.setenv("QUIRE_BOOKIE_PORT", "3182")
    config = BookieConfig.from_env()
    assert config.bookie_id == "127.0.0.1:3182"
    assert config.http_port == 8182  # port + 5000
    assert config.storage.sync and config.storage.group_commit_max_delay_seconds == 0
    assert (config.storage.read_only.read_only_usage, config.storage.read_only.writable_usage) == (0.95, 0.90)
    assert not config.standalone and config.autorecovery == ""


def test_custom_settings(monkeypatch):
    for name, value in {
        "QUIRE_BOOKIE_ID": "bookie-0.quire.svc",
        "QUIRE_BOOKIE_HTTP_PORT": "0",
        "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS": "0.005",
        "QUIRE_BOOKIE_CAPACITY_BYTES": "1048576",
        "QUIRE_BOOKIE_FORCE_READ_ONLY": "true",
        "QUIRE_BOOKIE_AUTORECOVERY": "yes",
    }.items():
        monkeypatch.setenv(name, value)
    config = BookieConfig.from_env()
    assert config.bookie_id == "bookie-0.quire.svc" and config.http_port == 0
    assert config.storage.group_commit_max_delay_seconds == 0.005
    assert config.storage.capacity_bytes == 1048576 and config.storage.read_only.forced
    assert config.autorecovery == "true"


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("QUIRE_BOOKIE_ID", "has space", "QUIRE_BOOKIE_ID"),
        ("QUIRE_BOOKIE_ID", "ReadOnly", "readonly"),
        ("QUIRE_BOOKIE_READ_ONLY_USAGE", "1.5", "QUIRE_BOOKIE_READ_ONLY_USAGE"),
        ("QUIRE_BOOKIE_WRITABLE_USAGE", "0.99", "must not exceed"),
        ("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS", "soon", "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS"),
        ("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS", "2", "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS"),
        ("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS", "soon", "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS"),
        ("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS", "2000", "QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS"),
        ("QUIRE_BOOKIE_AUTORECOVERY", "maybe", "QUIRE_BOOKIE_AUTORECOVERY"),
    ],
)
def test_bad_values_name_the_variable(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        BookieConfig.from_env()


def test_the_damaged_journal_control_is_off_unless_set(monkeypatch):
    assert not BookieConfig.from_env().storage.fault_unsafe_wal_point_in_time_recovery
    monkeypatch.setenv("QUIRE_BOOKIE_FAULT_UNSAFE_WAL_POINT_IN_TIME_RECOVERY", "true")
    assert BookieConfig.from_env().storage.fault_unsafe_wal_point_in_time_recovery


def test_a_renamed_setting_still_reads_its_old_name_in_the_old_unit(monkeypatch):
    monkeypatch.setenv("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_MS", "5")
    monkeypatch.setenv("QUIRE_BOOKIE_DISK_CHECK_INTERVAL_MS", "250")
    config = BookieConfig.from_env()
    assert config.storage.group_commit_max_delay_seconds == 0.005
    assert config.storage.disk_check_interval_seconds == 0.25
    # The new name wins over the old one.
    monkeypatch.setenv("QUIRE_BOOKIE_GROUP_COMMIT_MAX_DELAY_SECONDS", "0.002")
    assert BookieConfig.from_env().storage.group_commit_max_delay_seconds == 0.002
