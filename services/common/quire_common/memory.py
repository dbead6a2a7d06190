"""Giving memory the process has freed back to the operating system.

glibc keeps what Python and RocksDB free in its heaps for reuse, so a cache
that empties or a memtable that is flushed leaves the process's RSS where it
was; only `malloc_trim` hands whole free pages back. Callers ask for it after
freeing a lot at once (an idle cache emptied, memtables flushed), never per
operation."""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# Below this, what was freed is left for glibc to reuse: a trim walks every heap.
WORTH_GIVING_BACK_BYTES = 1024 * 1024


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


def give_back_free_memory() -> bool:
    """Return the allocator's free pages to the OS; False where the C library
    cannot. ctypes releases the GIL for the call; it takes milliseconds for
    a heap of a few hundred MB, so call it off the event loop."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
