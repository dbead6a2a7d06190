"""`quire context ...`: named connection settings for several clusters.

Each context is a JSON file under the configuration directory
($QUIRE_CONFIG_DIR, else $XDG_CONFIG_HOME/quire, else ~/.config/quire):
contexts/NAME.json holds any of gateway, registry, placement, tls_ca,
tls_cert, tls_key and token; the file `context` names the selected one.
A setting given as a flag or environment variable wins over the context."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import click
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from quire_client.cli.common import (
    ADDRESSES,
    UNREACHABLE_CODES,
    ExitCode,
    check_connection_settings,
    option,
    output_option,
    print_table,
    structured,
)
from quire_client.client import ClientTls, open_client_channel

SETTINGS = ("gateway", "registry", "placement", "tls_ca", "tls_cert", "tls_key", "token")
PATH_SETTINGS = frozenset({"tls_ca", "tls_cert", "tls_key"})
CONTEXT_PROBLEM = "quire.context_problem"
VALID_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ContextStore:
    """The contexts on disk; every problem is a click.UsageError naming the file."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def default(cls) -> ContextStore:
        if configured := os.environ.get("QUIRE_CONFIG_DIR"):
            return cls(Path(configured))
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return cls(Path(base) / "quire")

    def _path(self, name: str) -> Path:
        if not VALID_NAME.fullmatch(name):
            raise click.UsageError(f"context name {name!r}: use letters, digits, '.', '_' and '-' (at most 64)")
        return self.directory / "contexts" / f"{name}.json"

    def names(self) -> list[str]:
        folder = self.directory / "contexts"
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    def load(self, name: str) -> dict[str, str]:
        path = self._path(name)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise click.UsageError(f"no context named {name!r} (see `quire context ls`)") from None
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"context file {path} is unreadable: {exc}") from None
        if not isinstance(data, dict) or not all(k in SETTINGS and isinstance(v, str) for k, v in data.items()):
            raise click.UsageError(f"context file {path}: expected an object with string values of {SETTINGS}")
        return data

    def save(self, name: str, settings: dict[str, str]) -> Path:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it may hold a token
        with os.fdopen(fd, "w") as f:
            json.dump(settings, f, indent=2, sort_keys=True)
            f.write("\n")
        return path

    def remove(self, name: str) -> None:
        path = self._path(name)
        if not path.exists():
            raise click.UsageError(f"no context named {name!r} (see `quire context ls`)")
        path.unlink()
        if self.selected() == name:
            self.select(None)

    def selected(self) -> str | None:
        try:
            return (self.directory / "context").read_text().strip() or None
        except FileNotFoundError:
            return None

    def select(self, name: str | None) -> None:
        marker = self.directory / "context"
        if name is None:
            marker.unlink(missing_ok=True)
            return
        self.load(name)  # only an existing, readable context
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(name + "\n")


def apply_context(ctx: click.Context, _param: click.Parameter, name: str | None) -> str | None:
    """Eager callback of `quire --context`: the chosen (or selected) context
    becomes the defaults of the global options, below flags and environment."""
    store = ContextStore.default()
    explicit = name is not None
    name = name or store.selected()
    if name:
        try:
            settings = store.load(name)
        except click.UsageError as problem:
            if explicit:
                raise
            # A broken selected context stops every command but `quire context ...`, which can repair it.
            ctx.meta[CONTEXT_PROBLEM] = problem
            return name
        ctx.default_map = {**(ctx.default_map or {}), **settings}
    return name


@click.group(
    epilog="\b\nExamples:\n"
    "  quire context add prod --gateway gw.prod:7000 --registry reg.prod:7001 --tls-ca ca.pem --select\n"
    "  quire context use staging\n"
    "  quire context ls\n"
    "  quire context check prod                  reach each service it names\n"
    "  quire --context prod ledger list"
)
def context() -> None:
    """Named connection settings (addresses, TLS files, token) per cluster."""


@context.command()
@click.argument("name")
@option("--gateway", default=None, help="gateway HOST:PORT")
@option("--registry", default=None, help="registry HOST:PORT")
@option("--placement", default=None, help="placement HOST:PORT")
@option("--tls-ca", default=None, help="CA file: use TLS")
@option("--tls-cert", default=None, help="client certificate")
@option("--tls-key", default=None, help="client key")
@option("--token", default=None, help="bearer token (JWT); the file is readable by its owner only")
@option("--select", is_flag=True, help="also make it the selected context")
def add(name: str, select: bool, **settings: str | None) -> None:
    """Create or replace context NAME (its TLS files must be readable PEM files)."""
    chosen = {
        key: str(Path(value).expanduser().resolve()) if key in PATH_SETTINGS else value
        for key, value in settings.items()
        if value
    }
    check_connection_settings(chosen, lambda _setting: "given to `quire context add`")
    store = ContextStore.default()
    path = store.save(name, chosen)
    if select:
        store.select(name)
    click.echo(f"context {name} saved in {path}" + (" and selected" if select else ""))


