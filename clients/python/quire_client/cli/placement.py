"""`quire placement weights`: how placement weighs each writable bookie (BP-2)."""

from __future__ import annotations

import click
from google.protobuf import json_format

from quire_client.cli.admin_calls import open_admin
from quire_client.cli.common import Globals, output_option, pass_globals, print_table, readable_bytes, structured


@click.group()
def placement() -> None:
    """Placement of new ensembles."""


@placement.command()
@output_option()
@pass_globals
def weights(settings: Globals, output: str) -> None:
    """How placement weighs each writable bookie (BP-2)."""
    with open_admin(settings) as admin:
        response = admin.placement_weights()
    if structured(output, json_format.MessageToDict(response, preserving_proto_field_name=True)):
        return
    state = "on" if response.disk_weight_placement_enabled else "off (uniform draws)"
    click.echo(f"policy {response.policy}, disk weights {state}, cap {response.max_weight_multiple} x median")
    print_table(
        ["BOOKIE", "FREE", "TOTAL", "NATURAL", "CAPPED", "LOAD", "P(FIRST)", "CHOSEN", "READ AT"],
        [
            [
                b.bookie_id,
                readable_bytes(b.free_bytes),
                readable_bytes(b.total_bytes),
                f"{b.natural_weight:.4f}",
                f"{b.capped_weight:.4f}",
                f"{b.load_factor:.2f}",
                f"{b.selection_probability:.4f}",
                str(b.selections),
                b.info_read_at.ToJsonString(),
            ]
            for b in response.bookies
        ],
    )
    for bookie_id in response.unknown_bookie_ids:
        click.echo(f"{bookie_id}: info not read yet (or unreachable); drawn as the smallest weight")
