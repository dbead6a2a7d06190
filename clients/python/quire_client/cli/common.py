"""What every `quire` command shares: the connection settings, exit codes,
output formats (-o table|json|yaml), error reporting and progress on stderr."""

from __future__ import annotations

import functools
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

from quire_api.ids import LedgerId
from quire_client.admin import QuireAdmin
from quire_client.client import ClientTls, QuireClient
from quire_client.errors import QuireClientError, never_sent
from quire_proto.common.v1 import common_pb2


class ExitCode(IntEnum):
    """The exit status of every `quire` command (also in `quire --help` and docs/cli.md)."""

    OK = 0
    ERROR = 1  # the server refused or failed the request, or a check found a problem
    USAGE = 2  # bad arguments, options, settings or input; nothing was sent
    UNAVAILABLE = 3  # a service could not be reached (or did not answer in time); nothing was changed
    OUTCOME_UNKNOWN = 4  # a write was sent but its answer lost: it may or may not have happened
    INTERRUPTED = 130  # Ctrl-C


EXIT_CODES_HELP = (
    "\b\nExit status:\n"
    "  0    success\n"
    "  1    the server refused or failed the request, or a check found a problem\n"
    "  2    usage: a bad argument, option, setting or input (nothing was sent)\n"
    "  3    unavailable: a service could not be reached or did not answer in time\n"
    "  4    outcome unknown: a write was sent but its answer was lost (read before retrying)\n"
    "  130  interrupted (Ctrl-C)"
)

# gRPC codes that mean "could not talk to the service" rather than "it said no".
UNREACHABLE_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})
# An UNAVAILABLE the cluster answers on purpose: it was reached and said no.
REFUSED_AS_UNAVAILABLE = frozenset({"ERROR_REASON_NOT_ENOUGH_BOOKIES"})

FORMATS = ("table", "json", "yaml")

# The services a command talks to, and the settings that name them.
GATEWAY, REGISTRY, PLACEMENT = "gateway", "registry", "placement"
ADDRESSES = (GATEWAY, REGISTRY, PLACEMENT)
DEFAULT_ADDRESSES = {GATEWAY: "127.0.0.1:7000", REGISTRY: "127.0.0.1:7001", PLACEMENT: "127.0.0.1:7002"}
TLS_FILES = ("tls_ca", "tls_cert", "tls_key")
DEFAULT_SOURCE = "the default"


