"""`quire bookie ...` and `quire bookieinfo`: the storage nodes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from google.protobuf import json_format

from quire_api.bookie_addresses import bookie_rpc_address, legacy_address
from quire_api.errors import QuireError
from quire_api.ids import LedgerId
from quire_client.cli.admin_calls import open_admin
from quire_client.cli.common import (
    ExitCode,
    Globals,
    meter,
    note_writing,
    option,
    output_option,
    pass_globals,
    print_table,
    readable_bytes,
    structured,
)
from quire_client.optional import SERVER, import_for
from quire_proto.registry.v1 import registry_pb2

BOOKIE_STATES = {
    "rw": registry_pb2.BOOKIE_STATE_WRITABLE,
    "ro": registry_pb2.BOOKIE_STATE_READ_ONLY,
    "all": registry_pb2.BOOKIE_STATE_ALL,
}


@click.group(
    epilog="\b\nExamples:\n"
    "  quire bookie list --state ro\n"
    "  quire bookie endpoints 127.0.0.1:3181 -o json\n"
    "  quire bookie inspect --data-dir data/bookie-1 --verify\n"
    "  quire bookie decommission 127.0.0.1:3183 --timeout 900"
)
def bookie() -> None:
    """Bookies: list, resolve, inspect offline, decommission."""


def _record_dict(record: registry_pb2.BookieRecord) -> dict[str, Any]:
    return json_format.MessageToDict(
        record, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


@bookie.command("list")
@option("--state", type=click.Choice(sorted(BOOKIE_STATES)), default="all", help="rw: writable, ro: read-only")
@output_option()
@pass_globals
def list_bookies(settings: Globals, state: str, output: str) -> None:
    """List registered bookies."""
    with open_admin(settings) as admin:
        records = admin.list_bookies(BOOKIE_STATES[state])
    if structured(output, [_record_dict(record) for record in records]):
        return
    rows = [
        [
            record.bookie_id,
            "read-only" if record.read_only else "writable",
            " ".join(f"{e.protocol}={e.host}:{e.port}" for e in record.service_info.endpoints) or "(from id)",
            " ".join(f"{k}={v}" for k, v in sorted(record.service_info.properties.items())) or "-",
        ]
        for record in records
    ]
    print_table(["BOOKIE", "STATE", "ENDPOINTS", "PROPERTIES"], rows)


@bookie.command()
@click.argument("bookie_id")
@output_option()
@pass_globals
def endpoints(settings: Globals, bookie_id: str, output: str) -> None:
    """A bookie's registered info and the address it resolves to."""
    with open_admin(settings) as admin:
        response = admin.bookie_service_info(bookie_id)
    record = response.record
    address = bookie_rpc_address(record.bookie_id, record.service_info)
    try:
        legacy: str | None = legacy_address(record.bookie_id)
    except QuireError:
        legacy = None  # not a host:port id: only the resolver can find it
    document = {
        "record": _record_dict(record),
        "effective_service_info": json_format.MessageToDict(
            response.effective_service_info, preserving_proto_field_name=True
        ),
        "resolved_address": address,
        "legacy_address": legacy,
    }
    if structured(output, document):
        return
    state = "read-only" if record.read_only else "writable"
    click.echo(f"bookie     {record.bookie_id} ({state}, version {record.version})")
    click.echo("registered " + (json_format.MessageToJson(record.service_info, indent=None) or "{}"))
    click.echo(f"resolves   bookie-rpc {address}")
    click.echo(f"legacy     {legacy or '(id is not host:port: unresolvable without the registry)'}")


@bookie.command()
@click.argument("bookie_id")
@option("--timeout", type=float, default=600.0, help="seconds to wait")
@pass_globals
def decommission(settings: Globals, bookie_id: str, timeout: float) -> int:
    """Wait until a stopped bookie's replicas are re-replicated elsewhere, then remove its cookie.

    The gateway's auditor re-replicates its segments of closed ledgers after its
    lost-bookie delay; once no ledger names the bookie, its cookie is removed so
    the id can be reused on a fresh disk. Exit status 1 if it is still
    registered or segments remain after --timeout."""
    with open_admin(settings) as admin:
        if any(record.bookie_id == bookie_id for record in admin.list_bookies(registry_pb2.BOOKIE_STATE_ALL)):
            click.echo(f"error: bookie {bookie_id} is still registered; stop it first, then decommission it", err=True)
            return ExitCode.ERROR
        deadline = time.monotonic() + timeout
        with meter(f"waiting for {bookie_id}'s segments to move") as progress:
            while True:
                left, total = admin.under_replicated(bookie_id)
                if not total:
                    break
                if time.monotonic() >= deadline:
                    ledgers = sorted({str(r["ledger"]) for r in left})
                    click.echo(
                        f"error: after {timeout:.0f}s, {total} segments of {len(ledgers)} ledgers still "
                        f"name {bookie_id} (open ledgers wait until closed): {', '.join(ledgers[:5])}",
                        err=True,
                    )
                    return ExitCode.ERROR
                progress.describe(f"{total} segments still on {bookie_id}")
                time.sleep(1.0)
        note_writing()
        cookie = "its cookie removed" if admin.delete_cookie(bookie_id) else "it had no cookie"
    click.echo(f"bookie {bookie_id} decommissioned: no ledger has a replica on it; {cookie}")
    return ExitCode.OK


