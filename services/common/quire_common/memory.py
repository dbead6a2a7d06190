"""When freed memory goes back to the operating system.

glibc keeps what Python and RocksDB free in its heaps for reuse, so a cache
that empties or a memtable that is flushed leaves the process's RSS where it
was; only `malloc_trim` hands whole free pages back. Callers ask for it after
freeing a lot at once (an idle cache emptied, memtables flushed), never per
operation. Under load the opposite holds: the heap should keep its slack
(`keep_heap_slack`)."""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# Below this, what was freed is left for glibc to reuse: a trim walks every heap.
WORTH_GIVING_BACK_BYTES = 1024 * 1024

# glibc shrinks its main heap whenever the free memory at its top passes a threshold, which
# by default it sets itself to twice the largest block it has mmapped and then freed: a few
# MiB here. A gateway writing 64 KiB entries (each alive from the client's message to its
# quorum and the entry cache, bookie messages of up to 4 MiB joined from them) crossed it all
# the time, and paid for the pages again: 15 page faults per entry on its event loop, against
# 1.7 in the floor prototype's gateway and 1.9 with these thresholds (docs/decisions.md). An
# idle process still gives its memory back through give_back_free_memory.
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024
# Blocks above this are mmapped and unmapped again on free. Set (setting either threshold
# stops glibc from moving both), above the largest bookie message a gateway builds.
MMAP_THRESHOLD_BYTES = 8 * 1024 * 1024
_M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
        log.info("malloc_trim is not available here: freed memory stays with the allocator")
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def keep_heap_slack() -> bool:
    """Set glibc's trim and mmap thresholds (above) for this process; False
    where the C library has no mallopt. Called once, at a service's start."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def give_back_free_memory() -> bool:
    """Return the allocator's free pages to the OS; False where the C library
    cannot. ctypes releases the GIL for the call; it takes milliseconds for
    a heap of a few hundred MB, so call it off the event loop."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
