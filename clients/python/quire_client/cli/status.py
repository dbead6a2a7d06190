"""`quire cluster status` and `quire version`: the cluster's health and
releases as a gateway's admin API reports them (GetClusterStatus)."""

from __future__ import annotations

import importlib.metadata
import time
from dataclasses import dataclass, field
from typing import Any

import click

from quire_client.cli.admin_calls import open_admin
from quire_client.cli.common import (
    ExitCode,
    Globals,
    exit_code_for,
    output_option,
    pass_globals,
    print_table,
    report_error,
    structured,
)
from quire_client.errors import QuireClientError
from quire_client.optional import CLIENT
from quire_proto.admin.v1 import admin_pb2

# A certificate closer than this to its notAfter makes the cluster degraded.
CERTIFICATE_WARNING_DAYS = 14
HEALTHY, DEGRADED, UNREACHABLE = "healthy", "degraded", "unreachable"
STATUS_EXIT = {HEALTHY: ExitCode.OK, DEGRADED: ExitCode.ERROR, UNREACHABLE: ExitCode.UNAVAILABLE}


def client_version() -> str:
    try:
        return importlib.metadata.version(CLIENT)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass
class Verdict:
    status: str
    problems: list[str] = field(default_factory=list)


def judge(report: admin_pb2.GetClusterStatusResponse, now: float) -> Verdict:
    """Healthy, or degraded and why: the rules docs/cli.md lists. Pure."""
    problems = []
    for service in report.services:
        if service.health != "SERVING":
            why = f": {service.detail}" if service.detail else ""
            problems.append(f"{service.service} {service.address} is {service.health}{why}")
        elif service.bookie_state == "read-only":
            problems.append(f"bookie {service.address} is read-only")
    if report.writable_bookies < report.largest_ensemble:
        problems.append(
            f"{report.writable_bookies} writable bookies, fewer than the largest ensemble in use "
            f"({report.largest_ensemble}): such a ledger cannot replace a bookie"
        )
    if report.missing_bookie_ids:
        problems.append(f"bookies named by ledgers but not registered: {', '.join(report.missing_bookie_ids)}")
    if report.under_replicated_segments:
        problems.append(
            f"{report.under_replicated_segments} segments of {report.under_replicated_ledgers} ledgers wait for repair"
        )
    registry_up = any(s.service == "registry" and s.health == "SERVING" for s in report.services)
    if registry_up and not report.auditor:
        problems.append("no gateway holds the auditor role: nothing re-replicates or scrubs")
    for certificate in report.certificates:
        days = (certificate.not_after.seconds - now) / 86400
        if days < CERTIFICATE_WARNING_DAYS:
            state = "has expired" if days < 0 else f"expires in {days:.1f} days"
            problems.append(f"the gateway's {certificate.certificate} certificate {state}")
    return Verdict(DEGRADED if problems else HEALTHY, problems)


def status_document(report: admin_pb2.GetClusterStatusResponse, verdict: Verdict, now: float) -> dict[str, Any]:
    return {
        "status": verdict.status,
        "problems": verdict.problems,
        "client_version": client_version(),
        "services": [
            {
                "service": s.service,
                "address": s.address,
                "health": s.health,
                "version": s.version,
                **({"bookie_state": s.bookie_state} if s.bookie_state else {}),
                **({"detail": s.detail} if s.detail else {}),
            }
            for s in report.services
        ],
        "bookies": {
            "writable": report.writable_bookies,
            "read_only": report.read_only_bookies,
            "largest_ensemble": report.largest_ensemble,
            "missing": list(report.missing_bookie_ids),
        },
        "auditor": report.auditor,
        "under_replicated": {
            "ledgers": report.under_replicated_ledgers,
            "segments": report.under_replicated_segments,
        },
        "scrub_lag_seconds": report.scrub_lag_seconds if report.HasField("scrub_lag_seconds") else None,
        "certificates": [
            {
                "certificate": c.certificate,
                "not_after": c.not_after.ToJsonString(),
                "days_left": round((c.not_after.seconds - now) / 86400, 1),
            }
            for c in report.certificates
        ],
    }


def _ask(settings: Globals) -> admin_pb2.GetClusterStatusResponse | QuireClientError:
    """The gateway's report, or the error that says it could not be reached
    (any other error is raised: the gateway answered, e.g. PERMISSION_DENIED)."""
    try:
        with open_admin(settings) as admin:
            return admin.cluster_status()
    except QuireClientError as exc:
        if exit_code_for(exc) != ExitCode.UNAVAILABLE:
            raise
        return exc


@click.command("status")
@output_option()
@pass_globals
def cluster_status(settings: Globals, output: str) -> int:
    """Every service's health and version, writable bookies against the
    largest ensemble in use, the auditor, what waits for repair, the scrub's
    lag and certificate expiry, as a gateway's admin API sees them.

    Exit status 0 healthy, 1 degraded (each problem is listed), 3 the
    gateway could not be reached."""
    report = _ask(settings)
    if isinstance(report, QuireClientError):
        unreachable = {"status": UNREACHABLE, "problems": [report.message], "client_version": client_version()}
        if structured(output, unreachable):
            click.echo(f"error: {report.message}", err=True)
            return ExitCode.UNAVAILABLE
        return report_error("UNAVAILABLE", report.reason, report.message, ExitCode.UNAVAILABLE)
    now = time.time()
    verdict = judge(report, now)
    document = status_document(report, verdict, now)
    if structured(output, document):
        return STATUS_EXIT[verdict.status]
    click.echo(f"cluster: {verdict.status}")
    for problem in verdict.problems:
        click.echo(f"  - {problem}")
    print_table(
        ["SERVICE", "ADDRESS", "HEALTH", "VERSION", "STATE"],
        [[s.service, s.address, s.health, s.version or "?", s.bookie_state or "-"] for s in report.services],
    )
    click.echo(
        f"bookies: {report.writable_bookies} writable, {report.read_only_bookies} read-only; "
        f"largest ensemble in use {report.largest_ensemble}"
    )
    click.echo(f"auditor: {report.auditor or '(none)'}")
    lag = document["scrub_lag_seconds"]
    click.echo(
        f"under-replicated: {report.under_replicated_segments} segments of {report.under_replicated_ledgers} "
        f"ledgers; scrub lag {'unknown' if lag is None else f'{lag:.0f} s'}"
    )
    for certificate in document["certificates"]:
        click.echo(
            f"certificate {certificate['certificate']}: expires {certificate['not_after']} "
            f"({certificate['days_left']} days)"
        )
    return STATUS_EXIT[verdict.status]


@click.command()
@output_option()
@pass_globals
def version(settings: Globals, output: str) -> int:
    """This client's version and the release each service of the cluster runs
    (as the gateway's admin API reports them). Exit status 3, after the
    client's version, when the gateway cannot be reached."""
    report = _ask(settings)
    if isinstance(report, QuireClientError):
        if not structured(output, {"client": client_version(), "cluster": None, "error": report.message}):
            click.echo(f"client  {client_version()}")
        click.echo(f"error: {report.message}", err=True)
        return ExitCode.UNAVAILABLE
    services = [{"service": s.service, "address": s.address, "version": s.version} for s in report.services]
    if structured(output, {"client": client_version(), "cluster": services}):
        return ExitCode.OK
    click.echo(f"client  {client_version()}")
    print_table(
        ["SERVICE", "ADDRESS", "VERSION"],
        [[s["service"], s["address"], s["version"] or "? (not reached)"] for s in services],
    )
    return ExitCode.OK
