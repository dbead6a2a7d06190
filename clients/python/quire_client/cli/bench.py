"""`quire bench` and `quire bench bookie`: throughput and latency (numbers are printed, never asserted)."""

from __future__ import annotations

import argparse

import click

from quire_client import bench as gateway_bench
from quire_client.cli.common import Globals, meter, option, pass_globals
from quire_client.optional import SERVER, import_for


class CommaList(click.ParamType):
    """`1024,65536`: a comma-separated list of values of one type."""

    name = "LIST"

    def __init__(self, item: type = int, choices: tuple[str, ...] = ()) -> None:
        self.item = item
        self.choices = choices

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> list[object]:
        if isinstance(value, list):
            return value
        items = [part.strip() for part in str(value).split(",") if part.strip()]
        try:
            converted = [self.item(part) for part in items]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of {self.item.__name__} values", param, ctx)
        if not converted:
            self.fail("an empty list", param, ctx)
        if self.choices and (unknown := [c for c in converted if c not in self.choices]):
            self.fail(f"{', '.join(map(str, unknown))}: not one of {', '.join(self.choices)}", param, ctx)
        return converted


@click.group(
    invoke_without_command=True,
    epilog="\b\nExamples:\n"
    "  quire bench --local --json build/bench.json\n"
    "  quire bench --quorum 3,2,2 --writers 16 --sizes 1024 --closed-seconds 0\n"
    "  quire bench bookie --sizes 1024 --writers 1,16",
)
@option("--local", is_flag=True, help="start a throwaway local cluster (3 bookies)")
@option("--json", "json_file", metavar="FILE", default=None, help="also write the results as JSON")
@option("--entries", type=int, default=32_000, help="entries per 1 KiB run (fewer for larger sizes)")
@option("--writers", type=CommaList(), default="1,16", help="concurrent writers per run, comma-separated")
@option("--sizes", type=CommaList(), default="1024,65536", help="entry sizes in bytes, comma-separated")
@option("--batch", type=int, default=100, help="most entries per stream message (0: skip the batched runs)")
@option("--quorum", default=None, help="one E,W,A (default: 3,3,2 and 3,2,2)")
@option("--paced-rate", type=float, default=500.0, help="entries/s of the latency run")
@option("--paced-entries", type=int, default=3000, help="entries of the latency run")
@option(
    "--closed-seconds",
    type=float,
    default=5.0,
    help="seconds of each one-entry-per-request run (writes, then as long for reads); 0 skips them",
)
@option(
    "--closed-rpc",
    type=CommaList(str, ("stream", "unary")),
    default="stream,unary",
    help="one-entry-per-request runs: AppendEntries with one entry per message, and/or unary AddEntry",
)
@click.pass_context
def bench(ctx: click.Context, json_file: str | None, **options: object) -> None:
    """Measure write and read throughput and add latency through the gateway.

    Results go to stdout, one line per run; progress goes to stderr."""
    if ctx.invoked_subcommand is not None:
        return
    settings = ctx.find_object(Globals) or Globals()
    args = argparse.Namespace(json=json_file, gateway=settings.gateway, registry=settings.registry, **options)
    try:
        runs = gateway_bench.run_count(args)
    except ValueError:
        raise click.BadParameter(f"{args.quorum!r} is not E,W,A", param_hint="'--quorum'") from None
    with meter("benchmark runs", total=runs) as progress:
        gateway_bench.main(args, on_run=progress.advance)


@bench.command()
@option("--sizes", default="1024,65536", help="entry payload sizes in bytes, comma-separated")
@option("--writers", default="1,16", help="concurrent writer counts, comma-separated")
@option(
    "--entries", type=int, default=4000, help="entries per case for small entries (x4 when batching; 1/8 above 4 KiB)"
)
@option("--batch", default="1,20", help="entries per AddEntries message, comma-separated (1 = one RPC per entry)")
@option("--max-delay-ms", type=int, default=0, help="the bookie's group-commit time bound")
@option("--target", default=None, help="measure a bookie already running at HOST:PORT instead of starting one")
@option("--ledger-scope", type=int, default=1000, help="scope of the benchmark's ledgers (vary it between runs)")
@pass_globals
def bookie(_settings: Globals, **options: object) -> None:
    """Durable adds/s through one bookie's gRPC API against the raw rocksdict limit.

    One standalone bookie process in a throwaway directory; for each entry size
    and writer count, every writer adds to its own ledger and waits for each
    synced acknowledgement. The raw limit is the same entries written straight
    to rocksdict as synced batches: what a perfect group commit could reach.
    Numbers are printed, never asserted. Needs the server package (quire)."""
    bench_bookie = import_for("quire_client.bench_bookie", "`quire bench bookie`", SERVER)
    bench_bookie.main(argparse.Namespace(**options))
