"""`quire dev`, `quire bench` and `quire telemetry` argument handling (nothing is started)."""

from __future__ import annotations

import argparse

import jwt

from quire_client import bench as gateway_bench
from quire_client import bench_bookie


def test_dev_certs_then_a_token_with_roles(run, tmp_path):
    certs = tmp_path / "certs"
    written = run("dev", "certs", "--out", str(certs))
    assert written.exit_code == 0 and "quire cluster up --tls" in written.stdout
    token = run("dev", "token", "--certs", str(certs), "--role", "7=writer", "--role", "reader").stdout.strip()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == "dev"


def test_bench_passes_lists_and_the_gateway_and_counts_runs(run, monkeypatch):
    seen: list[argparse.Namespace] = []

    def fake_main(args: argparse.Namespace, on_run) -> None:  # type: ignore[no-untyped-def]
        seen.append(args)
        for _ in range(gateway_bench.run_count(args)):
            on_run()

    monkeypatch.setattr(gateway_bench, "main", fake_main)
    result = run("--gateway", "gw:1", "bench", "--writers", "1,4", "--sizes", "1024", "--quorum", "3,2,2")
    assert result.exit_code == 0, result.stderr
    args = seen[0]
    assert (args.gateway, args.writers, args.sizes, args.closed_rpc) == ("gw:1", [1, 4], [1024], ["stream", "unary"])
    assert gateway_bench.run_count(args) == 2 + 1 + 2 * 2  # batched, paced, one-entry-per-request
    assert run("bench", "--writers", "one").exit_code == 2
    assert run("bench", "--closed-rpc", "carrier-pigeon").exit_code == 2
    assert run("bench", "--quorum", "3,2").exit_code == 2


def test_bench_bookie_is_a_subcommand(run, monkeypatch):
    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(bench_bookie, "main", seen.append)
    assert run("bench", "bookie", "--sizes", "1024", "--target", "127.0.0.1:3181").exit_code == 0
    assert seen[0].sizes == "1024" and seen[0].target == "127.0.0.1:3181"


def test_telemetry_analyze_names_the_bad_setting(run, tmp_path):
    missing = run("telemetry", "analyze", "--input", str(tmp_path / "none"), "--output", str(tmp_path / "out"))
    assert missing.exit_code == 2 and "--input" in missing.stderr
    (tmp_path / "in").mkdir()
    window = run(
        "telemetry", "analyze", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "o"), "--window", "x"
    )
    assert window.exit_code == 2 and "--window" in window.stderr
