"""What a client-only install (quire-ledger-client) does not bring, imported when needed.

The client needs only quire-ledger-api. The commands that run Quire's own code
(`quire cluster up`, `bookie inspect`, `telemetry`, `bench bookie`, the
standalone entry point) need the server distribution, and `quire dev certs` and
`dev token` need cryptography and PyJWT; they import those here, when they run,
so a missing package is one line naming what to install instead of a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

SERVER = "quire-ledger"  # the services, their runtime and RocksDB, etcd, OpenTelemetry
CERTS = "quire-ledger-client[certs]"  # cryptography and PyJWT


class MissingPackage(Exception):
    """A command needs a distribution that is not installed."""


def import_for(module: str, what: str, distribution: str) -> ModuleType:
    """`module`, or MissingPackage naming `distribution` when it (or what it needs) is not installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingPackage(
            f"{what} needs the {distribution} package ({exc.name} is not installed): pip install '{distribution}'"
        ) from None
