"""Threads named where the OS shows them, and the CPU by thread that
`quire bench` reads from those names."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from quire_client.bench_closed import thread_cpu_seconds
from quire_common.thread_names import GRPC_POLLER, name_grpc_poller, name_native_thread

_test_over = threading.Event()


@pytest.fixture(autouse=True)
def _end_threads() -> Iterator[None]:
    _test_over.clear()
    yield
    _test_over.set()


def native_name(thread: threading.Thread) -> str:
    return Path(f"/proc/self/task/{thread.native_id}/comm").read_text().strip()


def run_named(name: str | None, work: float = 0.0) -> str:
    """Start a thread, give it `name` (or none), let it spend `work` seconds
    of CPU; returns its OS name. The thread lives on until the test ends."""
    named, worked = threading.Event(), threading.Event()

    def body() -> None:
        named.wait(30)
        end = time.thread_time() + work
        while time.thread_time() < end:  # CPU time, so a busy machine cannot cut it short
            pass
        worked.set()
        _test_over.wait(60)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    if name is not None:
        assert name_native_thread(thread, name)
    named.set()
    assert worked.wait(60)
    return native_name(thread)


def test_a_thread_is_named_for_the_os_within_its_limit() -> None:
    assert run_named("quire-test-thread-with-a-long-name") == "quire-test-thre"  # 15 bytes
    unnamed = run_named(None)
    assert unnamed == Path("/proc/self/comm").read_text().strip(), "the control: a thread left alone is the process"


def test_grpc_poller_is_named_once_grpc_aio_has_started_it() -> None:
    async def names_with_a_server() -> list[str]:
        server = grpc.aio.server()  # grpc.aio starts its poller with its first server or channel
        try:
            name_grpc_poller()
            return [native_name(t) for t in threading.enumerate() if t.name.endswith("(_poll_wrapper)")]
        finally:
            await server.stop(None)

    assert asyncio.run(names_with_a_server()) == [GRPC_POLLER]


def test_cpu_is_added_up_by_thread_name_with_the_main_thread_apart() -> None:
    before = thread_cpu_seconds(os.getpid())
    run_named("cpu-burner", work=0.3)
    after = thread_cpu_seconds(os.getpid())
    assert "main" in before and "main" in after
    assert after.get("cpu-burner", 0.0) - before.get("cpu-burner", 0.0) >= 0.2
    assert thread_cpu_seconds(2**22 + 12345) == {}, "a process that is not there reads as nothing"
