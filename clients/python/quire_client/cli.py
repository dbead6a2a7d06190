"""The `quire` command line.

    quire cluster up                      start a local cluster (what `make run` runs)
    quire ledger create|append|read|tail|recover|close|delete|list|info
    quire blob put FILE | get BLOB_ID
    quire bookie list
    quire dev smoke                       create, write, read back, verify, delete
    quire bench [--local]                 append/read throughput and latency

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
from quire_client import bench, smoke
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


def _print_entry(entry) -> None:  # type: ignore[no-untyped-def]
    text = entry.payload.decode("utf-8", errors="backslashreplace")
    print(f"{entry.entry_id}\t{text}", flush=True)


def cmd_ledger_read(args: argparse.Namespace) -> None:
    with _client(args) as client:
        if args.recover:
            client.recover_ledger(args.ledger, args.password.encode())
        for entry in client.read(args.ledger, args.first, args.last, unconfirmed=args.unconfirmed):
            _print_entry(entry)


def cmd_ledger_tail(args: argparse.Namespace) -> None:
    with _client(args) as client:
        for entry in client.tail(args.ledger, args.first):
            _print_entry(entry)


def cmd_ledger_recover(args: argparse.Namespace) -> None:
    with _client(args) as client:
        metadata = client.recover_ledger(args.ledger, args.password.encode())
    print(f"recovered {_ledger_name(metadata)}: closed at entry {metadata.last_entry_id} ({metadata.length} bytes)")


def cmd_blob_put(args: argparse.Namespace) -> None:
    def parts() -> Iterator[bytes]:
        with open(args.file, "rb") if args.file != "-" else os.fdopen(sys.stdin.fileno(), "rb", closefd=False) as f:
            while chunk := f.read(1024 * 1024):
                yield chunk

    with _client(args) as client:
        print(client.put_blob(parts(), scope_id=args.scope))


def cmd_blob_get(args: argparse.Namespace) -> None:
    with _client(args) as client:
        parts = client.get_blob_parts(args.blob_id)
        if args.output and args.output != "-":
            with open(args.output, "wb") as f:
                for part in parts:
                    f.write(part)
        else:
            for part in parts:
                sys.stdout.buffer.write(part)
            sys.stdout.buffer.flush()


def cmd_dev_smoke(args: argparse.Namespace) -> None:
    with _client(args) as client:
        report = smoke.run(client, entries=args.entries, size=args.size)
    print(report.summary())
    if not report.ok:
        raise SystemExit(1)


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
            + "".join(f"  {name:<10} {cluster.bookie_id(name)}\n" for name in cluster.bookie_names)
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
    read.add_argument("--from", "--first", dest="first", type=int, default=0, help="first entry id")
    read.add_argument("--to", "--last", dest="last", type=int, default=-1, help="last entry id; -1: up to the LAC")
    read.add_argument("--unconfirmed", action="store_true", help="read past the LAC (BP-5; needs --to)")
    read.add_argument("--recover", action="store_true", help="recover (fence and close) the ledger first")
    read.add_argument("--password", default="", help="the ledger password (for --recover)")
    read.set_defaults(func=cmd_ledger_read)

    tail = ledger.add_parser("tail", help="follow a ledger: print entries as they are confirmed")
    tail.add_argument("ledger")
    tail.add_argument("--from", dest="first", type=int, default=0, help="first entry id")
    tail.set_defaults(func=cmd_ledger_tail)

    recover = ledger.add_parser("recover", help="fence a ledger's writer, recover its end and close it")
    recover.add_argument("ledger")
    recover.add_argument("--password", default="")
    recover.set_defaults(func=cmd_ledger_recover)

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

    blob = areas.add_parser("blob", help="store and fetch blobs").add_subparsers(dest="command", required=True)
    put = blob.add_parser("put", help="store a file (- for stdin) and print its blob id")
    put.add_argument("file")
    put.add_argument("--scope", type=int, default=0)
    put.set_defaults(func=cmd_blob_put)
    get = blob.add_parser("get", help="write a blob to stdout (or --output FILE)")
    get.add_argument("blob_id")
    get.add_argument("--output", "-o", default=None)
    get.set_defaults(func=cmd_blob_get)

    dev = areas.add_parser("dev", help="developer checks").add_subparsers(dest="command", required=True)
    smoke_parser = dev.add_parser("smoke", help="create, write, read back, verify, delete; print latencies")
    smoke_parser.add_argument("--entries", type=int, default=200)
    smoke_parser.add_argument("--size", type=int, default=1024)
    smoke_parser.set_defaults(func=cmd_dev_smoke)

    bookie = areas.add_parser("bookie", help="bookies").add_subparsers(dest="command", required=True)
    bookie.add_parser("list", help="list registered bookies").set_defaults(func=cmd_bookie_list)

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
        args.func(args)
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
