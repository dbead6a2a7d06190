"""What every `quire` command shares: the connection settings, exit codes,
output formats (-o table|json|yaml), error reporting and progress on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

import click
import yaml
from click.decorators import FC
from google.protobuf import json_format

from quire.common.v1 import common_pb2
from quire_api.ids import LedgerId
from quire_client.client import ClientTls, QuireClient


class ExitCode(IntEnum):
    """The exit status of every `quire` command (also in `quire --help` and docs/cli.md)."""

    OK = 0
    ERROR = 1  # the server refused or failed the request, or a check found a problem
    USAGE = 2  # bad arguments or options; nothing was sent
    UNAVAILABLE = 3  # a service could not be reached (or did not answer in time)
    INTERRUPTED = 130  # Ctrl-C


EXIT_CODES_HELP = (
    "\b\nExit status:\n"
    "  0    success\n"
    "  1    the server refused or failed the request, or a check found a problem\n"
    "  2    usage: a bad argument, option or setting (nothing was sent)\n"
    "  3    unavailable: a service could not be reached or did not answer in time\n"
    "  130  interrupted (Ctrl-C)"
)

# gRPC codes that mean "could not talk to the service" rather than "it said no".
UNREACHABLE_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})

FORMATS = ("table", "json", "yaml")


@dataclass
class Globals:
    """The options before the command (`quire --gateway ... ledger list`),
    after flags, environment variables and the selected context are applied."""

    gateway: str = "127.0.0.1:7000"
    registry: str = "127.0.0.1:7001"
    placement: str = "127.0.0.1:7002"
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    token: str = ""
    progress: bool | None = None  # None: only when stderr is a terminal
    make_client: Callable[[Globals], Any] = field(default=lambda g: g.connect())

    def connect(self) -> QuireClient:
        tls = None
        if self.tls_ca:
            tls = ClientTls(
                Path(self.tls_ca),
                Path(self.tls_cert) if self.tls_cert else None,
                Path(self.tls_key) if self.tls_key else None,
            )
        return QuireClient(self.gateway, self.registry, placement=self.placement, tls=tls, token=self.token or None)

    def client(self) -> Any:
        return self.make_client(self)

    def show_progress(self) -> bool:
        return sys.stderr.isatty() if self.progress is None else self.progress


pass_globals = click.make_pass_decorator(Globals, ensure=True)


def option(*decls: str, **attrs: Any) -> Callable[[FC], FC]:
    """click.option that shows its default and environment variable in --help."""
    attrs.setdefault("show_envvar", True)
    attrs.setdefault("show_default", True)
    return click.option(*decls, **attrs)


def _remember_output(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    ctx.meta["quire.output"] = value  # an error is then reported in the same format on stdout
    return value


def output_option(default: str = "table") -> Callable[[FC], FC]:
    return option(
        "-o",
        "--output",
        type=click.Choice(FORMATS),
        default=default,
        callback=_remember_output,
        help="output format",
    )


def structured(output: str, data: object) -> bool:
    """Print `data` as JSON or YAML when asked; False when a table is wanted."""
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    elif output == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=True, default_flow_style=False), nl=False)
    else:
        return False
    return True


def print_table(header: list[str], rows: list[list[str]]) -> None:
    """Plain aligned columns: stable for `awk` and for tests that split lines."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        click.echo("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def report_error(code: str, reason: str, message: str) -> ExitCode:
    """One line on stderr; with `-o json|yaml` also an error document on stdout,
    so that whatever parses the output always gets a document."""
    reason = "" if reason == "ERROR_REASON_UNSPECIFIED" else reason
    shown = f" [{reason.removeprefix('ERROR_REASON_')}]" if reason else ""
    click.echo(f"error: {code}{shown}: {message}", err=True)
    ctx = click.get_current_context(silent=True)
    output = ctx.meta.get("quire.output") if ctx is not None else None
    if output in ("json", "yaml"):
        structured(output, {"error": {"code": code, "reason": reason, "message": message}})
    return ExitCode.UNAVAILABLE if code in UNREACHABLE_CODES else ExitCode.ERROR


class Meter:
    """Progress of one long task; does nothing unless progress is shown."""

    def __init__(self, progress: Any = None, task: Any = None) -> None:
        self._progress = progress
        self._task = task

    def advance(self, amount: float = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, amount)

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def total(self, total: float | None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, total=total)


@contextmanager
def meter(description: str, total: float | None = None, *, in_bytes: bool = False) -> Iterator[Meter]:
    """A progress bar (or spinner without a total) on stderr, never stdout:
    shown on a terminal or with --progress, hidden with --no-progress."""
    ctx = click.get_current_context(silent=True)
    settings = ctx.find_object(Globals) if ctx is not None else None
    if settings is None or not settings.show_progress():
        yield Meter()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    counter = [DownloadColumn(), TransferSpeedColumn()] if in_bytes else [MofNCompleteColumn()]
    console = Console(file=sys.stderr)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        *counter,
        TimeElapsedColumn(),
        console=console,
        transient=console.is_terminal,  # a log (--progress into a file) keeps the final state
    ) as progress:
        yield Meter(progress, progress.add_task(description, total=total))


# -- shared renderings of ledger metadata ------------------------------------------------------------------


def ledger_name(metadata: common_pb2.LedgerMetadata) -> str:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id).qualified_name


def state_name(metadata: common_pb2.LedgerMetadata) -> str:
    return common_pb2.LedgerState.Name(metadata.state).removeprefix("LEDGER_STATE_")


def metadata_dict(metadata: common_pb2.LedgerMetadata) -> dict[str, Any]:
    data = json_format.MessageToDict(metadata, preserving_proto_field_name=True)
    data["ledger"] = ledger_name(metadata)
    return data


def readable_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
