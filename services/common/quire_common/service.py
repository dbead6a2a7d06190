"""The common shape of every service's entry point."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, Protocol, TypeVar

from quire_api.errors import QuireError
from quire_common.build_info import register_build_info_gauge, status_fields
from quire_common.config import ConfigError, load_settings, renamed_in_use
from quire_common.logs import setup_logging
from quire_common.memory import keep_heap_slack
from quire_common.settings import CommonEnv, check_own_settings, use_common_settings
from quire_common.telemetry import setup_telemetry, shutdown_telemetry

log = logging.getLogger(__name__)


class ServiceSettings(Protocol):
    @property
    def common(self) -> CommonEnv: ...


S = TypeVar("S", bound=ServiceSettings)


def _cannot_start(name: str, exc: Exception) -> NoReturn:
    print(f"{name}: cannot start: {exc}", file=sys.stderr)
    sys.exit(2)


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """QUIRE_EVENT_LOOP: uvloop's loop, or None for the standard one."""
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None


def tune_collector(young_threshold: int) -> None:
    """Set the garbage collector up for a long-running service, once its setup is done.

    What the imports and the setup made lives as long as the process: it is frozen out of
    the collector's full passes, which otherwise walked all of it and held a loaded gateway's
    event loop for about 44 ms each. The young generation may then grow by `young_threshold`
    objects between walks: the entries a loaded gateway has in flight survive every walk, so
    at the default 700 it walked them about fifty times a second at 64 writers, for nothing
    (docs/decisions.md, "Startup objects frozen out of the collector", "The young generation's
    walks at 64 writers")."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, oldest)


def run_service(name: str, settings_type: type[S], amain: Callable[[S], Coroutine[Any, Any, None]]) -> None:
    """Read the service's settings once, then telemetry, logging and the
    service's async main, which is given them. A bad or misspelt setting, or
    an unreachable dependency at start, exits with a one-line message naming
    it and status 2, not a traceback."""
    try:
        settings = load_settings(settings_type)
        check_own_settings(name)
    except ConfigError as exc:
        _cannot_start(name, exc)
    use_common_settings(settings.common)
    keep_heap_slack()
    setup_telemetry(name, settings.common.telemetry)
    setup_logging(name, settings.common.logs)
    register_build_info_gauge()
    log.info("%s %s", name, " ".join(f"{key} {value}" for key, value in status_fields().items()))
    for warning in renamed_in_use(settings_type):
        log.warning("%s", warning)
    tune_collector(settings.common.server.gc_young_threshold)
    try:
        with asyncio.Runner(loop_factory=event_loop_factory(settings.common.server.event_loop)) as runner:
            runner.run(amain(settings))
    except (ConfigError, QuireError) as exc:
        log.error("%s cannot start: %s", name, exc)
        _cannot_start(name, exc)
    except KeyboardInterrupt:
        pass
    finally:
        shutdown_telemetry()
