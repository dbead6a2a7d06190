"""`quire recovery status`: the auditor and the segments waiting for re-replication."""

from __future__ import annotations

import click

from quire_client.cli.admin_calls import open_admin
from quire_client.cli.common import Globals, output_option, pass_globals, print_table, structured


@click.group()
def recovery() -> None:
    """Re-replication."""


@recovery.command()
@output_option()
@pass_globals
def status(settings: Globals, output: str) -> None:
    """Which gateway is the active auditor and what its scrub has found and
    repaired; segments with a replica on a bookie that is not registered, or
    with entries flagged for repair (left out or replaced by a writer, found
    damaged by a read, missing or damaged by the scrub)."""
    with open_admin(settings) as admin:
        rows, total = admin.under_replicated()
        auditor = admin.auditor()
    figures = dict(auditor.properties)
    document = {"auditor": {"holder": auditor.holder, **figures}, "under_replicated": rows, "total_segments": total}
    if structured(output, document):
        return
    if auditor.holder:
        shown = ", ".join(f"{name.removeprefix('scrub_')} {value}" for name, value in sorted(figures.items()))
        click.echo(f"auditor: {auditor.holder} (active){'; ' + shown if shown else ''}")
    else:
        click.echo("auditor: no gateway holds the role (none running, or the auditor is off)")
    if not rows:
        click.echo("no under-replicated ledgers")
        return
    print_table(
        ["LEDGER", "STATE", "SEGMENT", "ENTRIES", "BOOKIE", "WHY"],
        [
            [str(r["ledger"]), str(r["state"]), str(r["segment"]), f"{r['first_entry_id']}..{r['last_entry_id']}",
             str(r["bookie_id"]), str(r["why"])]
            for r in rows
        ],
    )  # fmt: skip
    if total > len(rows):
        click.echo(f"... and {total - len(rows)} more segments (the gateway lists the first {len(rows)})")
