"""`quire bookie ...` with a fake client."""

from __future__ import annotations

import json

from quire_api.ids import LedgerId


def test_list_in_table_and_json(run, fake):
    fake.bookies = ["127.0.0.1:3181", "127.0.0.1:3182"]
    table = run("bookie", "list").stdout.splitlines()
    assert table[0].split() == ["BOOKIE", "STATE", "ENDPOINTS", "PROPERTIES"] and len(table) == 3
    assert [r["bookie_id"] for r in json.loads(run("bookie", "list", "-o", "json").stdout)] == fake.bookies
    assert run("bookie", "list", "--state", "maybe").exit_code == 2


def test_decommission_refuses_a_registered_bookie(run, fake):
    fake.bookies = ["127.0.0.1:3181"]
    refused = run("bookie", "decommission", "127.0.0.1:3181", "--timeout", "0")
    assert refused.exit_code == 1 and "still registered" in refused.stderr
    assert "delete_cookie" not in fake.calls


def test_decommission_times_out_while_segments_remain_then_succeeds(run, fake):
    ledger = LedgerId(7, 1)
    fake.ledgers[ledger] = [b"x"]
    fake.lost = [(ledger.qualified_name, "127.0.0.1:3183")]
    waited = run("--progress", "bookie", "decommission", "127.0.0.1:3183", "--timeout", "0")
    assert waited.exit_code == 1 and ledger.qualified_name in waited.stderr and waited.stdout == ""
    fake.lost = []
    done = run("bookie", "decommission", "127.0.0.1:3183")
    assert done.exit_code == 0 and "its cookie removed" in done.stdout


def test_inspect_of_a_missing_directory_fails_with_one_line(run, tmp_path):
    result = run("bookie", "inspect", "--data-dir", str(tmp_path / "none"))
    assert result.exit_code == 1 and result.stderr.startswith("error:")
