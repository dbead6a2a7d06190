"""The Spark computation: telemetry JSON lines in, a per-bookie load report and
load factors out.

Input: every `*.jsonl` file under the input directory (any depth), as the
services write them (quire_common.telemetry):

- spans: `{"record": "span", "name", "kind", "status", "service", "instance",
  "start_unix_nano", "end_unix_nano", "attributes": {...}}`. A bookie's add is
  its SERVER span of `.../BookieService/AddEntries`, or `bookie.add` for an add
  on an AddStream (attributes `quire.entries`, `quire.bytes`); a group-commit
  sync is its `bookie.sync` span.
- bookie info samples: `{"record": "bookie_info", "instance", "time_unix_nano",
  "free_bytes", "total_bytes"}`.

Every line is parsed with an explicit schema (no inference). A line that is not
JSON, is cut short, or lacks what its record needs is counted and skipped.

Output (under the output directory): `bookie_windows/` and `cluster_windows/`
Parquet datasets partitioned by `date`, `disk_trend.parquet`,
`summary.md`, `add_latency_p99.png`, `free_disk.png`, and `load_factors.json`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quire_telemetry.loadfactor import BookieLoad, load_factors

log = logging.getLogger(__name__)

ADD_SPAN_SUFFIX = "/quire.bookie.v1.BookieService/AddEntries"
STREAMED_ADD_SPAN = "bookie.add"  # one per add on an AddStream (quire_bookie.add_stream)
SYNC_SPAN = "bookie.sync"
_WINDOW = re.compile(r"^\s*(\d+)\s*(s|m|h)\s*$")


def window_seconds(text: str) -> int:
    """'5m' -> 300; seconds, minutes or hours."""
    match = _WINDOW.match(text)
    if not match:
        raise ValueError(f"window {text!r} is not a duration like 30s, 5m or 1h")
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


@dataclass
class Report:
    """What one run produced, for the caller and the CLI."""

    output_dir: Path
    records_read: int = 0
    malformed_records: int = 0
    bookies: list[dict[str, Any]] = field(default_factory=list)  # latest window per bookie
    load_factors: dict[str, float] = field(default_factory=dict)


def spark_session(master: str | None = "local[*]", app_name: str = "quire-telemetry"):  # type: ignore[no-untyped-def]
    """A Spark session for the stage: UI off, few shuffle partitions (the data
    is per-bookie summaries, not big joins). A local master binds to loopback
    unless SPARK_LOCAL_IP says otherwise; master None leaves the choice to
    spark-submit."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if master is not None:
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(master)
    return (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def line_schema():  # type: ignore[no-untyped-def]
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("record", T.StringType()),
            T.StructField("name", T.StringType()),
            T.StructField("kind", T.StringType()),
            T.StructField("status", T.StringType()),
            T.StructField("service", T.StringType()),
            T.StructField("instance", T.StringType()),
            T.StructField("start_unix_nano", T.LongType()),
            T.StructField("end_unix_nano", T.LongType()),
            T.StructField("time_unix_nano", T.LongType()),
            T.StructField("free_bytes", T.LongType()),
            T.StructField("total_bytes", T.LongType()),
            T.StructField("attributes", T.MapType(T.StringType(), T.StringType())),
        ]
    )


def parse_lines(spark, input_dir: Path):  # type: ignore[no-untyped-def]
    """(parsed rows, number of lines read, number malformed)."""
    files = sorted(str(p) for p in input_dir.rglob("*.jsonl") if p.is_file() and p.stat().st_size > 0)
    if not files:
        return None, 0, 0
    parsed = parse_text(spark.read.text(files)).cache()
    counts = parsed.groupBy("valid").count().collect()
    total = sum(row["count"] for row in counts)
    malformed = sum(row["count"] for row in counts if not row["valid"])
    return parsed.where("valid"), total, malformed


