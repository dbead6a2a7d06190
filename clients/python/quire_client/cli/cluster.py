"""`quire cluster up`: etcd and every service on this machine until Ctrl-C (what `make run` runs)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from quire_client.cli.common import option
from quire_client.cluster import LocalCluster, Ports
from quire_client.optional import CERTS, SERVER, import_for


@click.group()
def cluster() -> None:
    """Local clusters."""


def _summary(cluster: LocalCluster, ports: Ports, tls: str | None) -> str:
    if cluster.balancer is None:
        gateways = f"  gateway    {cluster.gateway_target}   (quire.gateway.v1.LedgerService)\n"
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
    if tls is None:
        hint = "\nTry:  L=$(quire ledger create) && quire ledger append $L hello world && quire ledger read $L\n"
    else:
        hint = (
            f"\nmutual TLS and authentication on; as a client:\n  quire --tls-ca {tls}/ca.pem "
            f"--tls-cert {tls}/client-admin.pem --tls-key {tls}/client-admin-key.pem ledger list\n"
            f"etcd: TLS with client certificates and authentication; root's password (for you, no service) in "
            f"{cluster.etcd_secrets_dir / 'etcd-root-password'}\n"
        )
    return (
        "\nQuire is running:\n"
        f"  etcd       {'https' if tls else 'http'}://127.0.0.1:{ports.etcd}\n"
        f"{gateways}"
        f"  registry   {cluster.registry_target}\n"
        f"  placement  127.0.0.1:{ports.placement}\n"
        f"{bookies}{hint}"
        "Press Ctrl-C to stop."
    )


@cluster.command(
    epilog="\b\nExamples:\n"
    "  quire cluster up\n"
    "  quire cluster up --gateways 3 --bookies 5 --data-dir /tmp/quire\n"
    "  quire dev certs --out certs && quire cluster up --tls certs"
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
def up(data_dir: str, bookies: int, gateways: int, tls: str | None) -> None:
    """Start etcd and every service locally until Ctrl-C."""
    import_for("quire_common.server", "`quire cluster up`", SERVER)
    devcerts = import_for("quire_client.devcerts", "`quire cluster up --tls`", CERTS) if tls else None
    ports = Ports(bookies=[3181 + i for i in range(bookies)])
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
        _run_until_stopped(local, ports, tls, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_until_stopped(local: LocalCluster, ports: Ports, tls: str | None, stop: threading.Event) -> None:
    try:
        click.echo(_summary(local, ports, tls))
        while not stop.wait(1.0):
            for name, process in local.processes.items():
                if process.popen is not None and process.popen.poll() is not None:
                    click.echo(f"{name} exited with status {process.popen.returncode}; see {local.log_path(name)}")
                    process.popen = None
    finally:
        click.echo("stopping ...")
        local.stop()
        click.echo("stopped.")
