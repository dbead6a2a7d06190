"""The event loop a service runs on (QUIRE_EVENT_LOOP) and its collector's tuning (QUIRE_GC_YOUNG_THRESHOLD)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import uvloop

from quire_common.config import ConfigError, load_settings
from quire_common.service import event_loop_factory
from quire_common.settings import service_settings_type


def test_uvloop_by_default_and_the_standard_loop_on_request() -> None:
    factory = event_loop_factory("uvloop")
    assert factory is not None
    with asyncio.Runner(loop_factory=factory) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
    assert event_loop_factory("asyncio") is None
    with asyncio.Runner(loop_factory=event_loop_factory("asyncio")) as runner:
        assert not isinstance(runner.get_loop(), uvloop.Loop)


def test_the_collector_is_tuned_once_setup_is_done() -> None:
    """tune_collector freezes what exists and sets only the young generation's threshold
    (run in a child: freezing the test process would keep its objects from the collector)."""
    probe = (
        "import gc; from quire_common.service import tune_collector; "
        "before = gc.get_threshold(); tune_collector(12345); after = gc.get_threshold(); "
        "print(after[0], after[1:] == before[1:], gc.get_freeze_count() > 0)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["12345", "True", "True"]


def test_the_young_threshold_setting_is_bounded_and_named() -> None:
    server = load_settings(service_settings_type("bookie"), {}).common.server
    assert server.gc_young_threshold == 10_000
    with pytest.raises(ConfigError, match=r"QUIRE_GC_YOUNG_THRESHOLD=0 is below the minimum 100"):
        load_settings(service_settings_type("bookie"), {"QUIRE_GC_YOUNG_THRESHOLD": "0"})
