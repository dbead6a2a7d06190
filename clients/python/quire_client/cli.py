"""The `quire` command line.

    quire cluster up                      start a local cluster (what `make run` runs)
    quire ledger create|append|read|tail|recover|close|delete|list|info|meta
    quire blob put FILE | get BLOB_ID
    quire bookie list [--state rw|ro|all] | endpoints ID
    quire bookie inspect --data-dir D     look into a stopped bookie's RocksDB (read-only)
    quire bookieinfo                      free and total disk per bookie, and cluster totals
    quire placement weights               how placement weighs each writable bookie (BP-2)
    quire telemetry analyze --input D --output D   load report and load factors (PySpark)
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
import time
from collections.abc import Iterator
from pathlib import Path

from google.protobuf import json_format

from quire.common.v1 import common_pb2
from quire.registry.v1 import registry_pb2
from quire_client import bench, smoke
from quire_client.client import ClientTls, QuireClient, QuireClientError
from quire_client.cluster import ClusterError, LocalCluster, Ports
from quire_client.devcerts import CertBundle, write_dev_certs
from quire_common.bookies import bookie_rpc_address, legacy_address
from quire_common.errors import QuireError
from quire_common.ids import LedgerId

DIGESTS = {"crc32": 1, "hmac": 2, "crc32c": 3, "dummy": 4}


def _ledger_name(metadata: common_pb2.LedgerMetadata) -> str:
    return LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id).qualified_name


def _metadata_json(metadata: common_pb2.LedgerMetadata) -> dict[str, object]:
    data = json_format.MessageToDict(metadata, preserving_proto_field_name=True)
    data["ledger"] = _ledger_name(metadata)
    return data


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def _state_name(metadata: common_pb2.LedgerMetadata) -> str:
    return common_pb2.LedgerState.Name(metadata.state).removeprefix("LEDGER_STATE_")


def _client(args: argparse.Namespace) -> QuireClient:
    tls = None
    if args.tls_ca:
        tls = ClientTls(
            Path(args.tls_ca),
            Path(args.tls_cert) if args.tls_cert else None,
            Path(args.tls_key) if args.tls_key else None,
        )
    return QuireClient(args.gateway, args.registry, placement=args.placement, tls=tls, token=args.token or None)


def cmd_dev_certs(args: argparse.Namespace) -> None:
    bundle = write_dev_certs(Path(args.out), args.kubernetes_namespace)
    print(f"throwaway CA, service and client certificates in {bundle.directory}")
    if args.kubernetes_namespace:
        print(
            f"  Kubernetes Secrets:   for d in {bundle.directory}/kubernetes/*; do kubectl -n "
            f'{args.kubernetes_namespace} create secret generic "$(basename "$d")" --from-file="$d"; done'
        )
    print(f"  start a TLS cluster:  quire cluster up --tls {bundle.directory}")
    print(
        f"  as a client:          quire --tls-ca {bundle.ca} --tls-cert {bundle.cert('client-admin')} "
        f"--tls-key {bundle.key('client-admin')} ledger list"
    )


def cmd_dev_token(args: argparse.Namespace) -> None:
    roles: dict[str, list[str]] = {}
    for grant in args.role:
        scope, _, role = grant.rpartition("=")
        roles.setdefault(scope or "*", []).append(role)
    print(CertBundle(Path(args.certs)).token(args.subject, roles, args.ttl_seconds))


def _readable_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


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


def cmd_ledger_delete(args: argparse.Namespace) -> int:
    ledger = LedgerId.parse(args.ledger)
    if not args.force:
        print(
            f"error: refusing to delete {ledger} without --force: its metadata and every entry are removed for good",
            file=sys.stderr,
        )
        return 2
    with _client(args) as client:
        client.delete_ledger(ledger)
    print(f"deleted {ledger}")
    return 0


def cmd_ledger_list(args: argparse.Namespace) -> None:
    with _client(args) as client:
        ledgers = list(client.list_ledgers(args.scope))
    if args.output == "json":
        _print_json([_metadata_json(metadata) for metadata in ledgers])
        return
    rows = [
        [
            _ledger_name(m),
            _state_name(m),
            f"{m.ensemble_size}/{m.write_quorum_size}/{m.ack_quorum_size}",
            str(m.last_entry_id) if m.state == common_pb2.LEDGER_STATE_CLOSED else "-",
        ]
        for m in ledgers
    ]
    _print_table(["LEDGER", "STATE", "E/W/A", "LAST ENTRY"], rows)


def cmd_ledger_meta(args: argparse.Namespace) -> None:
    with _client(args) as client:
        metadata, version = client.ledger_metadata(args.ledger)
    if args.output == "json":
        data = _metadata_json(metadata)
        data["version"] = version
        _print_json(data)
        return
    digest = common_pb2.DigestType.Name(metadata.digest_type).removeprefix("DIGEST_TYPE_")
    _print_table(
        ["FIELD", "VALUE"],
        [
            ["ledger", _ledger_name(metadata)],
            ["version", str(version)],
            ["state", _state_name(metadata)],
            ["E/W/A", f"{metadata.ensemble_size}/{metadata.write_quorum_size}/{metadata.ack_quorum_size}"],
            ["last entry", str(metadata.last_entry_id)],
            ["length", str(metadata.length)],
            ["digest", digest],
            ["created", metadata.create_time.ToJsonString() if metadata.HasField("create_time") else "-"],
            *[[f"custom {key}", value] for key, value in sorted(metadata.custom_metadata.items())],
        ],
    )
    print()
    _print_table(
        ["FROM ENTRY", "ENSEMBLE"],
        [[str(e.first_entry_id), " ".join(e.bookie_ids)] for e in metadata.ensembles],
    )


def cmd_ledger_info(args: argparse.Namespace) -> None:
    with _client(args) as client:
        metadata, version = client.ledger_metadata(args.ledger)
        data = _metadata_json(metadata)
        data["version"] = version
        if metadata.state != common_pb2.LEDGER_STATE_CLOSED:
            data["last_add_confirmed"] = client.last_add_confirmed(args.ledger)
    print(json.dumps(data, indent=2))


BOOKIE_STATES = {
    "rw": registry_pb2.BOOKIE_STATE_WRITABLE,
    "ro": registry_pb2.BOOKIE_STATE_READ_ONLY,
    "all": registry_pb2.BOOKIE_STATE_ALL,
}


def _record_json(record: registry_pb2.BookieRecord) -> dict[str, object]:
    return json_format.MessageToDict(
        record, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def cmd_bookie_list(args: argparse.Namespace) -> None:
    with _client(args) as client:
        records = client.list_bookies(BOOKIE_STATES[args.state])
    if args.output == "json":
        _print_json([_record_json(record) for record in records])
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
    _print_table(["BOOKIE", "STATE", "ENDPOINTS", "PROPERTIES"], rows)


def _under_replicated_rows(client: QuireClient) -> list[dict[str, object]]:
    return [
        {
            "ledger": _ledger_name(metadata),
            "state": _state_name(metadata),
            "segment": replica.segment,
            "first_entry_id": replica.first_entry_id,
            "last_entry_id": replica.last_entry_id,
            "bookie_id": replica.bookie_id,
            "why": why,
        }
        for metadata, replica, why in client.under_replicated()
    ]


def cmd_recovery_status(args: argparse.Namespace) -> None:
    """Which gateway is the active auditor and what its scrub has found and
    repaired; segments with a replica on a bookie that is not registered, or
    with entries flagged for repair (left out or replaced by a writer, found
    damaged by a read, missing or damaged by the scrub)."""
    with _client(args) as client:
        rows = _under_replicated_rows(client)
        auditor = client.auditor()
    figures = dict(auditor.properties)
    if args.output == "json":
        _print_json({"auditor": {"holder": auditor.holder, **figures}, "under_replicated": rows})
        return
    if auditor.holder:
        shown = ", ".join(f"{name.removeprefix('scrub_')} {value}" for name, value in sorted(figures.items()))
        print(f"auditor: {auditor.holder} (active){'; ' + shown if shown else ''}")
    else:
        print("auditor: no gateway holds the role (none running, or the auditor is off)")
    if not rows:
        print("no under-replicated ledgers")
        return
    _print_table(
        ["LEDGER", "STATE", "SEGMENT", "ENTRIES", "BOOKIE", "WHY"],
        [
            [str(r["ledger"]), str(r["state"]), str(r["segment"]), f"{r['first_entry_id']}..{r['last_entry_id']}",
             str(r["bookie_id"]), str(r["why"])]
            for r in rows
        ],
    )  # fmt: skip


def cmd_bookie_decommission(args: argparse.Namespace) -> int:
    """Wait until no ledger names the (stopped) bookie (the gateway's auditor
    re-replicates its segments of closed ledgers after its lost-bookie delay),
    then remove its cookie so the id can be reused on a fresh disk."""
    with _client(args) as client:
        if any(record.bookie_id == args.bookie_id for record in client.list_bookies()):
            print(
                f"error: bookie {args.bookie_id} is still registered; stop it first, then decommission it",
                file=sys.stderr,
            )
            return 1
        deadline = time.monotonic() + args.timeout
        while True:
            left = [r for r in _under_replicated_rows(client) if r["bookie_id"] == args.bookie_id]
            if not left:
                cookie = "its cookie removed" if client.delete_cookie(args.bookie_id) else "it had no cookie"
                print(f"bookie {args.bookie_id} decommissioned: no ledger has a replica on it; {cookie}")
                return 0
            if time.monotonic() >= deadline:
                ledgers = sorted({str(r["ledger"]) for r in left})
                print(
                    f"error: after {args.timeout:.0f}s, {len(left)} segments of {len(ledgers)} ledgers still "
                    f"name {args.bookie_id} (open ledgers wait until closed): {', '.join(ledgers[:5])}",
                    file=sys.stderr,
                )
                return 1
            time.sleep(1.0)


def cmd_bookie_endpoints(args: argparse.Namespace) -> None:
    with _client(args) as client:
        response = client.bookie_service_info(args.bookie_id)
    record = response.record
    address = bookie_rpc_address(record.bookie_id, record.service_info)
    try:
        legacy: str | None = legacy_address(record.bookie_id)
    except QuireError:
        legacy = None  # not a host:port id: only the resolver can find it
    if args.output == "json":
        _print_json(
            {
                "record": _record_json(record),
                "effective_service_info": json_format.MessageToDict(
                    response.effective_service_info, preserving_proto_field_name=True
                ),
                "resolved_address": address,
                "legacy_address": legacy,
            }
        )
        return
    print(
        f"bookie     {record.bookie_id} ({'read-only' if record.read_only else 'writable'}, version {record.version})"
    )
    print("registered " + (json_format.MessageToJson(record.service_info, indent=None) or "{}"))
    print(f"resolves   bookie-rpc {address}")
    print(f"legacy     {legacy or '(id is not host:port: unresolvable without the registry)'}")


def cmd_bookieinfo(args: argparse.Namespace) -> int:
    """Free and total space of every registered bookie, then the cluster's
    totals, each BookieId counted once."""
    answers: dict[str, tuple[int, int]] = {}
    failures: dict[str, str] = {}
    with _client(args) as client:
        for record in client.list_bookies(registry_pb2.BOOKIE_STATE_ALL):
            try:
                info = client.bookie_info(record)
            except (QuireClientError, QuireError) as exc:
                failures[record.bookie_id] = str(exc)
                continue
            answers[record.bookie_id] = (int(info.free_disk_bytes), int(info.total_disk_bytes))
    if not answers:
        print("Failed to retrieve bookie information from any of the bookies", file=sys.stderr)
        return 1
    total_free = sum(free for free, _ in answers.values())
    total = sum(size for _, size in answers.values())
    if args.output == "json":
        _print_json(
            {
                "bookies": {b: {"free_bytes": f, "total_bytes": t} for b, (f, t) in sorted(answers.items())},
                "unreachable": failures,
                "cluster": {"free_bytes": total_free, "total_bytes": total},
            }
        )
        return 0
    print("Free disk space info:")
    for bookie_id, (free, size) in sorted(answers.items()):
        print(f"{bookie_id}:\tFree: {free}({_readable_bytes(free)})\tTotal: {size}({_readable_bytes(size)})")
    for bookie_id, error in sorted(failures.items()):
        print(f"{bookie_id}:\tunreachable: {error}")
    print(f"Total free disk space in the cluster:\t{total_free}({_readable_bytes(total_free)})")
    print(f"Total disk capacity in the cluster:\t{total}({_readable_bytes(total)})")
    return 0


def cmd_placement_weights(args: argparse.Namespace) -> None:
    with _client(args) as client:
        response = client.placement_weights()
    if args.output == "json":
        _print_json(json_format.MessageToDict(response, preserving_proto_field_name=True))
        return
    state = "on" if response.disk_weight_placement_enabled else "off (uniform draws)"
    print(f"policy {response.policy}, disk weights {state}, cap {response.max_weight_multiple} x median")
    _print_table(
        ["BOOKIE", "FREE", "TOTAL", "NATURAL", "CAPPED", "LOAD", "P(FIRST)", "CHOSEN", "READ AT"],
        [
            [
                b.bookie_id,
                _readable_bytes(b.free_bytes),
                _readable_bytes(b.total_bytes),
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
        print(f"{bookie_id}: info not read yet (or unreachable); drawn as the smallest weight")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def _payload_preview(payload: bytes, limit: int = 60) -> str:
    text = payload[:limit].decode("utf-8", errors="backslashreplace")
    return text + ("..." if len(payload) > limit else "")


def cmd_bookie_inspect(args: argparse.Namespace) -> int:
    # Imported here: only this command needs RocksDB and the bookie's storage layout.
    from quire_bookie import inspect
    from quire_bookie.storage import DamagedJournal

    data_dir = Path(args.data_dir)
    password = args.password.encode() if args.password is not None else None
    try:
        ledgers = inspect.list_ledgers(data_dir)
    except (FileNotFoundError, DamagedJournal) as exc:
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
    cluster = LocalCluster(
        data_dir,
        ports,
        tls=CertBundle(Path(args.tls)) if args.tls else None,
        gateways=args.gateways,
        balancer=args.gateways > 1,
    )
    if args.tls is None:
        print("plaintext development mode (QUIRE_INSECURE_PLAINTEXT_DEV): no TLS, no authentication", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"starting Quire in {cluster.data_dir} (logs in {cluster.data_dir / 'logs'}) ...", flush=True)
    cluster.start()
    try:
        print(
            "\nQuire is running:\n"
            f"  etcd       127.0.0.1:{ports.etcd}\n"
            + (
                f"  gateway    {cluster.gateway_target}   (quire.gateway.v1.LedgerService)\n"
                if cluster.balancer is None
                else f"  gateway    {cluster.gateway_target}   (HAProxy, round robin over the gateways below)\n"
                + "".join(
                    f"  {name:<10} {target}   (admin http://{cluster.gateway_http(name)}/status)\n"
                    for name, target in zip(cluster.gateway_names, cluster.gateway_targets, strict=True)
                )
            )
            + f"  registry   {cluster.registry_target}\n"
            f"  placement  127.0.0.1:{ports.placement}\n"
            + "".join(
                f"  {name:<10} {cluster.bookie_id(name)}   (admin http://{cluster.bookie_http(name)}/status)\n"
                for name in cluster.bookie_names
            )
            + (
                "\nTry:  L=$(quire ledger create) && quire ledger append $L hello world && quire ledger read $L\n"
                if args.tls is None
                else f"\nmutual TLS and authentication on; as a client:\n  quire --tls-ca {args.tls}/ca.pem "
                f"--tls-cert {args.tls}/client-admin.pem --tls-key {args.tls}/client-admin-key.pem ledger list\n"
            )
            + "Press Ctrl-C to stop.",
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


def _add_telemetry_parser(areas) -> None:  # type: ignore[no-untyped-def]
    """`quire telemetry ...` lives with the stage, which needs the `telemetry`
    extra (pyspark); without it the command says how to get it."""
    try:
        from quire_telemetry.cli import add_parser
    except ImportError:  # pragma: no cover - the package ships with the client
        return
    add_parser(areas)


def _add_output(command: argparse.ArgumentParser) -> None:
    command.add_argument("-o", "--output", choices=["table", "json"], default="table")
    command.set_defaults(json_errors=True)  # with -o json an error is a JSON document on stdout too


def _fail(args: argparse.Namespace, code: str, reason: str, message: str) -> int:
    """Report an error: one line on stderr; with `-o json`, also a JSON
    document on stdout, so that whatever reads it always gets valid JSON."""
    shown = f" [{reason.removeprefix('ERROR_REASON_')}]" if reason else ""
    print(f"error: {code}{shown}: {message}", file=sys.stderr)
    if getattr(args, "json_errors", False) and getattr(args, "output", None) == "json":
        _print_json({"error": {"code": code, "reason": reason, "message": message}})
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quire", description="Quire: a replicated ledger store")
    parser.add_argument("--gateway", default=os.environ.get("QUIRE_GATEWAY", "127.0.0.1:7000"))
    parser.add_argument("--registry", default=os.environ.get("QUIRE_REGISTRY", "127.0.0.1:7001"))
    parser.add_argument("--placement", default=os.environ.get("QUIRE_PLACEMENT", "127.0.0.1:7002"))
    parser.add_argument("--tls-ca", default=os.environ.get("QUIRE_CLIENT_TLS_CA", ""), help="CA file: use TLS")
    parser.add_argument("--tls-cert", default=os.environ.get("QUIRE_CLIENT_TLS_CERT", ""), help="client certificate")
    parser.add_argument("--tls-key", default=os.environ.get("QUIRE_CLIENT_TLS_KEY", ""), help="client key")
    parser.add_argument("--token", default=os.environ.get("QUIRE_CLIENT_TOKEN", ""), help="bearer token (JWT)")
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
        ("info", cmd_ledger_info, "print a ledger's metadata"),
    ):
        command = ledger.add_parser(name, help=text)
        command.add_argument("ledger")
        command.set_defaults(func=func)
    delete = ledger.add_parser("delete", help="delete a ledger and its entries (needs --force)")
    delete.add_argument("ledger")
    delete.add_argument("--force", action="store_true", help="really delete: there is no undo")
    delete.set_defaults(func=cmd_ledger_delete)

    listing = ledger.add_parser("list", help="list ledgers (every scope, or one with --scope)")
    listing.add_argument("--scope", type=int, default=None)
    _add_output(listing)
    listing.set_defaults(func=cmd_ledger_list)

    meta = ledger.add_parser("meta", help="print a ledger's metadata record and version")
    meta.add_argument("ledger")
    _add_output(meta)
    meta.set_defaults(func=cmd_ledger_meta)

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
    certs = dev.add_parser("certs", help="write a throwaway CA, service and client certificates, and a token secret")
    certs.add_argument("--out", default="certs")
    certs.add_argument(
        "--kubernetes-namespace",
        default=None,
        help="also write the Secrets deploy/kubernetes mounts, for a cluster in this namespace (OUT/kubernetes/)",
    )
    certs.set_defaults(func=cmd_dev_certs)
    token = dev.add_parser("token", help="print a bearer token signed with a `dev certs` secret")
    token.add_argument("--certs", default="certs", help="the `quire dev certs` directory")
    token.add_argument("--subject", default="dev")
    token.add_argument("--role", action="append", default=[], help="[SCOPE=]reader|writer|admin (repeatable)")
    token.add_argument("--ttl-seconds", type=float, default=3600.0)
    token.set_defaults(func=cmd_dev_token)

    bookie = areas.add_parser("bookie", help="bookies").add_subparsers(dest="command", required=True)
    bookie_list = bookie.add_parser("list", help="list registered bookies")
    bookie_list.add_argument("--state", choices=sorted(BOOKIE_STATES), default="all")
    _add_output(bookie_list)
    bookie_list.set_defaults(func=cmd_bookie_list)
    endpoints = bookie.add_parser("endpoints", help="a bookie's registered info and the address it resolves to")
    endpoints.add_argument("bookie_id")
    _add_output(endpoints)
    endpoints.set_defaults(func=cmd_bookie_endpoints)

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

    decommission = bookie.add_parser(
        "decommission", help="wait until a stopped bookie's replicas are re-replicated elsewhere"
    )
    decommission.add_argument("bookie_id")
    decommission.add_argument("--timeout", type=float, default=600.0, help="seconds to wait (default 600)")
    decommission.set_defaults(func=cmd_bookie_decommission)

    recovery = areas.add_parser("recovery", help="re-replication").add_subparsers(dest="command", required=True)
    recovery_status = recovery.add_parser("status", help="ledger segments with replicas on missing bookies")
    _add_output(recovery_status)
    recovery_status.set_defaults(func=cmd_recovery_status)

    bookieinfo = areas.add_parser("bookieinfo", help="free and total disk space of every bookie, and the totals")
    _add_output(bookieinfo)
    bookieinfo.set_defaults(func=cmd_bookieinfo)

    placement = areas.add_parser("placement", help="placement").add_subparsers(dest="command", required=True)
    weights = placement.add_parser("weights", help="how placement weighs each writable bookie (BP-2)")
    _add_output(weights)
    weights.set_defaults(func=cmd_placement_weights)

    cluster = areas.add_parser("cluster", help="local clusters").add_subparsers(dest="command", required=True)
    up = cluster.add_parser("up", help="start etcd and every service locally until Ctrl-C")
    up.add_argument("--data-dir", default=os.environ.get("QUIRE_DATA_DIR", "data"))
    up.add_argument("--bookies", type=int, default=3)
    up.add_argument(
        "--gateways",
        type=_positive_int,
        default=1,
        help="gateways to start; above 1 they listen on 7010, 7011, ... and HAProxy balances the gateway port "
        "over them, round robin",
    )
    up.add_argument("--tls", default=None, help="a `quire dev certs` directory: mutual TLS and authentication")
    up.set_defaults(func=cmd_cluster_up)
    bench.add_parser(areas)
    _add_telemetry_parser(areas)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
    except QuireClientError as exc:
        return _fail(args, exc.code.name, exc.reason, exc.message)
    except QuireError as exc:
        return _fail(args, exc.code, exc.reason if exc.reason != "ERROR_REASON_UNSPECIFIED" else "", exc.message)
    except ClusterError as exc:
        return _fail(args, "UNAVAILABLE", "", str(exc))
    except BrokenPipeError:
        return 0
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