def _payload_preview(payload: bytes, limit: int = 60) -> str:
    text = payload[:limit].decode("utf-8", errors="backslashreplace")
    return text + ("..." if len(payload) > limit else "")


@bookie.command()
@option("--data-dir", required=True, type=click.Path(path_type=Path), help="the bookie's QUIRE_BOOKIE_DATA_DIR")
@option("--ledger", "ledger_id", default=None, help="dump this ledger's entries")
@option("--from", "first", type=int, default=0, help="first entry id to dump")
@option("--to", "last", type=int, default=None, help="last entry id to dump (default: the last)")
@option("--verify", is_flag=True, help="check digests (all ledgers without --ledger)")
@option("--password", default=None, help="the ledger password, needed only for HMAC digests")
def inspect(
    data_dir: Path, ledger_id: str | None, first: int, last: int | None, verify: bool, password: str | None
) -> int:
    """Look into a stopped bookie's RocksDB without changing it.

    Lists ledgers (default), dumps a ledger's entries (--ledger), or checks
    digests (--verify; exit status 1 when a digest is bad). Opens the database
    read-only and never writes to it."""
    # Imported here: only this command needs RocksDB and the bookie's storage layout (the server package).
    bookie_inspect = import_for("quire_bookie.inspect", "`quire bookie inspect`", SERVER)
    DamagedJournal = import_for("quire_bookie.storage", "`quire bookie inspect`", SERVER).DamagedJournal

    secret = password.encode() if password is not None else None
    try:
        ledgers = bookie_inspect.list_ledgers(data_dir)
    except (FileNotFoundError, DamagedJournal) as exc:
        click.echo(f"error: {exc}", err=True)
        return ExitCode.ERROR
    if ledger_id is None and not verify:
        click.echo("ledger\tentries\tlast_entry\tlac\tfenced")
        for row in ledgers:
            click.echo(f"{row.ledger_id}\t{row.entries}\t{row.last_entry_id}\t{row.last_add_confirmed}\t{row.fenced}")
        return ExitCode.OK
    wanted = [LedgerId.parse(ledger_id)] if ledger_id is not None else [row.ledger_id for row in ledgers]
    end = last if last is not None else bookie_inspect.LAST_ENTRY_ID
    bad = 0
    for one in wanted:
        checked = failed = unchecked = 0
        for entry in bookie_inspect.dump_entries(data_dir, one, first, end, verify=verify, password=secret):
            checked += entry.digest_ok is True
            failed += entry.digest_ok is False
            unchecked += entry.digest_ok is None
            if ledger_id is not None:
                status = {True: "ok", False: "BAD", None: "-"}[entry.digest_ok]
                note = f"\t{entry.problem}" if entry.problem else ""
                click.echo(
                    f"{entry.entry_id}\tV{entry.format_version}\t{entry.digest_type}\tlac={entry.last_add_confirmed}"
                    f"\tlength={entry.length}\t{entry.size_bytes}B\tdigest={status}\t"
                    f"{_payload_preview(entry.payload)}{note}"
                )
        if verify:
            click.echo(f"{one}: {checked} ok, {failed} bad, {unchecked} not checked", err=True)
        bad += failed
    return ExitCode.ERROR if bad else ExitCode.OK


@click.command()
@output_option()
@pass_globals
def bookieinfo(settings: Globals, output: str) -> int:
    """Free and total disk space of every bookie, and the cluster's totals (each bookie counted once)."""
    answers: dict[str, tuple[int, int]] = {}
    failures: dict[str, str] = {}
    with open_admin(settings) as admin:
        for disk in admin.bookie_disks():
            if disk.error:
                failures[disk.bookie_id] = disk.error
            else:
                answers[disk.bookie_id] = (int(disk.free_disk_bytes), int(disk.total_disk_bytes))
    if not answers:
        click.echo("Failed to retrieve bookie information from any of the bookies", err=True)
        return ExitCode.ERROR
    total_free = sum(free for free, _ in answers.values())
    total = sum(size for _, size in answers.values())
    document = {
        "bookies": {b: {"free_bytes": f, "total_bytes": t} for b, (f, t) in sorted(answers.items())},
        "unreachable": failures,
        "cluster": {"free_bytes": total_free, "total_bytes": total},
    }
    if structured(output, document):
        return ExitCode.OK
    click.echo("Free disk space info:")
    for bookie_id, (free, size) in sorted(answers.items()):
        click.echo(f"{bookie_id}:\tFree: {free}({readable_bytes(free)})\tTotal: {size}({readable_bytes(size)})")
    for bookie_id, error in sorted(failures.items()):
        click.echo(f"{bookie_id}:\tunreachable: {error}")
    click.echo(f"Total free disk space in the cluster:\t{total_free}({readable_bytes(total_free)})")
    click.echo(f"Total disk capacity in the cluster:\t{total}({readable_bytes(total)})")
    return ExitCode.OK
