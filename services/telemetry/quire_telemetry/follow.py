"""`--follow`: the stage as Spark Structured Streaming over a growing
directory. Every trigger parses the new lines, appends the valid ones to a
Parquet staging table, recomputes the report over the recent part of it and
publishes the load factors."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from quire_telemetry.stage import Report, report_on, spark_session, window_seconds

log = logging.getLogger(__name__)


def follow(
    input_dir: Path,
    output_dir: Path,
    *,
    master: str = "local[*]",
    window: str = "5m",
    trigger_seconds: float = 30.0,
    history_windows: int = 12,
    on_report: Callable[[Report], None] | None = None,
    max_batches: int | None = None,
    spark=None,  # type: ignore[no-untyped-def]
) -> None:
    """Run until interrupted (or `max_batches` triggers, for tests)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from quire_telemetry.stage import parse_text

    seconds = window_seconds(window)
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = output_dir / "staging_rows"
    own_session = spark is None
    spark = spark or spark_session(master)
    batches = 0

    def each_batch(batch, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        nonlocal batches
        parsed = parse_text(batch).cache()
        read = parsed.count()
        malformed = parsed.where(~F.col("valid")).count()
        parsed.where("valid").drop("valid").write.mode("append").parquet(str(staging))
        rows = spark.read.parquet(str(staging)).withColumn("valid", F.lit(True))
        # Only the recent past matters for load factors; keep the work bounded.
        horizon_ns = int((time.time() - history_windows * seconds) * 1e9)
        recent = rows.where(F.coalesce(F.col("start_unix_nano"), F.col("time_unix_nano")) >= F.lit(horizon_ns))
        report = report_on(recent, Report(output_dir, read, malformed), seconds)
        log.info("batch %d: %d lines, %d malformed, factors %s", batch_id, read, malformed, report.load_factors)
        if on_report is not None:
            on_report(report)
        batches += 1

    lines = (
        spark.readStream.schema(T.StructType([T.StructField("value", T.StringType())]))
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl")
        .text(str(input_dir))
    )
    query = (
        lines.writeStream.foreachBatch(each_batch)
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .option("checkpointLocation", str(output_dir / "checkpoint"))
        .start()
    )
    try:
        while query.isActive and (max_batches is None or batches < max_batches):
            query.awaitTermination(timeout=1)
    finally:
        query.stop()
        if own_session:
            spark.stop()
