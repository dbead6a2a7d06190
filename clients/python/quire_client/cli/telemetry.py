"""`quire telemetry analyze`: the telemetry stage (PySpark, the `telemetry` extra)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from quire_client.cli.common import ExitCode, Globals, meter, option, pass_globals
from quire_client.optional import SERVER, import_for


@click.group()
def telemetry() -> None:
    """The telemetry stage (PySpark)."""


@telemetry.command(
    epilog="\b\nExamples:\n"
    "  quire telemetry analyze --input data/telemetry --output data/report\n"
    "  quire telemetry analyze --input data/telemetry --output data/report --window 30s --follow --publish"
)
@option("--input", "input_dir", required=True, type=click.Path(path_type=Path), help="directory of *.jsonl files")
@option("--output", "output_dir", required=True, type=click.Path(path_type=Path), help="directory for the report")
@option("--master", default="local[*]", help="Spark master URL")
@option("--window", default="5m", help="window length, e.g. 30s, 5m, 1h")
@option("--publish", is_flag=True, help="store the load factors in the registry (--registry) for placement")
@option("--follow", is_flag=True, help="keep running over the growing directory (streaming)")
@option("--trigger-seconds", type=float, default=30.0, help="how often --follow recomputes")
@pass_globals
def analyze(
    settings: Globals,
    input_dir: Path,
    output_dir: Path,
    master: str,
    window: str,
    publish: bool,
    follow: bool,
    trigger_seconds: float,
) -> int:
    """Per-bookie load report and load factors from the services' telemetry files."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        click.echo("error: the telemetry stage needs PySpark: pip install 'quire-ledger[telemetry]'", err=True)
        return ExitCode.USAGE
    import_for("quire_telemetry.stage", "`quire telemetry analyze`", SERVER)
    from quire_telemetry.publish import publish_load_factors
    from quire_telemetry.stage import Report, window_seconds
    from quire_telemetry.stage import analyze as run_analysis

    if not input_dir.is_dir():
        raise click.BadParameter(f"input directory {input_dir} does not exist", param_hint="'--input'")
    try:
        window_seconds(window)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--window'") from None

    def publish_report(report: Report) -> None:
        if publish:
            stored = publish_load_factors(settings.registry, report.load_factors)
            click.echo(f"published {stored} load factors to the registry at {settings.registry}")

    if follow:
        from quire_telemetry.follow import follow as follow_directory

        follow_directory(
            input_dir,
            output_dir,
            master=master,
            window=window,
            trigger_seconds=trigger_seconds,
            on_report=publish_report,
        )
        return ExitCode.OK
    with meter(f"analyzing {input_dir} with Spark ({master})"):
        report = run_analysis(input_dir, output_dir, master=master, window=window)
    click.echo(
        f"read {report.records_read} records ({report.malformed_records} malformed, skipped); "
        f"report in {output_dir / 'summary.md'}"
    )
    click.echo(json.dumps(report.load_factors, indent=2, sort_keys=True))
    publish_report(report)
    return ExitCode.OK
