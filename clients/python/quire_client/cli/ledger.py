"""`quire ledger ...`: create, write, read and manage ledgers.

Ledger ids are printed and accepted as qualified names (UUID form); 32 hex
digits and scope:ledger in decimal are accepted too."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import click
from click.decorators import FC

from quire_api.ids import LedgerId
from quire_client.cli.common import (
    JSON_LINES,
    Globals,
    ledger_name,
    metadata_dict,
    meter,
    note_write_sent,
    note_writing,
    option,
    output_option,
    pass_globals,
    print_table,
    state_name,
    structured,
    writes,
)
from quire_proto.common.v1 import common_pb2

DIGESTS = {"crc32": 1, "hmac": 2, "crc32c": 3, "dummy": 4}


@click.group(
    epilog="\b\nExamples:\n"
    "  L=$(quire ledger create -e 3 -w 2 -a 2)\n"
    "  quire ledger append $L hello world\n"
    "  seq 1000 | quire ledger append $L\n"
    "  quire ledger read $L --from 10 --to 20\n"
    "  quire ledger list -o json"
)
def ledger() -> None:
    """Create, write, read and manage ledgers."""


@ledger.command()
@option("--ensemble", "-e", type=int, default=3, help="bookies per segment (E)")
@option("--write-quorum", "-w", type=int, default=2, help="bookies each entry is written to (W)")
@option("--ack-quorum", "-a", type=int, default=2, help="acknowledgements an append waits for (A)")
@option("--password", default="", show_default=False, help="the ledger password (recovery and HMAC digests)")
@option("--digest", type=click.Choice(sorted(DIGESTS)), default="crc32c")
@option("--id", "ledger_id", default=None, help="create exactly this ledger id")
@option("--scope", type=int, default=None, help="create a new ledger in this scope")
@option("--legacy", is_flag=True, help="a scope-0 id from the 64-bit generator")
@output_option()
@pass_globals
@writes
def create(
    settings: Globals,
    ensemble: int,
    write_quorum: int,
    ack_quorum: int,
    password: str,
    digest: str,
    ledger_id: str | None,
    scope: int | None,
    legacy: bool,
    output: str,
) -> None:
    """Create a ledger and print its id (alone on its line)."""
    if sum((ledger_id is not None, scope is not None, legacy)) > 1:
        raise click.UsageError("--id, --scope and --legacy exclude each other")
    with settings.client() as client:
        metadata = client.create_ledger(
            ensemble_size=ensemble,
            write_quorum_size=write_quorum,
            ack_quorum_size=ack_quorum,
            password=password.encode(),
            digest_type=DIGESTS[digest],
            ledger_id=ledger_id,
            scope_id=scope,
            legacy=legacy,
        )
    if not structured(output, {"ledger": ledger_name(metadata)}):
        click.echo(ledger_name(metadata))


def generated_payloads(count: int, size: int) -> Iterator[bytes]:
    for index in range(count):
        yield (f"entry-{index}-".encode() * (size // 8 + 1))[:size]


def stdin_payloads() -> Iterator[bytes]:
    for line in sys.stdin.buffer:
        yield line.rstrip(b"\n")


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@click.argument("data", nargs=-1)
@option("--count", type=int, default=0, help="append COUNT generated entries")
@option("--size", type=int, default=1024, help="size of generated entries in bytes")
@option("--batch", type=int, default=100, help="entries per stream message")
@output_option()
@pass_globals
@writes
def append(
    settings: Globals, ledger_id: str, data: tuple[str, ...], count: int, size: int, batch: int, output: str
) -> None:
    """Append entries: the DATA arguments, --count generated ones, or the lines of stdin.

    Prints `last entry id N`."""
    if data:
        payloads: Iterator[bytes] = (item.encode() for item in data)
    elif count:
        payloads = generated_payloads(count, size)
    else:
        payloads = stdin_payloads()
    with meter("appending", total=count or len(data) or None) as progress, settings.client() as client:

        def counted() -> Iterator[bytes]:
            for payload in payloads:
                note_write_sent()
                yield payload
                progress.advance()

        last = client.append_all(ledger_id, counted(), batch_size=batch)
    if not structured(output, {"last_entry_id": last}):
        click.echo(f"last entry id {last}")


ENTRY_FORMATS = ("table", "json", "raw")


def entries_output_option() -> Callable[[FC], FC]:
    return option(
        "-o",
        "--output",
        type=click.Choice(ENTRY_FORMATS),
        default="table",
        callback=_remember_entries_output,
        help="table: ID<TAB>PAYLOAD per entry (undecodable bytes as \\x escapes); json: one object per line, "
        '{"entry_id": N, "payload": BASE64}; raw: the payloads\' exact bytes back to back, nothing added',
    )


def _remember_entries_output(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    ctx.meta["quire.output"] = value
    ctx.meta[JSON_LINES] = True  # an error document is one more line
    return value


def _print_entries(entries: Iterable[Any], output: str) -> None:
    """Each entry as soon as it arrives (a tail waits between them)."""
    if output == "raw":
        for entry in entries:
            click.echo(entry.payload, nl=False)  # bytes go to the binary stream as they are
            sys.stdout.flush()
        return
    for entry in entries:
        if output == "json":
            line = json.dumps({"entry_id": entry.entry_id, "payload": base64.b64encode(entry.payload).decode("ascii")})
        else:
            line = f"{entry.entry_id}\t{entry.payload.decode('utf-8', errors='backslashreplace')}"
        click.echo(line)
        sys.stdout.flush()


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@option("--from", "--first", "first", type=int, default=0, help="first entry id")
@option("--to", "--last", "last", type=int, default=-1, help="last entry id; -1: up to the LAC")
@option("--unconfirmed", is_flag=True, help="read past the LAC (BP-5; needs --to)")
@option("--recover", is_flag=True, help="recover (fence and close) the ledger first")
@option("--password", default="", show_default=False, help="the ledger password (for --recover)")
@entries_output_option()
@pass_globals
def read(
    settings: Globals,
    ledger_id: str,
    first: int,
    last: int,
    unconfirmed: bool,
    recover: bool,
    password: str,
    output: str,
) -> None:
    """Read entries; prints `ID<TAB>PAYLOAD` per entry (-o json, -o raw: see --output)."""
    with settings.client() as client:
        if recover:
            note_writing()  # a recovery closes the ledger
            client.recover_ledger(ledger_id, password.encode())
        _print_entries(client.read(ledger_id, first, last, unconfirmed=unconfirmed), output)


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@option("--from", "first", type=int, default=0, help="first entry id")
@entries_output_option()
@pass_globals
def tail(settings: Globals, ledger_id: str, first: int, output: str) -> None:
    """Follow a ledger: print entries as they are confirmed (until it is closed)."""
    with settings.client() as client:
        _print_entries(client.tail(ledger_id, first), output)


def _closed(metadata: common_pb2.LedgerMetadata) -> dict[str, Any]:
    return {"ledger": ledger_name(metadata), "last_entry_id": metadata.last_entry_id, "length": metadata.length}


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@option("--password", default="", show_default=False, help="the ledger password")
@output_option()
@pass_globals
@writes
def recover(settings: Globals, ledger_id: str, password: str, output: str) -> None:
    """Fence a ledger's writer, recover its end and close it."""
    with settings.client() as client:
        metadata = client.recover_ledger(ledger_id, password.encode())
    if not structured(output, _closed(metadata)):
        click.echo(
            f"recovered {ledger_name(metadata)}: closed at entry {metadata.last_entry_id} ({metadata.length} bytes)"
        )


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@output_option()
@pass_globals
@writes
def close(settings: Globals, ledger_id: str, output: str) -> None:
    """Close a ledger at its last-add-confirmed."""
    with settings.client() as client:
        metadata = client.close_ledger(ledger_id)
    if not structured(output, _closed(metadata)):
        click.echo(f"closed {ledger_name(metadata)} at entry {metadata.last_entry_id} ({metadata.length} bytes)")


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@option("--force", is_flag=True, help="really delete: there is no undo")
@pass_globals
@writes
def delete(settings: Globals, ledger_id: str, force: bool) -> None:
    """Delete a ledger and its entries (needs --force)."""
    ledger_id_parsed = LedgerId.parse(ledger_id)
    if not force:
        raise click.UsageError(
            f"refusing to delete {ledger_id_parsed} without --force: its metadata and every entry are removed for good"
        )
    with settings.client() as client:
        client.delete_ledger(ledger_id_parsed)
    click.echo(f"deleted {ledger_id_parsed}")


