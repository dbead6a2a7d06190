"""Waiting for gRPC health: the one readiness signal every Quire service gives."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


class StartupError(RuntimeError):
    """A cluster did not become ready; the message says why and shows recent logs."""


def is_serving(target: str, service: str = "", timeout_seconds: float = 1.0) -> bool:
    try:
        with grpc.insecure_channel(target) as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_seconds
            )
            return bool(response.status == health_pb2.HealthCheckResponse.SERVING)
    except grpc.RpcError:
        return False


def wait_until_serving(
    targets: Sequence[str],
    timeout_seconds: float,
    *,
    still_running: Callable[[], str | None] = lambda: None,
    poll_seconds: float = 0.25,
) -> None:
    """Return once every target's overall health is SERVING.

    `still_running` returns a reason when whatever runs the targets has died,
    which ends the wait at once instead of at the deadline. Raises StartupError
    (without logs: the caller knows where they are) or TimeoutError.
    """
    deadline = time.monotonic() + timeout_seconds
    pending = list(targets)
    while True:
        pending = [target for target in pending if not is_serving(target)]
        if not pending:
            return
        died = still_running()
        if died is not None:
            raise StartupError(died)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not SERVING within {timeout_seconds:.0f}s: {', '.join(pending)}")
        time.sleep(poll_seconds)
