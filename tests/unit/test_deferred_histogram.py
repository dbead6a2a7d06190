"""Histogram samples kept on the path and recorded off it
(quire_common.deferred_histogram): a reader sees what direct records would
have shown, nothing is lost or counted twice across threads, and the samples
waiting stay bounded when nothing records them."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from quire_common import deferred_histogram as module
from quire_common.deferred_histogram import MAX_WAITING, DeferredHistogram, deferred_histogram
from tests.waiting import EVENT_DEADLINE_SECONDS

BOUNDS = (0.001, 0.01, 0.1)


def points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, object], ...], HistogramDataPoint]:
    """The histogram `name`'s points by attributes, as the reader collects them now."""
    data = reader.get_metrics_data()
    found: dict[tuple[tuple[str, object], ...], HistogramDataPoint] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        assert isinstance(point, HistogramDataPoint)
                        found[tuple(sorted((point.attributes or {}).items()))] = point
    return found


def exported_names(reader: InMemoryMetricReader) -> set[str]:
    data = reader.get_metrics_data()
    return {m.name for r in (data.resource_metrics if data else ()) for s in r.scope_metrics for m in s.metrics}


def test_a_reader_sees_the_same_distribution_as_direct_records() -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    deferred = deferred_histogram(meter, "quire.test.deferred_duration", "s", "deferred", BOUNDS)
    direct = meter.create_histogram(
        "quire.test.direct_duration", unit="s", explicit_bucket_boundaries_advisory=list(BOUNDS)
    )
    samples = [(0.0005, {"op": "a"}), (0.005, {"op": "a"}), (0.05, {"op": "b"}), (0.5, {"op": "a"})]
    for value, attributes in samples:
        deferred.record(value, attributes)
        direct.record(value, attributes)

    got = points(reader, "quire.test.deferred_duration")
    want = points(reader, "quire.test.direct_duration")
    assert set(got) == set(want) == {(("op", "a"),), (("op", "b"),)}
    for attributes, point in got.items():
        assert (point.count, point.sum, list(point.bucket_counts)) == (
            want[attributes].count,
            want[attributes].sum,
            list(want[attributes].bucket_counts),
        )
    # Only the histogram is exported: the gauge that flushes it reports nothing.
    assert "quire.test.deferred_duration.deferred" not in exported_names(reader)


def test_samples_recorded_after_a_collection_reach_the_next_one() -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    histogram = deferred_histogram(meter, "quire.test.later", "s", "later", BOUNDS)
    histogram.record(0.002)
    assert points(reader, "quire.test.later")[()].count == 1
    histogram.record(0.003)
    histogram.record(0.004)
    assert points(reader, "quire.test.later")[()].count == 3  # cumulative: 1 + 2


def test_every_reader_gets_every_sample_whichever_collects_first() -> None:
    first, second = InMemoryMetricReader(), InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[first, second]).get_meter("test")
    histogram = deferred_histogram(meter, "quire.test.two_readers", "s", "two readers", BOUNDS)
    for _ in range(5):
        histogram.record(0.002)
    assert points(first, "quire.test.two_readers")[()].count == 5
    assert points(second, "quire.test.two_readers")[()].count == 5


def test_asking_again_for_a_histogram_gives_the_same_one() -> None:
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("test")
    one = deferred_histogram(meter, "quire.test.same", "s", "same", BOUNDS)
    assert deferred_histogram(meter, "quire.test.same", "s", "same", BOUNDS) is one
    other_meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("test")
    assert deferred_histogram(other_meter, "quire.test.same", "s", "same", BOUNDS) is not one


def unregistered(meter_name: str, name: str) -> tuple[InMemoryMetricReader, DeferredHistogram]:
    """A DeferredHistogram that neither the background recorder nor a
    collection records: only its own path does, to show the bound."""
    reader = InMemoryMetricReader()
    histogram = MeterProvider(metric_readers=[reader]).get_meter(meter_name).create_histogram(name, unit="s")
    return reader, DeferredHistogram(histogram)


def test_samples_waiting_stay_bounded_when_nothing_else_records_them() -> None:
    reader, histogram = unregistered("test", "quire.test.bounded")
    for _ in range(3 * MAX_WAITING + 7):
        histogram.record(0.002)
        assert len(histogram._waiting) < MAX_WAITING
    histogram.flush()
    assert points(reader, "quire.test.bounded")[()].count == 3 * MAX_WAITING + 7


@pytest.mark.parametrize("bound", [MAX_WAITING, 10**9], ids=["bounded", "control: unbounded"])
def test_the_bound_is_what_keeps_memory_in_check(monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    """Positive control for the test above: with no bound, samples pile up."""
    monkeypatch.setattr(module, "MAX_WAITING", bound)
    _, histogram = unregistered("test", f"quire.test.bound_{bound}")
    for _ in range(2 * MAX_WAITING):
        histogram.record(0.002)
    assert (len(histogram._waiting) < MAX_WAITING) == (bound == MAX_WAITING)


def test_the_background_recorder_records_samples_without_a_collection() -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    histogram = deferred_histogram(meter, "quire.test.background", "s", "background", BOUNDS)
    for _ in range(5 * module.SLICE + 3):
        histogram.record(0.002)
    deadline = time.monotonic() + EVENT_DEADLINE_SECONDS
    while histogram._waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not histogram._waiting, "the background recorder did not take the samples"
    assert module._recorder is not None and module._recorder.is_alive()
    assert points(reader, "quire.test.background")[()].count == 5 * module.SLICE + 3


def test_threads_recording_while_readers_collect_lose_and_repeat_nothing() -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    histogram = deferred_histogram(meter, "quire.test.threads", "s", "threads", BOUNDS)
    per_thread, threads = 20_000, 4
    done = threading.Event()

    def collect() -> None:
        while not done.is_set():
            reader.get_metrics_data()

    collector = threading.Thread(target=collect)
    writers = [
        threading.Thread(target=lambda: [histogram.record(0.002) for _ in range(per_thread)]) for _ in range(threads)
    ]
    collector.start()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    done.set()
    collector.join()
    assert points(reader, "quire.test.threads")[()].count == per_thread * threads