def parse_text(raw):  # type: ignore[no-untyped-def]
    """Lines (one `value` column) to typed rows with a `valid` flag: what a
    record of its kind needs is present. Nothing is inferred."""
    from pyspark.sql import functions as F

    parsed = raw.select(F.from_json("value", line_schema(), {"mode": "PERMISSIVE"}).alias("r")).select("r.*")
    # A span line from before records were tagged has a name and no record.
    parsed = parsed.withColumn(
        "record", F.when(F.col("record").isNull() & F.col("name").isNotNull(), F.lit("span")).otherwise(F.col("record"))
    )
    valid = (
        (
            (F.col("record") == "span")
            & F.col("name").isNotNull()
            & F.col("start_unix_nano").isNotNull()
            & F.col("end_unix_nano").isNotNull()
        )
        | (
            (F.col("record") == "bookie_info")
            & F.col("instance").isNotNull()
            & F.col("time_unix_nano").isNotNull()
            & F.col("free_bytes").isNotNull()
            & F.col("total_bytes").isNotNull()
        )
        | (F.col("record") == "metric")
    )
    return parsed.withColumn("valid", F.coalesce(valid, F.lit(False)))


def adds_of(rows):  # type: ignore[no-untyped-def]
    """One row per add a bookie served: an AddEntries call or an add on an AddStream."""
    from pyspark.sql import functions as F

    return rows.where(
        (F.col("record") == "span")
        & (F.col("service") == "bookie")
        & (F.col("kind") == "SERVER")
        & (F.col("name").endswith(ADD_SPAN_SUFFIX) | (F.col("name") == STREAMED_ADD_SPAN))
        & F.col("instance").isNotNull()
    ).select(
        F.col("instance").alias("bookie_id"),
        (F.col("start_unix_nano") / 1e9).cast("timestamp").alias("ts"),
        ((F.col("end_unix_nano") - F.col("start_unix_nano")) / 1e6).alias("latency_ms"),
        F.coalesce(F.col("attributes")["quire.entries"].cast("long"), F.lit(1)).alias("entries"),
        F.coalesce(F.col("attributes")["quire.bytes"].cast("long"), F.lit(0)).alias("bytes"),
        (F.col("status") == "ERROR").cast("int").alias("error"),
    )


def syncs_of(rows):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    return rows.where(
        (F.col("record") == "span") & (F.col("name") == SYNC_SPAN) & F.col("instance").isNotNull()
    ).select(
        F.col("instance").alias("bookie_id"),
        (F.col("start_unix_nano") / 1e9).cast("timestamp").alias("ts"),
        ((F.col("end_unix_nano") - F.col("start_unix_nano")) / 1e6).alias("sync_ms"),
    )


def disk_of(rows):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    return rows.where(F.col("record") == "bookie_info").select(
        F.col("instance").alias("bookie_id"),
        (F.col("time_unix_nano") / 1e9).cast("timestamp").alias("ts"),
        (F.col("time_unix_nano") / 1e9).alias("t"),
        F.col("free_bytes"),
        F.col("total_bytes"),
    )


def windowed(adds, syncs, disk, seconds: int, by_bookie: bool):  # type: ignore[no-untyped-def]
    """Per window (and per bookie when asked): add latency p50/p99 (exact),
    adds/s and bytes/s (entries and bytes over the window length), error rate
    (failed calls over calls), sync latency p50/p99, and the last free/total
    disk seen."""
    from pyspark.sql import functions as F

    duration = f"{seconds} seconds"
    keys = ["bookie_id", "window"] if by_bookie else ["window"]
    add_stats = adds.groupBy(*([F.col("bookie_id")] if by_bookie else []), F.window("ts", duration)).agg(
        F.count("*").alias("calls"),
        F.percentile("latency_ms", F.lit(0.5)).alias("add_latency_p50_ms"),
        F.percentile("latency_ms", F.lit(0.99)).alias("add_latency_p99_ms"),
        (F.sum("entries") / seconds).alias("adds_per_second"),
        (F.sum("bytes") / seconds).alias("bytes_per_second"),
        (F.sum("error") / F.count("*")).alias("error_rate"),
    )
    sync_stats = syncs.groupBy(*([F.col("bookie_id")] if by_bookie else []), F.window("ts", duration)).agg(
        F.percentile("sync_ms", F.lit(0.5)).alias("sync_latency_p50_ms"),
        F.percentile("sync_ms", F.lit(0.99)).alias("sync_latency_p99_ms"),
    )
    if by_bookie:
        latest = disk.groupBy("bookie_id", F.window("ts", duration)).agg(
            F.max_by("free_bytes", "t").alias("free_bytes"), F.max_by("total_bytes", "t").alias("total_bytes")
        )
    else:
        # The cluster's disk in a window: each bookie's last sample, summed.
        per_bookie = disk.groupBy("bookie_id", F.window("ts", duration)).agg(
            F.max_by("free_bytes", "t").alias("free_bytes"), F.max_by("total_bytes", "t").alias("total_bytes")
        )
        latest = per_bookie.groupBy("window").agg(
            F.sum("free_bytes").alias("free_bytes"), F.sum("total_bytes").alias("total_bytes")
        )
    joined = add_stats.join(sync_stats, keys, "full_outer").join(latest, keys, "full_outer")
    return (
        joined.withColumn("window_start", F.col("window.start"))
        .withColumn("window_end", F.col("window.end"))
        .withColumn("date", F.to_date("window_start"))
        .drop("window")
    )


