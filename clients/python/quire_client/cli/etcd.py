"""`quire etcd ...`: etcd as Quire needs it."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from quire_client.cli.common import ExitCode, option
from quire_client.etcd_auth import REGISTRY_USER, EtcdAuthError, EtcdctlAccess, lock_down

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group(
    epilog="\b\nExample:\n"
    "  quire etcd lock-down --endpoints https://quire-etcd-client:2379 --cacert ca.crt --cert tls.crt \\\n"
    "      --key tls.key --root-password-file root --registry-password-file registry"
)
def etcd() -> None:
    """etcd's users and authentication for Quire (uses etcdctl)."""


@etcd.command("lock-down")
@option("--endpoints", required=True, help="etcd's client URLs, comma-separated (https://host:port)")
@option("--cacert", type=_FILE, default=None, help="the CA of etcd's certificate")
@option("--cert", type=_FILE, default=None, help="a client certificate etcd accepts")
@option("--key", type=_FILE, default=None, help="its private key")
@option("--cluster", envvar="QUIRE_CLUSTER", default="local", help="the Quire cluster whose prefix the registry gets")
@option("--root-password-file", type=_FILE, required=True, help="etcd root's password (kept from every service)")
@option("--registry-password-file", type=_FILE, required=True, help="the registry user's password")
@option("--registry-user", default=REGISTRY_USER, help="the registry's etcd user (QUIRE_ETCD_USER)")
@option("--wait-seconds", type=click.FloatRange(min=0), default=300.0, help="how long to wait for etcd to answer")
def lock_down_command(
    endpoints: str,
    cacert: Path | None,
    cert: Path | None,
    key: Path | None,
    cluster: str,
    root_password_file: Path,
    registry_password_file: Path,
    registry_user: str,
    wait_seconds: float,
) -> int:
    """Create root and the registry's user (readwrite on /quire/CLUSTER/ only) and turn
    authentication on; run again, it changes nothing (or sets a rotated registry password)."""
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        raise click.UsageError("etcdctl is not installed (Debian's etcd-client)")
    access = EtcdctlAccess(etcdctl, endpoints.split(","), str(cacert or ""), str(cert or ""), str(key or ""))
    root, registry = root_password_file.read_text().strip(), registry_password_file.read_text().strip()
    if not root or not registry:
        raise click.UsageError("a password file is empty")
    try:
        state = lock_down(access, cluster, root, registry, registry_user, wait_seconds)
    except EtcdAuthError as exc:
        click.echo(f"quire etcd lock-down: {exc}", err=True)
        return ExitCode.ERROR
    click.echo(f"etcd locked down ({state}): user {registry_user} may use {cluster!r}'s prefix only")
    return ExitCode.OK
