"""`python -m quire_telemetry` or `spark-submit .../quire_telemetry/__main__.py`:
the stage as a Spark application. Under spark-submit the master and resources
come from spark-submit; pass --master only when running it directly."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from quire_telemetry.publish import publish_load_factors
from quire_telemetry.stage import Report, analyze, spark_session, window_seconds


def parse_args() -> argparse.Namespace:
    """The command line, checked: a bad setting exits 2 before a Spark session is paid for."""
    parser = argparse.ArgumentParser(prog="quire_telemetry", description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--window", default="5m")
    parser.add_argument("--master", default=None, help="omit under spark-submit")
    parser.add_argument("--publish-to", default=None, help="registry host:port to store the load factors in")
    parser.add_argument("--follow", action="store_true", help="keep running over the growing directory (streaming)")
    parser.add_argument("--trigger-seconds", type=float, default=30.0, help="how often --follow recomputes")
    args = parser.parse_args()
    try:
        window_seconds(args.window)
    except ValueError as exc:
        parser.error(f"--window: {exc}")
    if args.trigger_seconds <= 0:
        parser.error(f"--trigger-seconds: {args.trigger_seconds} is not a positive number of seconds")
    return args


def main() -> None:
    args = parse_args()

    def publish(report: Report) -> None:
        print(json.dumps(report.load_factors, indent=2, sort_keys=True), flush=True)
        if args.publish_to:
            stored = publish_load_factors(args.publish_to, report.load_factors)
            print(f"published {stored} load factors to the registry at {args.publish_to}", flush=True)

    spark = spark_session(args.master)
    try:
        if args.follow:
            from quire_telemetry.follow import follow

            # Runs until interrupted (SIGINT), publishing after every trigger.
            follow(
                Path(args.input),
                Path(args.output),
                window=args.window,
                trigger_seconds=args.trigger_seconds,
                on_report=publish,
                spark=spark,
            )
            return
        report = analyze(Path(args.input), Path(args.output), window=args.window, spark=spark)
    finally:
        spark.stop()
    publish(report)


if __name__ == "__main__":
    main()
