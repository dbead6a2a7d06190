"""`quire dev ...`: developer checks, throwaway certificates and tokens."""

from __future__ import annotations

from pathlib import Path

import click

from quire_client import smoke as smoke_check
from quire_client.cli.common import ExitCode, Globals, option, pass_globals
from quire_client.optional import CERTS, import_for


@click.group(
    epilog="\b\nExamples:\n"
    "  quire dev smoke --entries 1000\n"
    "  quire dev certs --out certs\n"
    "  quire dev token --certs certs --role 7=writer --role reader"
)
def dev() -> None:
    """Developer checks, certificates and tokens."""


@dev.command()
@option("--entries", type=int, default=200, help="entries to write and read back")
@option("--size", type=int, default=1024, help="entry size in bytes")
@pass_globals
def smoke(settings: Globals, entries: int, size: int) -> int:
    """Create, write, read back, verify, delete; print latencies (exit status 1 if anything failed)."""
    with settings.client() as client:
        report = smoke_check.run(client, entries=entries, size=size)
    click.echo(report.summary())
    return ExitCode.OK if report.ok else ExitCode.ERROR


@dev.command()
@option("--out", default="certs", help="directory to write into")
@option(
    "--kubernetes-namespace",
    default=None,
    help="also write the Secrets deploy/kubernetes mounts, for a cluster in this namespace (OUT/kubernetes/)",
)
def certs(out: str, kubernetes_namespace: str | None) -> None:
    """Write throwaway service and client CAs, their certificates, and a token secret."""
    devcerts = import_for("quire_client.devcerts", "`quire dev certs`", CERTS)
    bundle = devcerts.write_dev_certs(Path(out), kubernetes_namespace)
    click.echo(f"throwaway service and client CAs and their certificates in {bundle.directory}")
    if kubernetes_namespace:
        click.echo(
            f"  Kubernetes Secrets:   for d in {bundle.directory}/kubernetes/*; do kubectl -n "
            f'{kubernetes_namespace} create secret generic "$(basename "$d")" --from-file="$d"; done'
        )
    click.echo(f"  start a TLS cluster:  quire cluster up --tls {bundle.directory}")
    click.echo(
        f"  as a client:          quire --tls-ca {bundle.ca} --tls-cert {bundle.cert('client-admin')} "
        f"--tls-key {bundle.key('client-admin')} ledger list"
    )
    click.echo(
        f"  as the operator:      quire --tls-ca {bundle.ca} --tls-cert {bundle.cert('operator')} "
        f"--tls-key {bundle.key('operator')} bookie list"
    )
    click.echo(
        f"  the operator, through the gateway (a service identity holds no roles there): --tls-cert "
        f"{bundle.cert('client-operator')} --tls-key {bundle.key('client-operator')}"
    )


@dev.command()
@option("--certs", "certs_dir", default="certs", help="the `quire dev certs` directory")
@option("--subject", default="dev", help="the token's subject")
@option("--role", multiple=True, default=(), show_default=False, help="[SCOPE=]reader|writer|admin (repeatable)")
@option("--ttl-seconds", type=float, default=3600.0, help="lifetime of the token")
def token(certs_dir: str, subject: str, role: tuple[str, ...], ttl_seconds: float) -> None:
    """Print a bearer token signed with a `quire dev certs` secret."""
    roles: dict[str, list[str]] = {}
    for grant in role:
        scope, _, name = grant.rpartition("=")
        roles.setdefault(scope or "*", []).append(name)
    devcerts = import_for("quire_client.devcerts", "`quire dev token`", CERTS)
    click.echo(devcerts.CertBundle(Path(certs_dir)).token(subject, roles, ttl_seconds))
