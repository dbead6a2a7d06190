"""The root of the `quire` command line: global options, the command groups,
errors turned into one line and a documented exit status."""

from __future__ import annotations

import sys
from typing import Any

import click
from click.core import ParameterSource
from click.shell_completion import get_completion_class

from quire_api.errors import QuireError
from quire_client.cli import blob, bookie, cluster, context, dev, etcd, ledger, placement, recovery, status
from quire_client.cli.common import (
    ADDRESSES,
    DEFAULT_ADDRESSES,
    DEFAULT_SOURCE,
    EXIT_CODES_HELP,
    GATEWAY,
    PLACEMENT,
    REGISTRY,
    ExitCode,
    Globals,
    exit_code_for,
    option,
    report_error,
)
from quire_client.client import QuireClientError
from quire_client.cluster import ClusterError
from quire_client.optional import MissingPackage


class QuireGroup(click.Group):
    """Turns the errors a command meets into one line and an exit status
    while the command's context (and its -o) is still known."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except QuireClientError as exc:
            return report_error(getattr(exc.code, "name", str(exc.code)), exc.reason, exc.message, exit_code_for(exc))
        except QuireError as exc:  # input the client refused itself, before sending anything
            return report_error(exc.code, exc.reason, exc.message, ExitCode.USAGE)
        except ClusterError as exc:
            return report_error("UNAVAILABLE", "", str(exc), ExitCode.UNAVAILABLE)
        except MissingPackage as exc:
            click.echo(f"error: {exc}", err=True)
            return ExitCode.USAGE


LOCAL_ONLY = "HOST:PORT (the default applies only when no address is set at all)"

EPILOG = (
    "\b\nExamples:\n"
    "  quire cluster up                              a local cluster (what `make run` runs)\n"
    "  L=$(quire ledger create) && quire ledger append $L hello && quire ledger read $L\n"
    "  quire --gateway gw:7000 bookie list -o json     through the gateway's admin API\n"
    "  quire cluster status -o json                  exit 0 healthy, 1 degraded, 3 unreachable\n"
    "  quire context add prod --gateway gw.prod:7000 --select\n"
    '  eval "$(quire completion bash)"                 shell completion\n'
    "\n"
    "Every option can also be set by the environment variable shown next to it\n"
    "(QUIRE_CLI_<COMMAND>_<OPTION> below the top level, clear of the services' own\n"
    "prefixes); a flag wins over the variable, which wins over the selected context.\n"
    "\n" + EXIT_CODES_HELP
)


@click.group(
    cls=QuireGroup,
    epilog=EPILOG,
    context_settings={
        "auto_envvar_prefix": "QUIRE_CLI",
        "help_option_names": ["-h", "--help"],
        "max_content_width": 110,
    },
)
@click.version_option(package_name="quire-ledger-client", prog_name="quire", message="%(prog)s %(version)s")
@option(
    "--context",
    "context_name",
    envvar="QUIRE_CONTEXT",
    default=None,
    is_eager=True,
    callback=context.apply_context,
    help="use this named context (default: the one `quire context use` selected)",
)
@option("--gateway", envvar="QUIRE_GATEWAY", default=DEFAULT_ADDRESSES[GATEWAY], help="gateway " + LOCAL_ONLY)
@option(
    "--registry",
    envvar="QUIRE_REGISTRY",
    default=DEFAULT_ADDRESSES[REGISTRY],
    help="break-glass, with --direct only: registry " + LOCAL_ONLY,
)
@option(
    "--placement",
    envvar="QUIRE_PLACEMENT",
    default=DEFAULT_ADDRESSES[PLACEMENT],
    help="break-glass, with --direct only: placement " + LOCAL_ONLY,
)
@option(
    "--direct",
    is_flag=True,
    envvar="QUIRE_DIRECT",
    default=False,
    help="break-glass: admin commands (bookie, bookieinfo, placement, recovery) call the registry, placement "
    "and bookies themselves at --registry/--placement instead of the gateway's admin API (needs a certificate "
    "they accept under mTLS)",
)
@option("--tls-ca", envvar="QUIRE_CLIENT_TLS_CA", default="", show_default=False, help="CA file: use TLS")
@option("--tls-cert", envvar="QUIRE_CLIENT_TLS_CERT", default="", show_default=False, help="client certificate")
@option("--tls-key", envvar="QUIRE_CLIENT_TLS_KEY", default="", show_default=False, help="client key")
@option("--token", envvar="QUIRE_CLIENT_TOKEN", default="", show_default=False, help="bearer token (JWT)")
@option(
    "--progress/--no-progress",
    envvar="QUIRE_PROGRESS",
    default=None,
    show_default=False,
    help="progress bars on stderr for long work  [default: only when stderr is a terminal]",
)
@click.pass_context
def quire(ctx: click.Context, context_name: str | None, **settings: Any) -> None:
    """Quire: a replicated ledger store."""
    problem = ctx.meta.get(context.CONTEXT_PROBLEM)
    if problem is not None and ctx.invoked_subcommand != "context":
        raise problem
    sources = {name: _source(ctx, name, context_name) for name in settings if name not in ("progress", "direct")}
    if any(sources[name] != DEFAULT_SOURCE for name in ADDRESSES):
        # Any address given means a cluster elsewhere: an address left unset stays unset, never 127.0.0.1.
        settings.update({name: "" for name in ADDRESSES if sources[name] == DEFAULT_SOURCE})
    # Tests hand in factories for fake clients as `obj` (make_client, make_admin_client); everyone else connects.
    factories = {k: v for k, v in ctx.obj.items() if k.startswith("make_")} if isinstance(ctx.obj, dict) else {}
    ctx.obj = Globals(**settings, sources=sources, **factories)


def _source(ctx: click.Context, name: str, context_name: str | None) -> str:
    """Where the root option `name` got its value: its flag, its environment
    variable, the context, or DEFAULT_SOURCE."""
    source = ctx.get_parameter_source(name)
    if source == ParameterSource.COMMANDLINE:
        return "--" + name.replace("_", "-")
    if source == ParameterSource.ENVIRONMENT:
        param = next(p for p in ctx.command.params if p.name == name)
        return str(param.envvar)
    if source == ParameterSource.DEFAULT_MAP:
        return f"context {context_name}"
    return DEFAULT_SOURCE


@quire.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash:  eval "$(quire completion bash)"      (e.g. in ~/.bashrc)
    zsh:   eval "$(quire completion zsh)"       (e.g. in ~/.zshrc)
    fish:  quire completion fish > ~/.config/fish/completions/quire.fish"""
    completer = get_completion_class(shell)
    assert completer is not None  # every choice has a class
    click.echo(completer(quire, {}, "quire", "_QUIRE_COMPLETE").source())


def _telemetry_group() -> click.Command:
    from quire_client.cli.telemetry import telemetry

    return telemetry


def _bench_group() -> click.Command:
    from quire_client.cli.bench import bench

    return bench


quire.add_command(ledger.ledger)
quire.add_command(blob.blob)
quire.add_command(bookie.bookie)
quire.add_command(bookie.bookieinfo)
quire.add_command(recovery.recovery)
quire.add_command(placement.placement)
quire.add_command(cluster.cluster)
quire.add_command(dev.dev)
quire.add_command(etcd.etcd)
quire.add_command(_telemetry_group())
quire.add_command(_bench_group())
quire.add_command(context.context)
quire.add_command(status.version)
cluster.cluster.add_command(status.cluster_status)


def main(argv: list[str] | None = None) -> int:
    """Run `quire` with `argv` (default: sys.argv[1:]) and return the exit status."""
    try:
        status = quire.main(args=argv, prog_name="quire", standalone_mode=False)
    except click.ClickException as exc:  # usage errors (2) and files that cannot be opened (1)
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("interrupted", err=True)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK  # e.g. `quire ledger read L | head`
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
