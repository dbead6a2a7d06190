"""docs/api.md's error lists are checked against docs/errors.md and the retry table in code."""

import importlib.util
import pathlib

import pytest

from quire_api.errors import RETRY_DELAYS

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gen_api_docs.py"


def generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_api_docs", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_listed_error_is_a_row_of_errors_md_and_the_retry_tables_agree():
    gen = generator()
    pairs, retries = gen.documented_errors()
    assert ("OUT_OF_RANGE", "READ_BEYOND_LAC") in pairs and ("NOT_FOUND", "LEDGER_NOT_FOUND") in pairs
    assert retries == dict(RETRY_DELAYS)


def test_an_error_missing_from_errors_md_stops_the_rendering(monkeypatch: pytest.MonkeyPatch):
    gen = generator()
    monkeypatch.setitem(gen.CALL_ERRORS, "quire.gateway.v1.LedgerService.AddEntry", [("NOT_FOUND", "LEDGER_FENCED")])
    with pytest.raises(SystemExit, match="NOT_FOUND ERROR_REASON_LEDGER_FENCED is not a row"):
        gen.check_against_errors_doc({"ERROR_REASON_" + r for _, r in gen.EVERY_CALL} | {"ERROR_REASON_LEDGER_FENCED"})
    monkeypatch.setitem(gen.RETRY_DELAYS, "ERROR_REASON_ENTRY_TOO_LARGE", 1.0)
    with pytest.raises(SystemExit, match="retry table"):
        gen.check_against_errors_doc(set())