@context.command()
@click.argument("name")
def use(name: str) -> None:
    """Select context NAME for every later command."""
    ContextStore.default().select(name)
    click.echo(f"context {name} selected")


@context.command()
@click.argument("name", required=False)
@output_option()
def show(name: str | None, output: str) -> None:
    """Show context NAME (default: the selected one); the token is masked."""
    store = ContextStore.default()
    name = name or store.selected()
    if name is None:
        raise click.UsageError("no context is selected; name one (see `quire context ls`)")
    settings: dict[str, Any] = dict(store.load(name))
    if settings.get("token"):
        settings["token"] = "***"
    if not structured(output, {"name": name, **settings}):
        print_table(["SETTING", "VALUE"], [[key, settings[key]] for key in SETTINGS if key in settings])


@context.command("ls")
@output_option()
def list_contexts(output: str) -> None:
    """List contexts; * marks the selected one."""
    store = ContextStore.default()
    selected = store.selected()
    rows = [(name, store.load(name)) for name in store.names()]
    if structured(
        output, [{"name": name, "selected": name == selected, "gateway": s.get("gateway", "")} for name, s in rows]
    ):
        return
    print_table(
        ["", "NAME", "GATEWAY", "REGISTRY", "TLS"],
        [
            ["*" if name == selected else "", name, s.get("gateway", "-"), s.get("registry", "-"),
             "yes" if s.get("tls_ca") else "no"]
            for name, s in rows
        ],
    )  # fmt: skip


@context.command()
@click.argument("name")
def rm(name: str) -> None:
    """Remove context NAME (and unselect it)."""
    ContextStore.default().remove(name)
    click.echo(f"context {name} removed")


HEALTH_CHECK_SECONDS = 5.0


def _check_endpoint(target: str, tls: ClientTls | None, token: str) -> tuple[str, str]:
    """(state, detail) of one service: its gRPC health, asked over the
    context's TLS; state is "ok", "not serving" or "unreachable"."""
    try:
        with open_client_channel(target, tls, token or None) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=HEALTH_CHECK_SECONDS
            )
    except grpc.RpcError as exc:
        code = exc.code()  # type: ignore[attr-defined]
        state = "unreachable" if code.name in UNREACHABLE_CODES else "refused"
        return state, f"{code.name}: {exc.details()}"  # type: ignore[attr-defined]
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    return ("ok" if answer.status == health_pb2.HealthCheckResponse.SERVING else "not serving"), status


@context.command()
@click.argument("name", required=False)
@output_option()
def check(name: str | None, output: str) -> int:
    """Connect to each service context NAME (default: the selected one) names and report each.

    Exit status 0 when every one answers SERVING, 3 when one cannot be
    reached, 1 when one answers otherwise; 2 when the context itself is bad."""
    store = ContextStore.default()
    name = name or store.selected()
    if name is None:
        raise click.UsageError("no context is selected; name one (see `quire context ls`)")
    settings = store.load(name)
    check_connection_settings(settings, lambda _setting: f"in context {name}")
    tls = None
    if settings.get("tls_ca"):
        cert, key = settings.get("tls_cert"), settings.get("tls_key")
        tls = ClientTls(Path(settings["tls_ca"]), Path(cert) if cert else None, Path(key) if key else None)
    rows = []
    for service in ADDRESSES:
        target = settings.get(service, "")
        state, detail = _check_endpoint(target, tls, settings.get("token", "")) if target else ("not set", "")
        rows.append({"service": service, "address": target, "state": state, "detail": detail})
    if not structured(output, {"name": name, "services": rows}):
        print_table(
            ["SERVICE", "ADDRESS", "STATE", "DETAIL"],
            [[r["service"], r["address"] or "-", r["state"], r["detail"]] for r in rows],
        )
    states = {row["state"] for row in rows}
    if "unreachable" in states:
        return ExitCode.UNAVAILABLE
    return ExitCode.ERROR if states - {"ok", "not set"} else ExitCode.OK