def disk_trend(disk):  # type: ignore[no-untyped-def]
    """Per bookie over the whole input: the least-squares slope of free bytes
    over time (bytes per day; negative while filling) and the days until full
    at that rate (null when not filling)."""
    from pyspark.sql import functions as F

    stats = disk.groupBy("bookie_id").agg(
        (F.covar_pop("t", "free_bytes") / F.var_pop("t") * 86400).alias("free_bytes_per_day"),
        F.max_by("free_bytes", "t").alias("free_bytes"),
        F.max_by("total_bytes", "t").alias("total_bytes"),
        F.count("*").alias("samples"),
    )
    return stats.withColumn(
        "days_until_full",
        F.when(F.col("free_bytes_per_day") < 0, F.col("free_bytes") / -F.col("free_bytes_per_day")),
    )


def analyze(
    input_dir: Path,
    output_dir: Path,
    *,
    master: str = "local[*]",
    window: str = "5m",
    spark=None,  # type: ignore[no-untyped-def]
) -> Report:
    """Run the stage once over everything in `input_dir`."""
    seconds = window_seconds(window)
    output_dir.mkdir(parents=True, exist_ok=True)
    own_session = spark is None
    spark = spark or spark_session(master)
    try:
        report = Report(output_dir)
        rows, report.records_read, report.malformed_records = parse_lines(spark, input_dir)
        if rows is None or report.records_read == report.malformed_records:
            _write_summary(report, [], [], [])
            return report
        return report_on(rows, report, seconds)
    finally:
        if own_session:
            spark.stop()


def report_on(rows, report: Report, seconds: int) -> Report:  # type: ignore[no-untyped-def]
    """Compute and write everything from parsed, valid rows."""
    output_dir = report.output_dir
    adds, syncs, disk = adds_of(rows), syncs_of(rows), disk_of(rows)
    bookie_windows = windowed(adds, syncs, disk, seconds, by_bookie=True).cache()
    cluster_windows = windowed(adds, syncs, disk, seconds, by_bookie=False).cache()
    trend = disk_trend(disk).cache()
    bookie_windows.write.mode("overwrite").partitionBy("date").parquet(str(output_dir / "bookie_windows"))
    cluster_windows.write.mode("overwrite").partitionBy("date").parquet(str(output_dir / "cluster_windows"))
    trend.write.mode("overwrite").parquet(str(output_dir / "disk_trend.parquet"))

    per_bookie = [r.asDict() for r in bookie_windows.orderBy("bookie_id", "window_start").collect()]
    cluster = [r.asDict() for r in cluster_windows.orderBy("window_start").collect()]
    trends = [r.asDict() for r in trend.orderBy("bookie_id").collect()]
    report.bookies = _latest_per_bookie(per_bookie, trends)
    report.load_factors = load_factors(
        [
            BookieLoad(b["bookie_id"], b.get("add_latency_p99_ms"), b.get("free_bytes"), b.get("total_bytes"))
            for b in report.bookies
        ]
    )
    _write_summary(report, per_bookie, cluster, trends)
    _write_charts(output_dir, per_bookie)
    return report


