"""Loaded first, as `sitecustomize`, by the processes the clock rows run under libfaketime.

Debian's libfaketime (0.9.10) breaks Python 3.11's `time.sleep` when the monotonic clock is left
alone (FAKETIME_DONT_FAKE_MONOTONIC, as an NTP step leaves it): it shifts the absolute monotonic
deadline `time.sleep` hands to clock_nanosleep by the faked offset, and every sleep, even of 0 s,
fails EINVAL (wolfcw/libfaketime#426). A bookie's threads sleep (the histogram recorder, a
delete's count), so under it they died where no real clock jump would kill them. This sleeps
with select(), whose relative timeout libfaketime leaves as it is; like time.sleep it releases
the interpreter and resumes after a signal."""

from __future__ import annotations

import select
import time
from typing import SupportsIndex


def _sleep(seconds: float | SupportsIndex) -> None:
    delay = float(seconds)
    if delay < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], delay)


time.sleep = _sleep
