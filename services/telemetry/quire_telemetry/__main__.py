"""`python -m quire_telemetry` or `spark-submit .../quire_telemetry/__main__.py`:
the stage as a Spark application. Under spark-submit the master and resources
come from spark-submit; pass --master only when running it directly."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from quire_telemetry.publish import publish_load_factors
from quire_telemetry.stage import analyze, spark_session


def main() -> None:
    parser = argparse.ArgumentParser(prog="quire_telemetry", description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--window", default="5m")
    parser.add_argument("--master", default=None, help="omit under spark-submit")
    parser.add_argument("--publish-to", default=None, help="registry host:port to store the load factors in")
    args = parser.parse_args()
    spark = spark_session(args.master)
    try:
        report = analyze(Path(args.input), Path(args.output), window=args.window, spark=spark)
    finally:
        spark.stop()
    print(json.dumps(report.load_factors, indent=2, sort_keys=True))
    if args.publish_to:
        publish_load_factors(args.publish_to, report.load_factors)


if __name__ == "__main__":
    main()
