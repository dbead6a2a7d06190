"""`quire recovery status`: the auditor and the segments waiting for re-replication."""

from __future__ import annotations

from typing import Any

import click

from quire_client.cli.common import (
    Globals,
    ledger_name,
    output_option,
    pass_globals,
    print_table,
    state_name,
    structured,
)


@click.group()
def recovery() -> None:
    """Re-replication."""


def under_replicated_rows(client: Any) -> list[dict[str, Any]]:
    return [
        {
            "ledger": ledger_name(metadata),
            "state": state_name(metadata),
            "segment": replica.segment,
            "first_entry_id": replica.first_entry_id,
            "last_entry_id": replica.last_entry_id,
            "bookie_id": replica.bookie_id,
            "why": why,
        }
        for metadata, replica, why in client.under_replicated()
    ]


@recovery.command()
@output_option()
@pass_globals
def status(settings: Globals, output: str) -> None:
    """Which gateway is the active auditor and what its scrub has found and
    repaired; segments with a replica on a bookie that is not registered, or
    with entries flagged for repair (left out or replaced by a writer, found
    damaged by a read, missing or damaged by the scrub)."""
    with settings.client() as client:
        rows = under_replicated_rows(client)
        auditor = client.auditor()
    figures = dict(auditor.properties)
    if structured(output, {"auditor": {"holder": auditor.holder, **figures}, "under_replicated": rows}):
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
