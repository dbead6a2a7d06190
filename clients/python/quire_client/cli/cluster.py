"""`quire cluster up`: etcd and every service on this machine until Ctrl-C (what `make run` runs)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from quire_client.cli.common import option
from quire_client.cli.context import ContextStore
from quire_client.cluster import LocalCluster, Ports
from quire_client.optional import CERTS, SERVER, import_for


@click.group()
def cluster() -> None:
    """Local clusters, and any cluster's status."""


def _summary(cluster: LocalCluster, ports: Ports, tls: str | None, context_name: str | None) -> str:
    if cluster.balancer is None:
        gateways = (
            f"  gateway    {cluster.gateway_target}   (quire.gateway.v1.LedgerService; "
            f"admin http://{cluster.gateway_http()}/status)\n"
        )
    else:
        gateways = (
            f"  gateway    {cluster.gateway_target}   (HAProxy, round robin over the gateways below)\n"
            + "".join(
                f"  {name:<10} {target}   (admin http://{cluster.gateway_http(name)}/status)\n"
                for name, target in zip(cluster.gateway_names, cluster.gateway_targets, strict=True)
            )
        )
    bookies = "".join(
        f"  {name:<10} {cluster.bookie_id(name)}   (admin http://{cluster.bookie_http(name)}/status)\n"
        for name in cluster.bookie_names
    )
    written = "" if context_name is None else f"\ncontext {context_name} written with these addresses\n"
    use = "" if context_name is None else f"--context {context_name} "
    if tls is not None and context_name is None:
        use = f"--tls-ca {tls}/ca.pem --tls-cert {tls}/client-admin.pem --tls-key {tls}/client-admin-key.pem "
    if tls is None:
        hint = (
            f"\nTry:  L=$(quire {use}ledger create) && quire {use}ledger append $L hello world && "
            f"quire {use}ledger read $L\n"
        )
    else:
        hint = (
            f"\nmutual TLS and authentication on; as a client:\n  quire {use}ledger list\n"
            f"etcd: TLS with client certificates and authentication; root's password (for you, no service) in "
            f"{cluster.etcd_secrets_dir / 'etcd-root-password'}\n"
        )
    return (
        "\nQuire is running:\n"
        f"  etcd       {'https' if tls else 'http'}://127.0.0.1:{ports.etcd}   (peers on {ports.etcd_peer})\n"
        f"{gateways}"
        f"  registry   {cluster.registry_target}   (admin http://127.0.0.1:{ports.registry_http}/status)\n"
        f"  placement  {cluster.placement_target}   (admin http://127.0.0.1:{ports.placement_http}/status)\n"
        f"{bookies}{written}{hint}"
        "Press Ctrl-C to stop."
    )


@cluster.command(
    epilog="\b\nExamples:\n"
    "  quire cluster up\n"
    "  quire cluster up --gateways 3 --bookies 5 --data-dir /tmp/quire\n"
    "  quire dev certs --out certs && quire cluster up --tls certs\n"
    "  quire cluster up --base-port 12000            when 2379 or 7000 is taken"
)
@option("--data-dir", envvar="QUIRE_DATA_DIR", default="data", help="where etcd, the bookies and the logs live")
@option("--bookies", type=click.IntRange(min=1), default=3, help="bookies to start, on 3181, 3182, ...")
@option(
    "--gateways",
    type=click.IntRange(min=1),
    default=1,
    help="gateways to start; above 1 they listen on 7010, 7011, ... and HAProxy balances the gateway port "
    "over them, round robin",
)
@option("--tls", default=None, help="a `quire dev certs` directory: mutual TLS and authentication")
@option(
    "--base-port",
    type=click.IntRange(min=1024, max=65535),
    default=None,
    show_default=False,
    help="take every port from this one up (gateway, registry, placement, etcd, admin HTTP, then the bookies': "
    "docs/cli.md)  [default: the fixed ports 7000-7002, 2379-2380, 8000-8002, 3181... and 8181...]",
)
@option(
    "--write-context",
    "context_name",
    default="local",
    help="the context to write with the cluster's addresses (and the client-admin TLS files); '' writes none",
)
def up(data_dir: str, bookies: int, gateways: int, tls: str | None, base_port: int | None, context_name: str) -> None:
    """Start etcd and every service locally until Ctrl-C."""
    balanced = gateways if gateways > 1 else 0
    if base_port is not None and base_port + Ports.span(bookies, balanced) - 1 > 65535:
        raise click.BadParameter(
            f"{bookies} bookies and {gateways} gateways need {Ports.span(bookies, balanced)} ports from "
            f"{base_port}, past 65535",
            param_hint="--base-port",
        )
    import_for("quire_common.server", "`quire cluster up`", SERVER)
    devcerts = import_for("quire_client.devcerts", "`quire cluster up --tls`", CERTS) if tls else None
    if base_port is None:
        ports = Ports(bookies=[3181 + i for i in range(bookies)])
    else:
        ports = Ports.from_base(base_port, bookies, balanced)
    local = LocalCluster(
        Path(data_dir),
        ports,
        tls=devcerts.CertBundle(Path(tls)) if devcerts and tls else None,
        gateways=gateways,
        balancer=gateways > 1,
    )
    if tls is None:
        click.echo("plaintext development mode (QUIRE_INSECURE_PLAINTEXT_DEV): no TLS, no authentication")
    stop = threading.Event()
    # Restored at the end: `quire_client.cli.main` may run inside another program.
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        click.echo(f"starting Quire in {local.data_dir} (logs in {local.data_dir / 'logs'}) ...")
        local.start()
        written = _write_context(context_name, local, tls) if context_name else None
        _run_until_stopped(local, ports, tls, stop, written)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _write_context(name: str, local: LocalCluster, tls: str | None) -> str:
    """Save the running cluster's addresses as context `name` (not selected:
    `quire context use NAME` does that)."""
    settings = {"gateway": local.gateway_target, "registry": local.registry_target, "placement": local.placement_target}
    if tls is not None:
        directory = Path(tls).resolve()
        settings.update(
            tls_ca=str(directory / "ca.pem"),
            tls_cert=str(directory / "client-admin.pem"),
            tls_key=str(directory / "client-admin-key.pem"),
        )
    ContextStore.default().save(name, settings)
    return name


def _run_until_stopped(
    local: LocalCluster, ports: Ports, tls: str | None, stop: threading.Event, context_name: str | None
) -> None:
    try:
        click.echo(_summary(local, ports, tls, context_name))
        while not stop.wait(1.0):
            for name, process in local.processes.items():
                if process.popen is not None and process.popen.poll() is not None:
                    click.echo(f"{name} exited with status {process.popen.returncode}; see {local.log_path(name)}")
                    process.popen = None
    finally:
        click.echo("stopping ...")
        local.stop()
        click.echo("stopped.")
