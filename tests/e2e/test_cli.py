"""The `quire` command line against the running cluster."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from quire_client.cluster import free_port

pytestmark = pytest.mark.e2e


def quire(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`quire --gateway ... --registry ... --placement ... ARGS` as a process."""
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
    for args in (
        ("ledger", "read", "nonsense"),
        ("bookie", "endpoints", "readonly"),
        ("bookie", "endpoints", "bad/id"),
    ):
        malformed = quire(cluster, *args)  # refused by the client itself: nothing was sent
        assert malformed.returncode == 2 and "INVALID_ARGUMENT" in malformed.stderr, malformed.stderr
    for args, expected in (
        (("ledger", "create", "-e", "2", "-w", "3"), "INVALID_ARGUMENT [INVALID_QUORUM]"),
        (("ledger", "info", "00000000-0000-0000-0000-00000000beef"), "NOT_FOUND [LEDGER_NOT_FOUND]"),
        (("ledger", "meta", "00000000-0000-0000-0000-00000000beef"), "NOT_FOUND [LEDGER_NOT_FOUND]"),
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


def quire_alone(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """`quire ARGS` as a process, with only the settings given here."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("QUIRE_CLIENT_", "QUIRE_CONTEXT"))}
    clean = {k: v for k, v in clean.items() if k not in ("QUIRE_GATEWAY", "QUIRE_REGISTRY", "QUIRE_PLACEMENT")}
    return subprocess.run(
        [sys.executable, "-m", "quire_client.cli", *args], env={**clean, **(env or {})}, capture_output=True, timeout=60
    )


def test_read_and_tail_print_json_lines_and_exact_bytes(cluster, client):
    payloads = [b"line\n", bytes(range(256)), b"", "caf\u00e9".encode()]
    ledger = client.create_ledger()
    client.append_all(ledger.ledger_id.qualified_name, payloads)
    name = quire(cluster, "ledger", "read", ledger.ledger_id.qualified_name, "-o", "json")
    entries = [json.loads(line) for line in name.stdout.splitlines()]
    assert [base64.b64decode(e["payload"]) for e in entries] == payloads and [e["entry_id"] for e in entries] == [
        0,
        1,
        2,
        3,
    ]
    target = ["--gateway", cluster.gateway_target]
    raw = quire_alone(*target, "ledger", "read", ledger.ledger_id.qualified_name, "-o", "raw")
    assert raw.returncode == 0 and raw.stdout == b"".join(payloads), raw.stderr
    quire(cluster, "ledger", "close", ledger.ledger_id.qualified_name)
    tailed = quire_alone(*target, "ledger", "tail", ledger.ledger_id.qualified_name, "--from", "1", "-o", "raw")
    assert tailed.returncode == 0 and tailed.stdout == b"".join(payloads[1:]), tailed.stderr


def test_not_enough_bookies_exits_1_and_an_unreachable_gateway_3_named_with_its_source(cluster):
    refused = quire(cluster, "ledger", "create", "-e", "5", "-w", "5", "-a", "5")  # 3 bookies
    assert refused.returncode == 1 and "UNAVAILABLE [NOT_ENOUGH_BOOKIES]" in refused.stderr, refused.stderr
    closed = f"127.0.0.1:{free_port()}"
    for settings, env, source in (
        (["--gateway", closed], {}, "(from --gateway)"),
        ([], {"QUIRE_GATEWAY": closed}, "(from QUIRE_GATEWAY)"),
    ):
        for command in (["ledger", "list"], ["ledger", "create"]):  # a create never sent is no unknown outcome
            result = quire_alone(*settings, *command, env=env)
            stderr = result.stderr.decode()
            assert result.returncode == 3, stderr
            assert f"no answer from the gateway at {closed} {source}" in stderr and "Traceback" not in stderr


def test_a_gateway_only_context_runs_admin_commands_through_the_gateway_and_refuses_direct_ones(cluster, tmp_path):
    env = {"QUIRE_CONFIG_DIR": str(tmp_path / "config")}
    assert quire_alone("context", "add", "gw-only", "--gateway", cluster.gateway_target, env=env).returncode == 0
    assert quire_alone("--context", "gw-only", "ledger", "list", env=env).returncode == 0
    listed = quire_alone("--context", "gw-only", "bookie", "list", "-o", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert {r["bookie_id"] for r in json.loads(listed.stdout)} == {cluster.bookie_id(n) for n in cluster.bookie_names}
    # Break-glass: --direct needs the registry named, and never assumes 127.0.0.1 for it.
    refused = quire_alone("--context", "gw-only", "--direct", "bookie", "list", env=env)
    assert refused.returncode == 2 and b"needs the registry's address" in refused.stderr, refused.stderr

    full = ["--gateway", cluster.gateway_target, "--registry", cluster.registry_target]
    full += ["--placement", cluster.placement_target]
    assert quire_alone("context", "add", "full", *full, env=env).returncode == 0
    healthy = quire_alone("context", "check", "full", "-o", "json", env=env)
    assert healthy.returncode == 0, healthy.stderr
    states = {s["service"]: s["state"] for s in json.loads(healthy.stdout)["services"]}
    assert states == {"gateway": "ok", "registry": "ok", "placement": "ok"}
    partial = json.loads(quire_alone("context", "check", "gw-only", "-o", "json", env=env).stdout)
    assert [s["state"] for s in partial["services"]] == ["ok", "not set", "not set"]

    closed = f"127.0.0.1:{free_port()}"
    quire_alone("context", "add", "down", "--gateway", cluster.gateway_target, "--registry", closed, env=env)
    down = quire_alone("context", "check", "down", env=env)
    assert down.returncode == 3, down.stderr
    rows = {line.split()[0]: line.split()[2] for line in down.stdout.decode().splitlines()[1:]}
    assert rows["gateway"] == "ok" and rows["registry"] == "unreachable"


def test_tls_misuse_is_refused_with_exit_2_and_no_traceback(cluster, tmp_path):
    """Nothing here reaches a service: every one is refused before connecting."""
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    target = ["--gateway", cluster.gateway_target]
    for flags, named in (
        (["--tls-ca", str(tmp_path / "missing.pem")], b"no such file"),
        (["--token", "abc"], b"needs TLS"),
        (["--tls-cert", str(ca), "--tls-key", str(ca)], b"needs --tls-ca"),  # would otherwise go plaintext
    ):
        result = quire_alone(*target, *flags, "ledger", "list")
        assert result.returncode == 2 and named in result.stderr, (flags, result.stderr)
        assert b"Traceback" not in result.stderr
    env = {"QUIRE_CONFIG_DIR": str(tmp_path / "config")}
    refused = quire_alone("context", "add", "x", *target, "--tls-ca", str(tmp_path / "missing.pem"), env=env)
    assert refused.returncode == 2 and b"no such file" in refused.stderr
