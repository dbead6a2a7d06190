"""The telemetry stage on synthetic telemetry, checked against NumPy."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from quire_telemetry import synthetic
from quire_telemetry.loadfactor import MIN_FACTOR, BookieLoad, load_factors
from quire_telemetry.stage import analyze, window_seconds

pytestmark = pytest.mark.spark

START = 1_790_000_100 - (1_790_000_100 % 300)  # the start of a 5-minute window


def test_quantiles_and_rates_equal_numpy(spark, tmp_path):
    rng = random.Random(3)
    rows = []
    for bookie in ("bookie-a", "bookie-b"):
        for _ in range(2000):
            start_ns = int((START + rng.uniform(0, 299)) * 1e9)
            rows.append(
                synthetic.add_span(
                    bookie,
                    start_ns,
                    rng.expovariate(0.5),
                    rng.randint(1, 50),
                    rng.randint(1, 9000),
                    rng.random() < 0.05,
                )
            )
        for _ in range(500):
            rows.append(synthetic.sync_span(bookie, int((START + rng.uniform(0, 299)) * 1e9), rng.uniform(0.5, 9)))
    synthetic.write(tmp_path / "in" / "bookie.jsonl", iter(rows))

    report = analyze(tmp_path / "in", tmp_path / "out", window="5m", spark=spark)
    assert report.records_read == len(rows) and report.malformed_records == 0
    windows = spark.read.parquet(str(tmp_path / "out" / "bookie_windows")).collect()
    assert {w["bookie_id"] for w in windows} == {"bookie-a", "bookie-b"} and len(windows) == 2
    for window in windows:
        adds = [r for r in rows if r["instance"] == window["bookie_id"] and r["name"].endswith("AddEntries")]
        syncs = [r for r in rows if r["instance"] == window["bookie_id"] and r["name"] == "bookie.sync"]
        latency = np.array([(r["end_unix_nano"] - r["start_unix_nano"]) / 1e6 for r in adds])
        sync = np.array([(r["end_unix_nano"] - r["start_unix_nano"]) / 1e6 for r in syncs])
        assert window["add_latency_p50_ms"] == pytest.approx(np.percentile(latency, 50), rel=1e-9)
        assert window["add_latency_p99_ms"] == pytest.approx(np.percentile(latency, 99), rel=1e-9)
        assert window["sync_latency_p99_ms"] == pytest.approx(np.percentile(sync, 99), rel=1e-9)
        entries = np.sum([r["attributes"]["quire.entries"] for r in adds])
        size = np.sum([r["attributes"]["quire.bytes"] for r in adds])
        assert window["adds_per_second"] == pytest.approx(entries / 300)
        assert window["bytes_per_second"] == pytest.approx(size / 300)
        assert window["error_rate"] == pytest.approx(np.mean([r["status"] == "ERROR" for r in adds]))


def test_disk_trend_is_the_least_squares_slope(spark, tmp_path):
    samples = [
        synthetic.disk_sample("b", int((START + 60 * i) * 1e9), 10_000_000 - 7_000 * i + (i % 3) * 50, 20_000_000)
        for i in range(30)
    ]
    synthetic.write(tmp_path / "in" / "info.jsonl", iter(samples))
    report = analyze(tmp_path / "in", tmp_path / "out", window="5m", spark=spark)
    t = np.array([s["time_unix_nano"] / 1e9 for s in samples])
    free = np.array([s["free_bytes"] for s in samples], dtype=float)
    slope_per_day = np.polyfit(t, free, 1)[0] * 86400
    (bookie,) = report.bookies
    assert bookie["free_bytes_per_day"] == pytest.approx(slope_per_day, rel=1e-6)
    assert bookie["days_until_full"] == pytest.approx(samples[-1]["free_bytes"] / -slope_per_day, rel=1e-6)


def test_malformed_and_truncated_lines_are_counted_and_skipped(spark, tmp_path):
    good = [synthetic.add_span("b", int((START + i) * 1e9), 2.0, 1, 10, False) for i in range(10)]
    path = tmp_path / "in" / "mixed.jsonl"
    synthetic.write(path, iter(good))
    with path.open("a") as handle:
        handle.write("not json at all\n")
        handle.write('{"record": "span", "name": "cut sh')  # a line cut short by a crash
        handle.write("\n" + json.dumps({"record": "bookie_info", "instance": "b"}) + "\n")  # fields missing
    report = analyze(tmp_path / "in", tmp_path / "out", spark=spark)
    assert report.records_read == 13 and report.malformed_records == 3
    assert report.bookies[0]["calls"] == 10
    assert "malformed and skipped: 3" in (tmp_path / "out" / "summary.md").read_text()


def test_an_empty_input_gives_an_empty_report(spark, tmp_path):
    (tmp_path / "in").mkdir()
    report = analyze(tmp_path / "in", tmp_path / "out", spark=spark)
    assert report.records_read == 0 and report.bookies == [] and report.load_factors == {}
    assert "nothing to report" in (tmp_path / "out" / "summary.md").read_text()


def test_a_slow_bookie_gets_a_lower_factor_and_charts_are_drawn(spark, tmp_path):
    synthetic.write(tmp_path / "in" / "t.jsonl", synthetic.records(3, 400, START, 600, slow={1: 4.0}))
    report = analyze(tmp_path / "in", tmp_path / "out", spark=spark)
    assert report.load_factors["bookie-1"] < 0.5 < report.load_factors["bookie-0"]
    for chart in ("add_latency_p99.png", "free_disk.png"):
        assert (tmp_path / "out" / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((tmp_path / "out" / "bookie_windows").glob("date=*"))


def test_load_factor_formula_and_bounds():
    factors = load_factors(
        [
            BookieLoad("fast", 10.0, 50, 100),
            BookieLoad("middle", 20.0, 50, 100),
            BookieLoad("slow", 40.0, 50, 100),
            BookieLoad("full", 20.0, 1, 100),
            BookieLoad("idle", None, None, None),
        ]
    )
    assert factors["fast"] == 1.0 and factors["middle"] == 1.0 and factors["idle"] == 1.0
    assert factors["slow"] == pytest.approx(0.5)
    assert factors["full"] == pytest.approx(max(MIN_FACTOR, (1 / 100) / (151 / 400)))
    assert all(MIN_FACTOR <= f <= 1 for f in factors.values())


def test_window_parsing():
    assert window_seconds("5m") == 300 and window_seconds("30s") == 30 and window_seconds("1h") == 3600
    with pytest.raises(ValueError):
        window_seconds("five minutes")


def test_follow_publishes_factors_from_each_trigger(spark, tmp_path):
    """Structured Streaming over a growing directory: each trigger's report
    covers what has arrived so far."""
    import time as clock

    from quire_telemetry.follow import follow

    # The adds fill exactly one whole 1-minute window. Unaligned, the latest
    # window could hold only a few of one bookie's adds, and its p99 would be
    # a coin toss that depended on the wall clock.
    window_start = (int(clock.time()) // 60) * 60 - 120
    synthetic.write(tmp_path / "in" / "first.jsonl", synthetic.records(2, 100, window_start, 60, slow={1: 5.0}))
    reports = []
    follow(
        tmp_path / "in",
        tmp_path / "out",
        master="local[2]",
        window="1m",
        trigger_seconds=1,
        on_report=reports.append,
        max_batches=1,
        spark=spark,
    )
    (report,) = reports
    assert report.records_read > 0 and report.load_factors["bookie-1"] < report.load_factors["bookie-0"]
    assert (tmp_path / "out" / "summary.md").exists()


def test_bad_settings_exit_2_naming_them():
    """Before any Spark session: the entry point spark-submit runs."""
    for args, named in ((["--window", "five minutes"], "--window"), (["--trigger-seconds", "0"], "--trigger-seconds")):
        result = subprocess.run(
            [sys.executable, "-m", "quire_telemetry", "--input", "in", "--output", "out", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2 and named in result.stderr, result.stderr