def flag_of(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def _address_problem(address: str) -> str | None:
    """Why `address` is not a gRPC target Quire can use, or None."""
    if "://" in address or address.startswith("unix:"):
        return None  # a full gRPC target URI: gRPC judges it
    host, colon, port = address.rpartition(":")
    if not colon or not host:
        return "expected HOST:PORT"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"port {port!r} is not a number from 1 to 65535"
    return None


def _pem_problem(setting: str, path: Path) -> str | None:
    """Why the TLS file `path` cannot serve as `setting`, or None."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return "no such file"
    except IsADirectoryError:
        return "is a directory, not a file"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    wanted = b"PRIVATE KEY-----" if setting == "tls_key" else b"-----BEGIN CERTIFICATE-----"
    if wanted not in data:
        return "holds no PEM " + ("private key" if setting == "tls_key" else "certificate")
    return None


def check_connection_settings(settings: dict[str, str], where: Callable[[str], str]) -> None:
    """Refuse (click.UsageError, exit 2) connection settings that cannot
    work, before anything is sent: `settings` maps gateway, registry,
    placement, tls_ca, tls_cert, tls_key and token to values ("" or absent:
    not set); `where(setting)` says where a value came from."""

    def named(setting: str) -> str:
        shown = "***" if setting == "token" else settings[setting]
        return f"{flag_of(setting)} {shown} ({where(setting)})"

    for setting in ADDRESSES:
        if settings.get(setting) and (problem := _address_problem(settings[setting])):
            raise click.UsageError(f"{named(setting)}: {problem}")
    given = {s for s in (*TLS_FILES, "token") if settings.get(s)}
    if "tls_ca" not in given:
        for setting in ("tls_cert", "tls_key"):
            if setting in given:
                raise click.UsageError(
                    f"{named(setting)} needs --tls-ca, the CA that signed the services' certificates: "
                    "without it Quire would connect in plaintext, which it will not do with a certificate"
                )
        if "token" in given:
            raise click.UsageError(f"{named('token')} needs TLS (--tls-ca): a bearer token is never sent in plaintext")
    if ("tls_cert" in given) != ("tls_key" in given):
        present, missing = ("tls_cert", "--tls-key") if "tls_cert" in given else ("tls_key", "--tls-cert")
        raise click.UsageError(f"{named(present)} needs {missing} too: a certificate and its key go together")
    for setting in TLS_FILES:
        if setting in given and (problem := _pem_problem(setting, Path(settings[setting]).expanduser())):
            raise click.UsageError(f"{named(setting)}: {problem}")


@dataclass
class Globals:
    """The options before the command (`quire --gateway ... ledger list`),
    after flags, environment variables and the selected context are applied.
    An address is "" when it is not set: once any address is given, the
    others do not fall back to 127.0.0.1 (docs/cli.md)."""

    gateway: str = DEFAULT_ADDRESSES[GATEWAY]
    registry: str = DEFAULT_ADDRESSES[REGISTRY]
    placement: str = DEFAULT_ADDRESSES[PLACEMENT]
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    token: str = ""
    progress: bool | None = None  # None: only when stderr is a terminal
    # Break-glass: admin commands call the registry, placement and bookies themselves, not the admin API.
    direct: bool = False
    make_client: Callable[[Globals], Any] = field(default=lambda g: g.connect())
    make_admin_client: Callable[[Globals], Any] = field(default=lambda g: g.connect_admin())
    # Where each setting came from: "--gateway", "QUIRE_GATEWAY", "context prod" or DEFAULT_SOURCE.
    sources: dict[str, str] = field(default_factory=dict)

    def source(self, setting: str) -> str:
        found = self.sources.get(setting, DEFAULT_SOURCE)
        return found if found == DEFAULT_SOURCE else f"from {found}"

    def client_tls(self) -> ClientTls | None:
        if not self.tls_ca:
            return None
        return ClientTls(
            Path(self.tls_ca).expanduser(),
            Path(self.tls_cert).expanduser() if self.tls_cert else None,
            Path(self.tls_key).expanduser() if self.tls_key else None,
        )

    def connect(self) -> QuireClient:
        return QuireClient(
            self.gateway or DEFAULT_ADDRESSES[GATEWAY],  # not used unless set: ServiceCalls checks first
            tls=self.client_tls(),
            token=self.token or None,
        )

    def connect_admin(self) -> QuireAdmin:
        # An address not set is never dialled: ServiceCalls refuses the call first.
        return QuireAdmin(
            self.gateway,
            registry=self.registry,
            placement=self.placement,
            tls=self.client_tls(),
            token=self.token or None,
            direct=self.direct,
        )

    def check_settings(self) -> None:
        check_connection_settings(
            {name: getattr(self, name) for name in (*ADDRESSES, *TLS_FILES, "token")}, self.source
        )

    def client(self) -> Any:
        """The client for this command, after its settings were checked."""
        self.check_settings()
        return ServiceCalls(self.make_client(self), self)

    def require(self, services: tuple[str, ...]) -> None:
        """Refuse (exit 2) a call to a service whose address is not set."""
        for service in services:
            if not getattr(self, service):
                given = ", ".join(f"the {name} ({self.source(name)})" for name in ADDRESSES if getattr(self, name))
                ctx = click.get_current_context(silent=True)
                command = f"`{ctx.command_path}`" if ctx is not None else "this command"
                raise click.UsageError(
                    f"{command} needs the {service}'s address, which is not set: only {given} "
                    f"{'is' if given.count(', ') == 0 else 'are'} given, and Quire does not assume 127.0.0.1 "
                    f"for the rest. Give {flag_of(service)}, QUIRE_{service.upper()} or "
                    f"`quire context add NAME --{service} HOST:PORT`."
                )

    def locate(self, error: QuireClientError, services: tuple[str, ...]) -> QuireClientError:
        """Name the service(s) a call that got no answer went to, and where
        their addresses came from (the gRPC text alone names neither)."""
        if getattr(error.code, "name", str(error.code)) not in UNREACHABLE_CODES or error.reason or not services:
            return error
        where = " or ".join(f"the {s} at {getattr(self, s)} ({self.source(s)})" for s in services)
        return type(error)(error.code, error.reason, f"no answer from {where}: {error.message}", error.details)

    def show_progress(self) -> bool:
        return sys.stderr.isatty() if self.progress is None else self.progress


class ServiceCalls:
    """A client (QuireClient, or a test's fake) whose calls check that their
    service's address is set and whose "no answer" errors name the service
    and where its address came from."""

    def __init__(
        self, client: Any, settings: Globals, services_of_method: dict[str, tuple[str, ...]] | None = None
    ) -> None:
        """`services_of_method`: which services each method calls; a method
        not in it calls the gateway (as every one of QuireClient's does)."""
        self._client = client
        self._settings = settings
        self._services_of_method = services_of_method or {}

    def __enter__(self) -> ServiceCalls:
        self._client.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._client.__exit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        services = self._services_of_method.get(name, (GATEWAY,))
        if name in self._services_of_method:
            self._settings.require(services)  # before anything of the client is touched
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self._settings.require(services)
            try:
                result = attribute(*args, **kwargs)
            except QuireClientError as exc:
                raise self._settings.locate(exc, services) from None
            return self._iterate(result, services) if isinstance(result, Iterator) else result

        return call

    def _iterate(self, results: Iterator[Any], services: tuple[str, ...]) -> Iterator[Any]:
        try:
            yield from results
        except QuireClientError as exc:
            raise self._settings.locate(exc, services) from None


pass_globals = click.make_pass_decorator(Globals, ensure=True)


# -- writes whose outcome can be unknown ---------------------------------------------------------------------

_WRITE = "quire.write"
_WRITE_SENT = "sent"


def note_writing() -> None:
    """The command's next calls change the cluster: one of them that loses its
    answer after sending exits OUTCOME_UNKNOWN (4), not UNAVAILABLE (3)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta.setdefault(_WRITE, "unsent")


def writes(command: FC) -> FC:
    """Mark a command that changes the cluster (note_writing from its start)."""

    @functools.wraps(command)
    def marked(*args: Any, **kwargs: Any) -> Any:
        note_writing()
        return command(*args, **kwargs)

    return marked  # type: ignore[return-value]


def note_write_sent() -> None:
    """The command has handed data to the client to send (e.g. an entry of
    `ledger append`): any failure to reach a service from now on leaves the
    outcome unknown."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_WRITE] = _WRITE_SENT


def exit_code_for(error: QuireClientError) -> ExitCode:
    """The exit status of a command that failed with `error` (docs/cli.md)."""
    code = getattr(error.code, "name", str(error.code))
    if code not in UNREACHABLE_CODES or error.reason in REFUSED_AS_UNAVAILABLE:
        return ExitCode.ERROR
    ctx = click.get_current_context(silent=True)
    write = ctx.meta.get(_WRITE) if ctx is not None else None
    if write is None or (write != _WRITE_SENT and never_sent(error)):
        return ExitCode.UNAVAILABLE
    return ExitCode.OUTCOME_UNKNOWN


def option(*decls: str, **attrs: Any) -> Callable[[FC], FC]:
    """click.option that shows its default and environment variable in --help."""
    attrs.setdefault("show_envvar", True)
    attrs.setdefault("show_default", True)
    return click.option(*decls, **attrs)


JSON_LINES = "quire.json_lines"  # the command prints one JSON document per line


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


def report_error(code: str, reason: str, message: str, status: ExitCode) -> ExitCode:
    """One line on stderr; with `-o json|yaml` also an error document on stdout,
    so that whatever parses the output always gets a document (one line when
    the output is JSON lines); returns `status`."""
    reason = "" if reason == "ERROR_REASON_UNSPECIFIED" else reason
    shown = f" [{reason.removeprefix('ERROR_REASON_')}]" if reason else ""
    click.echo(f"error: {code}{shown}: {message}", err=True)
    ctx = click.get_current_context(silent=True)
    output = ctx.meta.get("quire.output") if ctx is not None else None
    document = {"error": {"code": code, "reason": reason, "message": message}}
    if output == "json" and ctx is not None and ctx.meta.get(JSON_LINES):
        click.echo(json.dumps(document, sort_keys=True))
    elif output in ("json", "yaml"):
        structured(output, document)
    return status


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
