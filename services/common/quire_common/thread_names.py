"""Threads named where the operating system shows them.

Python names its threads for itself only: `top -H`, `ps -L`, perf and
/proc/<pid>/task/*/comm show every thread of a service as `python`, so the
CPU of its event loop, gRPC's poller and a bookie's writer thread cannot be
told apart from outside. Quire names its own threads and gRPC's poller
there too (at most 15 bytes, the kernel's limit); `quire bench` reports a
local cluster's CPU per write by thread from those names. The main thread,
which runs the event loop, keeps the process's name: renaming it would
rename the process for ps and pidof.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

MAX_NAME_BYTES = 15  # the kernel's limit on a thread's comm, without the terminating NUL

GRPC_POLLER = "grpc-poller"
_GRPC_POLLER_TARGET = "_poll_wrapper"  # grpc.aio's poller thread is named "Thread-N (_poll_wrapper)"


def _pthread_setname_np() -> Callable[[int, bytes], int] | None:
    try:
        setname = ctypes.CDLL(None).pthread_setname_np
    except (AttributeError, OSError):  # not glibc, or not Linux: threads stay unnamed
        return None
    setname.argtypes = [ctypes.c_ulong, ctypes.c_char_p]
    setname.restype = ctypes.c_int
    return setname


_setname = _pthread_setname_np()


def name_native_thread(thread: threading.Thread, name: str) -> bool:
    """Give a started thread `name` where the OS shows it; whether it took."""
    if _setname is None or thread.ident is None:
        return False
    return _setname(thread.ident, name.encode()[:MAX_NAME_BYTES]) == 0


def name_grpc_poller() -> None:
    """Name gRPC's poller thread, which grpc.aio starts with its first server
    or channel in the process."""
    for thread in threading.enumerate():
        if thread.name.endswith(f"({_GRPC_POLLER_TARGET})"):
            name_native_thread(thread, GRPC_POLLER)