@ledger.command("list")
@option("--scope", type=int, default=None, help="only this scope (default: every scope)")
@output_option()
@pass_globals
def list_ledgers(settings: Globals, scope: int | None, output: str) -> None:
    """List ledgers."""
    with settings.client() as client:
        ledgers = list(client.list_ledgers(scope))
    if structured(output, [metadata_dict(metadata) for metadata in ledgers]):
        return
    rows = [
        [
            ledger_name(m),
            state_name(m),
            f"{m.ensemble_size}/{m.write_quorum_size}/{m.ack_quorum_size}",
            str(m.last_entry_id) if m.state == common_pb2.LEDGER_STATE_CLOSED else "-",
        ]
        for m in ledgers
    ]
    print_table(["LEDGER", "STATE", "E/W/A", "LAST ENTRY"], rows)


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@output_option()
@pass_globals
def meta(settings: Globals, ledger_id: str, output: str) -> None:
    """Print a ledger's metadata record and version."""
    with settings.client() as client:
        metadata, version = client.ledger_metadata(ledger_id)
    if structured(output, {**metadata_dict(metadata), "version": version}):
        return
    digest = common_pb2.DigestType.Name(metadata.digest_type).removeprefix("DIGEST_TYPE_")
    print_table(
        ["FIELD", "VALUE"],
        [
            ["ledger", ledger_name(metadata)],
            ["version", str(version)],
            ["state", state_name(metadata)],
            ["E/W/A", f"{metadata.ensemble_size}/{metadata.write_quorum_size}/{metadata.ack_quorum_size}"],
            ["last entry", str(metadata.last_entry_id)],
            ["length", str(metadata.length)],
            ["digest", digest],
            ["created", metadata.create_time.ToJsonString() if metadata.HasField("create_time") else "-"],
            *[[f"custom {key}", value] for key, value in sorted(metadata.custom_metadata.items())],
        ],
    )
    click.echo()
    print_table(
        ["FROM ENTRY", "ENSEMBLE"],
        [[str(e.first_entry_id), " ".join(e.bookie_ids)] for e in metadata.ensembles],
    )


@ledger.command()
@click.argument("ledger_id", metavar="LEDGER")
@output_option(default="json")
@pass_globals
def info(settings: Globals, ledger_id: str, output: str) -> None:
    """Print a ledger's metadata, version and (while open) last-add-confirmed."""
    with settings.client() as client:
        metadata, version = client.ledger_metadata(ledger_id)
        data = {**metadata_dict(metadata), "version": version}
        if metadata.state != common_pb2.LEDGER_STATE_CLOSED:
            data["last_add_confirmed"] = client.last_add_confirmed(ledger_id)
    if not structured(output, data):
        print_table(["FIELD", "VALUE"], [[key, str(value)] for key, value in sorted(data.items())])