def _latest_per_bookie(per_bookie: list[dict[str, Any]], trends: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each bookie's most recent window with adds, its last disk sample and its trend."""
    latest: dict[str, dict[str, Any]] = {}
    for row in per_bookie:  # ordered by window
        current = latest.setdefault(row["bookie_id"], {"bookie_id": row["bookie_id"]})
        for key, value in row.items():
            if value is not None:
                current[key] = value
    for row in trends:
        current = latest.setdefault(row["bookie_id"], {"bookie_id": row["bookie_id"]})
        current["free_bytes_per_day"] = row["free_bytes_per_day"]
        current["days_until_full"] = row["days_until_full"]
        current.setdefault("free_bytes", row["free_bytes"])
        current.setdefault("total_bytes", row["total_bytes"])
    return [latest[b] for b in sorted(latest)]


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _write_summary(
    report: Report,
    per_bookie: list[dict[str, Any]],
    cluster: list[dict[str, Any]],
    trends: list[dict[str, Any]],
) -> None:
    lines = [
        "# Quire telemetry report",
        "",
        f"Records read: {report.records_read}; malformed and skipped: {report.malformed_records}.",
        "",
    ]
    if not report.bookies:
        lines += ["No bookie telemetry in the input: nothing to report.", ""]
    else:
        lines += [
            "## Bookies (latest window)",
            "",
            "| bookie | window start | add p50 ms | add p99 ms | adds/s | MB/s | errors | sync p99 ms "
            "| free GiB | days until full | load factor |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for b in report.bookies:
            free = b.get("free_bytes")
            lines.append(
                f"| {b['bookie_id']} | {_fmt(b.get('window_start'))} | {_fmt(b.get('add_latency_p50_ms'))} "
                f"| {_fmt(b.get('add_latency_p99_ms'))} | {_fmt(b.get('adds_per_second'), 1)} "
                f"| {_fmt((b.get('bytes_per_second') or 0) / 1e6)} | {_fmt(b.get('error_rate'), 4)} "
                f"| {_fmt(b.get('sync_latency_p99_ms'))} | {_fmt(free / (1 << 30) if free is not None else None)} "
                f"| {_fmt(b.get('days_until_full'), 1)} | {_fmt(report.load_factors.get(b['bookie_id']), 3)} |"
            )
        lines += [
            "",
            "## Cluster, per window",
            "",
            "| window start | add p99 ms | adds/s | MB/s | errors |",
            "|---|---|---|---|---|",
        ]
        for row in cluster:
            lines.append(
                f"| {_fmt(row.get('window_start'))} | {_fmt(row.get('add_latency_p99_ms'))} "
                f"| {_fmt(row.get('adds_per_second'), 1)} | {_fmt((row.get('bytes_per_second') or 0) / 1e6)} "
                f"| {_fmt(row.get('error_rate'), 4)} |"
            )
        lines += ["", f"Windows per bookie: {len(per_bookie)}; bookies with disk trends: {len(trends)}.", ""]
    (report.output_dir / "summary.md").write_text("\n".join(lines))
    (report.output_dir / "load_factors.json").write_text(json.dumps(report.load_factors, indent=2, sort_keys=True))


def _write_charts(output_dir: Path, per_bookie: list[dict[str, Any]]) -> None:
    """Per-bookie p99 add latency and free disk over time, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for column, scale, title, unit, filename in (
        ("add_latency_p99_ms", 1.0, "p99 add latency per bookie", "ms", "add_latency_p99.png"),
        ("free_bytes", 1 / (1 << 30), "free disk per bookie", "GiB", "free_disk.png"),
    ):
        figure, axes = plt.subplots(figsize=(9, 4.5), dpi=100)
        for bookie_id in sorted({r["bookie_id"] for r in per_bookie if r["bookie_id"]}):
            points = [
                (r["window_start"], r[column] * scale)
                for r in per_bookie
                if r["bookie_id"] == bookie_id and r[column] is not None
            ]
            if points:
                axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=bookie_id)
        axes.set_title(title)
        axes.set_xlabel("window start (UTC)")
        axes.set_ylabel(unit)
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize="small")
        figure.autofmt_xdate()
        figure.tight_layout()
        figure.savefig(output_dir / filename)
        plt.close(figure)
