"""`quire telemetry analyze`: the command line of the telemetry stage."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(areas) -> None:  # type: ignore[no-untyped-def]
    telemetry = areas.add_parser("telemetry", help="the telemetry stage (PySpark)").add_subparsers(
        dest="command", required=True
    )
    analyze = telemetry.add_parser(
        "analyze", help="per-bookie load report and load factors from the services' telemetry files"
    )
    analyze.add_argument("--input", required=True, help="directory of telemetry *.jsonl files")
    analyze.add_argument("--output", required=True, help="directory for the report")
    analyze.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    analyze.add_argument("--window", default="5m", help="window length, e.g. 30s, 5m, 1h")
    analyze.add_argument(
        "--publish", action="store_true", help="store the load factors in the registry (--registry) for placement"
    )
    analyze.add_argument("--follow", action="store_true", help="keep running over the growing directory (streaming)")
    analyze.add_argument("--trigger-seconds", type=float, default=30.0, help="how often --follow recomputes")
    analyze.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("error: the telemetry stage needs PySpark: pip install 'quire[telemetry]'", file=sys.stderr)
        return 2
    from quire_telemetry.publish import publish_load_factors
    from quire_telemetry.stage import Report, analyze, window_seconds

    input_dir, output_dir = Path(args.input), Path(args.output)
    if not input_dir.is_dir():
        print(f"error: input directory {input_dir} does not exist", file=sys.stderr)
        return 2
    try:
        window_seconds(args.window)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def publish(report: Report) -> None:
        if args.publish:
            stored = publish_load_factors(args.registry, report.load_factors)
            print(f"published {stored} load factors to the registry at {args.registry}", flush=True)

    if args.follow:
        from quire_telemetry.follow import follow

        follow(
            input_dir,
            output_dir,
            master=args.master,
            window=args.window,
            trigger_seconds=args.trigger_seconds,
            on_report=publish,
        )
        return 0
    report = analyze(input_dir, output_dir, master=args.master, window=args.window)
    print(
        f"read {report.records_read} records ({report.malformed_records} malformed, skipped); "
        f"report in {output_dir / 'summary.md'}"
    )
    print(json.dumps(report.load_factors, indent=2, sort_keys=True))
    publish(report)
    return 0
