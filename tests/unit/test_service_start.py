"""The event loop a service runs on (QUIRE_EVENT_LOOP)."""

from __future__ import annotations

import asyncio

import uvloop

from quire_common.service import event_loop_factory


def test_uvloop_by_default_and_the_standard_loop_on_request() -> None:
    factory = event_loop_factory("uvloop")
    assert factory is not None
    with asyncio.Runner(loop_factory=factory) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
    assert event_loop_factory("asyncio") is None
    with asyncio.Runner(loop_factory=event_loop_factory("asyncio")) as runner:
        assert not isinstance(runner.get_loop(), uvloop.Loop)
