"""`quire ledger ...` with a fake client: the output formats scripts parse."""

from __future__ import annotations

import base64
import json

import grpc
import yaml

from quire_api.ids import LedgerId
from quire_client.client import QuireClientError

LEDGER = LedgerId(7, 42).qualified_name


def test_create_prints_the_id_alone_or_a_document(run, fake):
    created = run("ledger", "create", "--id", "7:42")
    assert created.exit_code == 0 and created.stdout == LEDGER + "\n"
    assert json.loads(run("ledger", "create", "--id", "7:43", "-o", "json").stdout) == {
        "ledger": LedgerId(7, 43).qualified_name
    }


def test_create_refuses_two_ways_of_choosing_the_id(run, fake):
    refused = run("ledger", "create", "--id", "7:42", "--scope", "7")
    assert refused.exit_code == 2 and "exclude each other" in refused.stderr
    assert fake.calls == []


def test_append_from_arguments_stdin_and_count(run, fake):
    run("ledger", "create", "--id", "7:42")
    assert run("ledger", "append", LEDGER, "hello", "world").stdout == "last entry id 1\n"
    assert run("ledger", "append", LEDGER, input="from\nstdin\n").stdout == "last entry id 3\n"
    generated = run("ledger", "append", LEDGER, "--count", "3", "--size", "5", "-o", "yaml")
    assert yaml.safe_load(generated.stdout) == {"last_entry_id": 6}
    assert fake.ledgers[LedgerId(7, 42)][2:5] == [b"from", b"stdin", b"entry"]


def test_progress_goes_to_stderr_only_when_asked(run, fake):
    run("ledger", "create", "--id", "7:42")
    quiet = run("ledger", "append", LEDGER, "--count", "50")
    assert quiet.stderr == ""  # not a terminal: no progress by default
    shown = run("--progress", "ledger", "append", LEDGER, "--count", "50")
    assert shown.stdout == "last entry id 99\n" and "appending" in shown.stderr


def test_read_prints_id_tab_payload(run, fake):
    run("ledger", "create", "--id", "7:42")
    run("ledger", "append", LEDGER, "a", "b", "c")
    assert run("ledger", "read", LEDGER, "--from", "1").stdout.splitlines() == ["1\tb", "2\tc"]


def test_list_and_meta_in_table_json_and_yaml(run, fake):
    run("ledger", "create", "--id", "7:42")
    table = run("ledger", "list").stdout.splitlines()
    assert table[0].split() == ["LEDGER", "STATE", "E/W/A", "LAST", "ENTRY"] and LEDGER in table[1]
    assert [m["ledger"] for m in json.loads(run("ledger", "list", "-o", "json").stdout)] == [LEDGER]
    meta = yaml.safe_load(run("ledger", "meta", LEDGER, "-o", "yaml").stdout)
    assert meta["ledger"] == LEDGER and meta["version"] == 4
    assert "FROM ENTRY" in run("ledger", "meta", LEDGER).stdout
    info = json.loads(run("ledger", "info", LEDGER).stdout)  # info defaults to JSON
    assert info["last_add_confirmed"] == -1


def test_delete_needs_force(run, fake):
    run("ledger", "create", "--id", "7:42")
    refused = run("ledger", "delete", LEDGER)
    assert refused.exit_code == 2 and "--force" in refused.stderr and fake.ledgers
    assert run("ledger", "delete", LEDGER, "--force").stdout == f"deleted {LEDGER}\n" and not fake.ledgers


def test_server_errors_exit_1_with_code_and_reason(run, fake):
    missing = run("ledger", "meta", LEDGER, "-o", "json")
    assert missing.exit_code == 1
    assert "error: NOT_FOUND [LEDGER_NOT_FOUND]" in missing.stderr
    assert json.loads(missing.stdout)["error"]["code"] == "NOT_FOUND"
    malformed = run("ledger", "read", "nonsense")  # refused by the client itself: nothing was sent
    assert malformed.exit_code == 2 and "INVALID_ARGUMENT" in malformed.stderr


def test_an_unreachable_service_exits_3(run, fake):
    fake.fail = QuireClientError(grpc.StatusCode.UNAVAILABLE, "", "failed to connect to 127.0.0.1:1")
    listed = run("ledger", "list", "-o", "yaml")
    assert listed.exit_code == 3 and "UNAVAILABLE" in listed.stderr and "127.0.0.1:1" in listed.stderr
    assert yaml.safe_load(listed.stdout)["error"]["code"] == "UNAVAILABLE"


def test_bad_arguments_exit_2_before_any_call(run, fake):
    for args in (["ledger", "read"], ["ledger", "read", LEDGER, "--from", "abc"], ["ledger", "list", "-o", "xml"]):
        result = run(*args)
        assert result.exit_code == 2, args
    assert fake.calls == []


def test_read_and_tail_print_json_lines_or_the_exact_bytes(run, fake):
    payloads = [b"line\n", b"\x00\xff binary", b"", "caf\u00e9".encode()]
    fake.ledgers[LedgerId(7, 42)] = list(payloads)
    for command in ("read", "tail"):
        lines = run("ledger", command, LEDGER, "-o", "json").stdout.splitlines()
        decoded = [json.loads(line) for line in lines]
        assert [d["entry_id"] for d in decoded] == [0, 1, 2, 3]
        assert [base64.b64decode(d["payload"]) for d in decoded] == payloads
        raw = run("ledger", command, LEDGER, "-o", "raw")
        assert raw.exit_code == 0 and raw.stdout_bytes == b"".join(payloads)
    one = run("ledger", "read", LEDGER, "--from", "1", "--to", "1", "-o", "raw")
    assert one.stdout_bytes == b"\x00\xff binary"


def test_a_read_error_with_json_lines_is_one_more_line(run, fake):
    fake.fail = QuireClientError(grpc.StatusCode.NOT_FOUND, "ERROR_REASON_LEDGER_NOT_FOUND", "no ledger")
    failed = run("ledger", "read", LEDGER, "-o", "json")
    assert failed.exit_code == 1 and len(failed.stdout.splitlines()) == 1
    assert json.loads(failed.stdout)["error"]["code"] == "NOT_FOUND"
    raw = run("ledger", "read", LEDGER, "-o", "raw")
    assert raw.exit_code == 1 and raw.stdout_bytes == b"" and "NOT_FOUND" in raw.stderr
