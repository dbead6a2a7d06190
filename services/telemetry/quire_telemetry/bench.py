"""`make bench-telemetry`: the stage's throughput on synthetic telemetry.

Writes RECORDS synthetic records (adds, syncs and disk samples of 10 bookies
over an hour) to a temporary directory, runs the stage once on local[2], and
prints records per second of the whole run (parse, aggregate, write the
report), Spark's start-up excluded and reported apart.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from quire_telemetry import synthetic
from quire_telemetry.stage import analyze, spark_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    result = _measure(args.records, args.master)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


def _measure(records: int, master: str) -> dict[str, int | float | str]:
    """Generate about `records` records of ten bookies, then time the stage
    over them; prints the rate, returns every figure."""
    bookies = 10
    # About 1.5 records per add (half the adds have a sync span), plus disk samples.
    adds_per_bookie = max(1, int(records / bookies / 1.5))
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        started = time.perf_counter()
        written = synthetic.write(
            root / "in" / "bench.jsonl", synthetic.records(bookies, adds_per_bookie, 1_790_000_000, 3600)
        )
        generated = time.perf_counter() - started

        started = time.perf_counter()
        spark = spark_session(master, "quire-telemetry-bench")
        spark.sparkContext.setLogLevel("ERROR")
        startup = time.perf_counter() - started
        try:
            started = time.perf_counter()
            report = analyze(root / "in", root / "out", spark=spark)
            elapsed = time.perf_counter() - started
        finally:
            spark.stop()
    print(
        f"telemetry stage on {master}: {written:,} records in {elapsed:.1f} s = "
        f"{written / elapsed:,.0f} records/s (Spark start {startup:.1f} s, not counted)"
    )
    return {
        "records": written,
        "malformed": report.malformed_records,
        "master": master,
        "spark_startup_seconds": round(startup, 2),
        "stage_seconds": round(elapsed, 2),
        "records_per_second": round(written / elapsed),
        "generate_seconds": round(generated, 2),
    }


if __name__ == "__main__":
    main()
