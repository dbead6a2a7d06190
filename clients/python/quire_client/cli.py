"""The `quire` command line.

    quire cluster up                      start a local cluster (what `make run` runs)
    quire ledger create|append|read|close|delete|list|info
    quire bookie list
    quire bookie inspect --data-dir D     look into a stopped bookie's RocksDB (read-only)
    quire bench [--local]                 append/read throughput

Ledger ids are printed and accepted as qualified names (UUID form); 32 hex
digits and scope:ledger in decimal are accepted too.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from google.protobuf import json_format

from quire.common.v1 import common_pb2
from quire.registry.v1 import registry_pb2
from quire_client import bench
from quire_client.client import QuireClient, QuireClientError
from quire_client.cluster import ClusterError, LocalCluster, Ports
from quire_common.errors import QuireError
from quire_common.ids import LedgerId

DIGESTS = {"crc32": 1, "hmac": 2, "crc32c": 3, "dummy": 4}


def _ledger_name(metadata: common_pb2.LedgerMetadata) -> str:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id).qualified_name


def _metadata_json(metadata: common_pb2.LedgerMetadata) -> dict[str, object]:
    data = json_format.MessageToDict(metadata, preserving_proto_field_name=True)
    data["ledger"] = _ledger_name(metadata)
    return data


def _client(args: argparse.Namespace) -> QuireClient:
    return QuireClient(args.gateway, args.registry)


def cmd_ledger_create(args: argparse.Namespace) -> None:
    with _client(args) as client:
        metadata = client.create_ledger(
            ensemble_size=args.ensemble,
            write_quorum_size=args.write_quorum,
            ack_quorum_size=args.ack_quorum,
            password=args.password.encode(),
            digest_type=DIGESTS[args.digest],
            ledger_id=args.id,
            scope_id=args.scope,
            legacy=args.legacy,
        )
    print(_ledger_name(metadata))


def _payloads(args: argparse.Namespace) -> Iterator[bytes]:
    if args.data:
        for item in args.data:
            yield item.encode()
    elif args.count:
        for index in range(args.count):
            yield (f"entry-{index}-".encode() * (args.size // 8 + 1))[: args.size]
    else:
        for line in sys.stdin.buffer:
            yield line.rstrip(b"\n")


def cmd_ledger_append(args: argparse.Namespace) -> None:
    with _client(args) as client:
        last = client.append_all(args.ledger, _payloads(args), batch_size=args.batch)
    print(f"last entry id {last}")


def cmd_ledger_read(args: argparse.Namespace) -> None:
    with _client(args) as client:
        for entry in client.read(args.ledger, args.first, args.last, unconfirmed=args.unconfirmed):
            text = entry.payload.decode("utf-8", errors="backslashreplace")
            print(f"{entry.entry_id}\t{text}")


def cmd_ledger_close(args: argparse.Namespace) -> None:
    with _client(args) as client:
        metadata = client.close_ledger(args.ledger)
    print(f"closed {_ledger_name(metadata)} at entry {metadata.last_entry_id} ({metadata.length} bytes)")


def cmd_ledger_delete(args: argparse.Namespace) -> None:
    with _client(args) as client:
        client.delete_ledger(args.ledger)
    print(f"deleted {LedgerId.parse(args.ledger)}")


def cmd_ledger_list(args: argparse.Namespace) -> None:
    with _client(args) as client:
        for metadata in client.list_ledgers(args.scope):
            state = common_pb2.LedgerState.Name(metadata.state).removeprefix("LEDGER_STATE_")
            print(
                f"{_ledger_name(metadata)}\t{state}\tE={metadata.ensemble_size} "
                f"W={metadata.write_quorum_size} A={metadata.ack_quorum_size}"
            )


def cmd_ledger_info(args: argparse.Namespace) -> None:
    with _client(args) as client:
        metadata, version = client.ledger_metadata(args.ledger)
        data = _metadata_json(metadata)
        data["version"] = version
        if metadata.state != common_pb2.LEDGER_STATE_CLOSED:
            data["last_add_confirmed"] = client.last_add_confirmed(args.ledger)
    print(json.dumps(data, indent=2))


def cmd_bookie_list(args: argparse.Namespace) -> None:
    with _client(args) as client:
        for record in client.list_bookies(registry_pb2.BOOKIE_STATE_ALL):
            endpoints = ", ".join(f"{e.protocol}={e.host}:{e.port}" for e in record.service_info.endpoints)
            print(f"{record.bookie_id}\t{'read-only' if record.read_only else 'writable'}\t{endpoints}")


def _payload_preview(payload: bytes, limit: int = 60) -> str:
    text = payload[:limit].decode("utf-8", errors="backslashreplace")
    return text + ("..." if len(payload) > limit else "")


def cmd_bookie_inspect(args: argparse.Namespace) -> int:
    # Imported here: only this command needs RocksDB and the bookie's storage layout.
    from quire_bookie import inspect

    data_dir = Path(args.data_dir)
    password = args.password.encode() if args.password is not None else None
    try:
        ledgers = inspect.list_ledgers(data_dir)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.ledger is None and not args.verify:
        print("ledger\tentries\tlast_entry\tlac\tfenced")
        for row in ledgers:
            print(f"{row.ledger_id}\t{row.entries}\t{row.last_entry_id}\t{row.last_add_confirmed}\t{row.fenced}")
        return 0
    wanted = [LedgerId.parse(args.ledger)] if args.ledger is not None else [row.ledger_id for row in ledgers]
    last = args.last if args.last is not None else inspect.LAST_ENTRY_ID
    bad = 0
    for ledger_id in wanted:
        checked = failed = unchecked = 0
        for entry in inspect.dump_entries(data_dir, ledger_id, args.first, last, verify=args.verify, password=password):
            checked += entry.digest_ok is True
            failed += entry.digest_ok is False
            unchecked += entry.digest_ok is None
            if args.ledger is not None:
                status = {True: "ok", False: "BAD", None: "-"}[entry.digest_ok]
                note = f"\t{entry.problem}" if entry.problem else ""
                print(
                    f"{entry.entry_id}\tV{entry.format_version}\t{entry.digest_type}\tlac={entry.last_add_confirmed}"
                    f"\tlength={entry.length}\t{entry.size_bytes}B\tdigest={status}\t"
                    f"{_payload_preview(entry.payload)}{note}"
                )
        if args.verify:
            print(f"{ledger_id}: {checked} ok, {failed} bad, {unchecked} not checked", file=sys.stderr)
        bad += failed
    return 1 if bad else 0


def cmd_cluster_up(args: argparse.Namespace) -> None:
    data_dir = Path(args.data_dir)
    ports = Ports(bookies=[3181 + i for i in range(args.bookies)])
    cluster = LocalCluster(data_dir, ports)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"starting Quire in {cluster.data_dir} (logs in {cluster.data_dir / 'logs'}) ...", flush=True)
    cluster.start()
    try:
        print(
            "\nQuire is running:\n"
            f"  etcd       127.0.0.1:{ports.etcd}\n"
            f"  gateway    {cluster.gateway_target}   (quire.gateway.v1.LedgerService)\n"
            f"  registry   {cluster.registry_target}\n"
            f"  placement  127.0.0.1:{ports.placement}\n"
            + "".join(
                f"  {name:<10} {cluster.bookie_id(name)}   (admin http://{cluster.bookie_http(name)}/status)\n"
                for name in cluster.bookie_names
            )
            + "\nTry:  L=$(quire ledger create) && quire ledger append $L hello world && quire ledger read $L\n"
            "Press Ctrl-C to stop.",
            flush=True,
        )
        while not stop.wait(1.0):
            for name in cluster.processes:
                popen = cluster.processes[name].popen
                if popen is not None and popen.poll() is not None:
                    print(
                        f"{name} exited with status {popen.returncode}; see {cluster.log_path(name)}",
                        flush=True,
                    )
                    cluster.processes[name].popen = None
    finally:
        print("stopping ...", flush=True)
        cluster.stop()
        print("stopped.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quire", description="Quire: a replicated ledger store")
    parser.add_argument("--gateway", default=os.environ.get("QUIRE_GATEWAY", "127.0.0.1:7000"))
    parser.add_argument("--registry", default=os.environ.get("QUIRE_REGISTRY", "127.0.0.1:7001"))
    areas = parser.add_subparsers(dest="area", required=True)

    ledger = areas.add_parser("ledger", help="create, write, read and manage ledgers").add_subparsers(
        dest="command", required=True
    )
    create = ledger.add_parser("create", help="create a ledger and print its id")
    create.add_argument("--ensemble", "-e", type=int, default=3)
    create.add_argument("--write-quorum", "-w", type=int, default=2)
    create.add_argument("--ack-quorum", "-a", type=int, default=2)
    create.add_argument("--password", default="")
    create.add_argument("--digest", choices=sorted(DIGESTS), default="crc32c")
    which = create.add_mutually_exclusive_group()
    which.add_argument("--id", help="create exactly this ledger id")
    which.add_argument("--scope", type=int, help="create a new ledger in this scope")
    which.add_argument("--legacy", action="store_true", help="a scope-0 id from the 64-bit generator")
    create.set_defaults(func=cmd_ledger_create)

    append = ledger.add_parser("append", help="append entries (arguments, --count, or lines of stdin)")
    append.add_argument("ledger")
    append.add_argument("data", nargs="*")
    append.add_argument("--count", type=int, default=0, help="append COUNT generated entries")
    append.add_argument("--size", type=int, default=1024, help="size of generated entries")
    append.add_argument("--batch", type=int, default=100, help="entries per stream message")
    append.set_defaults(func=cmd_ledger_append)

    read = ledger.add_parser("read", help="read entries")
    read.add_argument("ledger")
    read.add_argument("--first", type=int, default=0)
    read.add_argument("--last", type=int, default=-1, help="-1: up to the last-add-confirmed")
    read.add_argument("--unconfirmed", action="store_true", help="read past the LAC (needs --last)")
    read.set_defaults(func=cmd_ledger_read)

    for name, func, text in (
        ("close", cmd_ledger_close, "close a ledger at its last-add-confirmed"),
        ("delete", cmd_ledger_delete, "delete a ledger and its entries"),
        ("info", cmd_ledger_info, "print a ledger's metadata"),
    ):
        command = ledger.add_parser(name, help=text)
        command.add_argument("ledger")
        command.set_defaults(func=func)

    listing = ledger.add_parser("list", help="list ledgers (of one scope with --scope)")
    listing.add_argument("--scope", type=int, default=None)
    listing.set_defaults(func=cmd_ledger_list)

    bookie = areas.add_parser("bookie", help="bookies").add_subparsers(dest="command", required=True)
    bookie.add_parser("list", help="list registered bookies").set_defaults(func=cmd_bookie_list)
    inspect = bookie.add_parser(
        "inspect",
        help="look into a stopped bookie's RocksDB without changing it",
        description="Lists ledgers (default), dumps a ledger's entries (--ledger), or checks digests (--verify; "
        "exit status 1 when a digest is bad). Opens the database read-only and never writes to it.",
    )
    inspect.add_argument("--data-dir", required=True, help="the bookie's QUIRE_BOOKIE_DATA_DIR")
    inspect.add_argument("--ledger", help="dump this ledger's entries")
    inspect.add_argument("--from", dest="first", type=int, default=0, help="first entry id to dump")
    inspect.add_argument("--to", dest="last", type=int, default=None, help="last entry id to dump")
    inspect.add_argument("--verify", action="store_true", help="check digests (all ledgers without --ledger)")
    inspect.add_argument("--password", default=None, help="the ledger password, needed only for HMAC digests")
    inspect.set_defaults(func=cmd_bookie_inspect)

    cluster = areas.add_parser("cluster", help="local clusters").add_subparsers(dest="command", required=True)
    up = cluster.add_parser("up", help="start etcd and every service locally until Ctrl-C")
    up.add_argument("--data-dir", default=os.environ.get("QUIRE_DATA_DIR", "data"))
    up.add_argument("--bookies", type=int, default=3)
    up.set_defaults(func=cmd_cluster_up)
    bench.add_parser(areas)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        if isinstance(status, int):
            return status
    except QuireClientError as exc:
        reason = f" [{exc.reason.removeprefix('ERROR_REASON_')}]" if exc.reason else ""
        print(f"error: {exc.code.name}{reason}: {exc.message}", file=sys.stderr)
        return 1
    except QuireError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
