"""`quire blob ...`: store and fetch blobs (files split over ledger entries)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

import click

from quire_client.cli.common import (
    Globals,
    meter,
    note_write_sent,
    option,
    output_option,
    pass_globals,
    structured,
    writes,
)

CHUNK_BYTES = 1024 * 1024


@click.group(
    epilog="\b\nExamples:\n"
    "  B=$(quire blob put backup.tar)\n"
    "  quire blob get $B restored.tar\n"
    "  tar c dir | quire blob put -"
)
def blob() -> None:
    """Store and fetch blobs."""


def _size(stream: BinaryIO) -> int | None:
    try:
        stat = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return None
    return stat.st_size if stat.st_size > 0 else None  # pipes and ttys have no size


@blob.command()
@click.argument("file", type=click.File("rb"))
@option("--scope", type=int, default=0, help="the scope of the blob's ledgers")
@output_option()
@pass_globals
@writes
def put(settings: Globals, file: BinaryIO, scope: int, output: str) -> None:
    """Store FILE (- for stdin) and print its blob id."""
    with meter("storing", total=_size(file), in_bytes=True) as progress, settings.client() as client:

        def parts() -> Iterator[bytes]:
            while chunk := file.read(CHUNK_BYTES):
                note_write_sent()
                yield chunk
                progress.advance(len(chunk))

        blob_id = client.put_blob(parts(), scope_id=scope)
    if not structured(output, {"blob_id": blob_id}):
        click.echo(blob_id)


@blob.command()
@click.argument("blob_id")
@click.argument("file", type=click.File("wb", lazy=True), default="-")
@pass_globals
def get(settings: Globals, blob_id: str, file: BinaryIO) -> None:
    """Write a blob to FILE (default -: stdout)."""
    with meter("fetching", in_bytes=True) as progress, settings.client() as client:
        for part in client.get_blob_parts(blob_id):
            file.write(part)
            progress.advance(len(part))
        file.flush()
