"""Histograms whose samples reach OpenTelemetry off the path that takes them.

A sample recorded through the OpenTelemetry SDK costs a few microseconds in
a tight loop, and measured in place far more: taking a bookie's three records
per group commit away saved about 55 µs of its event loop per commit at one
writer (docs/decisions.md, "Histogram samples recorded off the path"). The
SDK has no asynchronous histogram, so a `DeferredHistogram` keeps each sample
in a deque (an append on the path) and the samples waiting are recorded into
the SDK's histogram together:

- by one background thread per process, every RECORD_EVERY_SECONDS, a
  slice of SLICE samples at a time with the interpreter released in between,
  so the event loop waits for it no longer than one slice (recording them all
  at once on the loop held it for milliseconds and showed in p99 latency);
- before every collection: an observable gauge that reports nothing runs a
  callback, and the SDK runs every such callback before it reads its
  histograms, for every reader (periodic export, Prometheus scrape, a test's
  in-memory reader), so a reader never misses a sample taken before it asked;
- on the path itself once MAX_WAITING wait (the thread could not keep up):
  the oldest one for each new one, so memory stays bounded and the path never
  records a burst (4,096 at once would hold the event loop for tens of ms).

What a reader sees is the same distribution, sum and count. Samples lose the
exemplar the SDK could take from the recording context (tracing off, the
default, takes none). Samples are appended and taken with the deque's atomic
`append` and `popleft`, so recorders on several threads never lose or repeat
one.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from quire_common.thread_names import name_native_thread

Attributes = Mapping[str, str | int] | None

RECORD_EVERY_SECONDS = 0.1
SLICE = 16  # samples recorded between two releases of the interpreter (a few µs each)
MAX_WAITING = 4096  # then the path records the oldest for each it adds

# One DeferredHistogram per (meter, name): a second would register a second
# observable gauge of the same name, which the SDK refuses.
_made: dict[tuple[metrics.Meter, str], DeferredHistogram] = {}
_recorder: threading.Thread | None = None
_recorder_lock = threading.Lock()


class DeferredHistogram:
    __slots__ = ("_histogram", "_waiting")

    def __init__(self, histogram: metrics.Histogram) -> None:
        self._histogram = histogram
        self._waiting: deque[tuple[float, Attributes]] = deque()

    def record(self, value: float, attributes: Attributes = None) -> None:
        waiting = self._waiting
        waiting.append((value, attributes))
        if len(waiting) >= MAX_WAITING:
            try:
                oldest_value, oldest_attributes = waiting.popleft()
            except IndexError:  # the recorder or a collection took them meanwhile
                return
            self._histogram.record(oldest_value, oldest_attributes)
        elif _recorder is None:
            _start_recorder()

    def flush(self, slice_size: int = 0) -> None:
        """Record every waiting sample into the SDK's histogram; with
        `slice_size`, release the interpreter after each that many."""
        record = self._histogram.record
        waiting = self._waiting
        recorded = 0
        while True:
            try:
                value, attributes = waiting.popleft()
            except IndexError:
                return
            record(value, attributes)
            recorded += 1
            if recorded == slice_size:
                recorded = 0
                time.sleep(0)  # lets a waiting event loop take the interpreter

    def _before_collection(self, options: CallbackOptions) -> Iterable[Observation]:
        self.flush()
        return ()


def deferred_histogram(
    meter_: metrics.Meter,
    name: str,
    unit: str,
    description: str,
    bucket_boundaries: Sequence[float] | None = None,
) -> DeferredHistogram:
    """The DeferredHistogram `name` of `meter_` (the same one if asked again)."""
    made = _made.get((meter_, name))
    if made is not None:
        return made
    histogram = meter_.create_histogram(
        name,
        unit=unit,
        description=description,
        explicit_bucket_boundaries_advisory=list(bucket_boundaries) if bucket_boundaries is not None else None,
    )
    made = _made[(meter_, name)] = DeferredHistogram(histogram)
    # Reports nothing, so no series of this name is exported: it only records before a collection.
    meter_.create_observable_gauge(f"{name}.deferred", callbacks=[made._before_collection])
    return made


def _start_recorder() -> None:
    """The background recorder, started by the first sample a process takes
    (a process that never records runs no thread)."""
    global _recorder
    with _recorder_lock:
        if _recorder is None:
            _recorder = threading.Thread(target=_record_waiting, name="histogram-recorder", daemon=True)
            _recorder.start()
            name_native_thread(_recorder, "hist-recorder")


def _record_waiting() -> None:
    while True:
        time.sleep(RECORD_EVERY_SECONDS)
        for histogram in list(_made.values()):
            histogram.flush(SLICE)
