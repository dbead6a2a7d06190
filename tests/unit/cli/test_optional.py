"""Commands that need what a client-only install lacks exit 2 naming the package
(tests/e2e/test_client_only_install.py checks the same in a real client-only virtualenv)."""

from __future__ import annotations

import sys

import pytest

from quire_client.optional import MissingPackage, import_for


def test_import_for_names_the_distribution(monkeypatch):
    monkeypatch.setitem(sys.modules, "quire_bookie", None)  # as if the server package were not installed
    with pytest.raises(MissingPackage, match=r"`x` needs the quire package \(quire_bookie is not installed\)"):
        import_for("quire_bookie", "`x`", "quire")


def test_a_command_without_its_package_is_a_usage_error(run, monkeypatch, tmp_path):
    for module in ("quire_bookie", "quire_bookie.inspect", "quire_bookie.storage"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, "quire_client.devcerts", None)
    inspect = run("bookie", "inspect", "--data-dir", str(tmp_path))
    assert inspect.exit_code == 2 and "pip install 'quire-ledger'" in inspect.stderr
    certs = run("dev", "certs", "--out", str(tmp_path / "certs"))
    assert certs.exit_code == 2 and "pip install 'quire-ledger-client[certs]'" in certs.stderr
