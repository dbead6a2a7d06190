"""The `quire` command line against the running cluster."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def quire(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "quire_client.cli",
            "--gateway",
            cluster.gateway_target,
            "--registry",
            cluster.registry_target,
            "--placement",
            cluster.placement_target,
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_first_ledger_walkthrough(cluster):
    created = quire(cluster, "ledger", "create", "-e", "3", "-w", "2", "-a", "2")
    assert created.returncode == 0, created.stderr
    ledger = created.stdout.strip()
    assert len(ledger) == 36 and ledger.count("-") == 4

    assert quire(cluster, "ledger", "append", ledger, "hello", "world").stdout.strip() == "last entry id 1"
    assert quire(cluster, "ledger", "append", ledger, stdin="from\nstdin\n").stdout.strip() == "last entry id 3"
    read = quire(cluster, "ledger", "read", ledger)
    assert read.stdout.splitlines() == ["0\thello", "1\tworld", "2\tfrom", "3\tstdin"]
    assert ledger in quire(cluster, "ledger", "list").stdout
    assert '"last_add_confirmed": 3' in quire(cluster, "ledger", "info", ledger).stdout
    assert "at entry 3" in quire(cluster, "ledger", "close", ledger).stdout
    assert quire(cluster, "ledger", "delete", ledger, "--force").returncode == 0


def test_metadata_and_bookie_commands_in_table_and_json(cluster):
    ledger = quire(cluster, "ledger", "create", "--id", "7:42").stdout.strip()
    assert ledger == "00000000-0000-0007-0000-00000000002a"

    table = quire(cluster, "ledger", "meta", ledger).stdout
    assert "OPEN" in table and "FROM ENTRY" in table
    meta = json.loads(quire(cluster, "ledger", "meta", ledger, "-o", "json").stdout)
    assert meta["ledger"] == ledger and meta["version"] > 0 and "password" not in meta
    assert len(meta["ensembles"][0]["bookie_ids"]) == 3

    listed = json.loads(quire(cluster, "ledger", "list", "--scope", "7", "-o", "json").stdout)
    assert [item["ledger"] for item in listed] == [ledger]
    assert quire(cluster, "ledger", "list", "--scope", "8", "-o", "json").stdout.strip() == "[]"

    bookies = quire(cluster, "bookie", "list").stdout.splitlines()
    assert bookies[0].split() == ["BOOKIE", "STATE", "ENDPOINTS", "PROPERTIES"] and len(bookies) == 4
    records = json.loads(quire(cluster, "bookie", "list", "--state", "rw", "-o", "json").stdout)
    assert sorted(r["bookie_id"] for r in records) == sorted(cluster.bookie_id(n) for n in cluster.bookie_names)
    assert json.loads(quire(cluster, "bookie", "list", "--state", "ro", "-o", "json").stdout) == []

    bookie_id = records[0]["bookie_id"]
    shown = json.loads(quire(cluster, "bookie", "endpoints", bookie_id, "-o", "json").stdout)
    assert shown["resolved_address"] == bookie_id  # local bookies listen where their id says
    assert shown["record"]["service_info"]["endpoints"][0]["protocol"] == "bookie-rpc"
    assert "resolves   bookie-rpc" in quire(cluster, "bookie", "endpoints", bookie_id).stdout
    assert quire(cluster, "ledger", "delete", ledger, "--force").returncode == 0


def test_bookieinfo_and_placement_weights(cluster):
    table = quire(cluster, "bookieinfo").stdout.splitlines()
    assert table[0] == "Free disk space info:" and len(table) == 1 + 3 + 2
    assert table[-2].startswith("Total free disk space in the cluster:")
    report = json.loads(quire(cluster, "bookieinfo", "-o", "json").stdout)
    assert len(report["bookies"]) == 3 and report["unreachable"] == {}
    assert report["cluster"]["total_bytes"] == sum(b["total_bytes"] for b in report["bookies"].values())

    weights = json.loads(quire(cluster, "placement", "weights", "-o", "json").stdout)
    assert weights["policy"] == "default"
    polled = {b["bookie_id"] for b in weights.get("bookies", [])} | set(weights.get("unknown_bookie_ids", []))
    assert polled == set(report["bookies"])
    assert "P(FIRST)" in quire(cluster, "placement", "weights").stdout


def test_errors_are_one_line_with_code_and_no_traceback(cluster):
    for args, expected in (
        (("ledger", "read", "nonsense"), "INVALID_ARGUMENT"),
        (("ledger", "create", "-e", "2", "-w", "3"), "INVALID_ARGUMENT [INVALID_QUORUM]"),
        (("ledger", "info", "00000000-0000-0000-0000-00000000beef"), "NOT_FOUND [LEDGER_NOT_FOUND]"),
        (("ledger", "meta", "00000000-0000-0000-0000-00000000beef"), "NOT_FOUND [LEDGER_NOT_FOUND]"),
        (("bookie", "endpoints", "readonly"), "INVALID_ARGUMENT"),
        (("bookie", "endpoints", "bad/id"), "INVALID_ARGUMENT"),
        (("bookie", "endpoints", "never-registered"), "NOT_FOUND [BOOKIE_NOT_FOUND]"),
    ):
        result = quire(cluster, *args)
        assert result.returncode == 1
        assert expected in result.stderr and "Traceback" not in result.stderr


def test_recover_tail_blob_and_smoke_commands(cluster, tmp_path):
    ledger = quire(cluster, "ledger", "create", "--password", "pw").stdout.strip()
    quire(cluster, "ledger", "append", ledger, "a", "b", "c")
    unconfirmed = quire(cluster, "ledger", "read", ledger, "--from", "1", "--to", "2", "--unconfirmed")
    assert unconfirmed.stdout.splitlines() == ["1\tb", "2\tc"], unconfirmed.stderr
    wrong = quire(cluster, "ledger", "recover", ledger, "--password", "nope")
    assert wrong.returncode == 1 and "PERMISSION_DENIED" in wrong.stderr
    read = quire(cluster, "ledger", "read", ledger, "--recover", "--password", "pw", "--from", "1")
    assert read.stdout.splitlines() == ["1\tb", "2\tc"], read.stderr
    recovered = quire(cluster, "ledger", "recover", ledger, "--password", "pw")
    assert "closed at entry 2" in recovered.stdout, recovered.stderr
    tail = quire(cluster, "ledger", "tail", ledger)  # closed: prints everything, then ends
    assert tail.stdout.splitlines() == ["0\ta", "1\tb", "2\tc"], tail.stderr
    past = quire(cluster, "ledger", "read", ledger, "--from", "0", "--to", "3")
    assert past.returncode == 1 and "OUT_OF_RANGE" in past.stderr

    source = tmp_path / "blob.bin"
    source.write_bytes(bytes(range(256)) * 9000)
    blob_id = quire(cluster, "blob", "put", str(source)).stdout.strip()
    assert blob_id
    target = tmp_path / "back.bin"
    got = quire(cluster, "blob", "get", blob_id, str(target))
    assert got.returncode == 0, got.stderr
    assert target.read_bytes() == source.read_bytes()

    smoke = quire(cluster, "dev", "smoke", "--entries", "50")
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert "p50" in smoke.stdout and "p99" in smoke.stdout and "smoke: OK" in smoke.stdout
