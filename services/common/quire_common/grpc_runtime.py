"""How gRPC core does its I/O in Quire's services, chosen before gRPC loads.

gRPC core (1.85) reads GRPC_EXPERIMENTS once, when `grpc` is first imported,
so each service package imports this module from its `__init__`, ahead of any
generated stub. An operator's own GRPC_EXPERIMENTS is left as it is.

Why: by default gRPC core runs every socket read and write of a Python server
or channel on its EventEngine thread pool and hands each completion to the
asyncio loop through yet another thread. Each message then costs several
context switches, which dominate on a small machine. With the EventEngine
endpoints, listener and callback queue turned off, gRPC's poller does the I/O
itself. Measured here (2 cores): an echo AddStream went from 2,400 to 3,400
round trips/s at 1 in flight (server CPU 230 -> 190 us per round trip), and a
3-bookie cluster at 16 one-entry writers from ~1,000-1,300 to ~1,500-1,650
entries/s (docs/benchmarks.md, docs/decisions.md).
"""

from __future__ import annotations

import os

# Experiment names are those of the locked grpcio (requirements/lock.txt); an unknown
# name is logged by gRPC and ignored, never fatal.
LEGACY_IO_EXPERIMENTS = (
    "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints,-event_engine_callback_cq"
)

os.environ.setdefault("GRPC_EXPERIMENTS", LEGACY_IO_EXPERIMENTS)
