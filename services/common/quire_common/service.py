"""The common shape of every service's entry point."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from quire_api.errors import QuireError
from quire_common.config import ConfigError
from quire_common.logs import setup_logging
from quire_common.settings import check_own_settings
from quire_common.telemetry import setup_telemetry, shutdown_telemetry

log = logging.getLogger(__name__)


def run_service(name: str, amain: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Telemetry first, then logging, then the service's async main. A bad
    or misspelt setting, or an unreachable dependency at start, exits with a
    one-line message and status 2, not a traceback."""
    setup_telemetry(name)
    setup_logging(name)
    try:
        check_own_settings(name)
        asyncio.run(amain())
    except (ConfigError, QuireError) as exc:
        log.error("%s cannot start: %s", name, exc)
        print(f"{name}: cannot start: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        pass
    finally:
        shutdown_telemetry()
