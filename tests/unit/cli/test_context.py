"""`quire context ...`: named settings under the configuration directory, and their precedence."""

from __future__ import annotations

import json
import stat

from quire_client.cli.common import Globals

PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_add_use_ls_show_rm(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ca.pem").write_text(PEM_CERTIFICATE)
    added = run("context", "add", "prod", "--gateway", "gw.prod:7000", "--token", "secret", "--tls-ca", "ca.pem")
    assert added.exit_code == 0
    stored = tmp_path / "config" / "contexts" / "prod.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text())["tls_ca"] == str(tmp_path / "ca.pem")  # stored absolute
    run("context", "add", "dev", "--gateway", "127.0.0.1:7000")
    assert run("context", "use", "prod").exit_code == 0
    listed = json.loads(run("context", "ls", "-o", "json").stdout)
    assert [(c["name"], c["selected"]) for c in listed] == [("dev", False), ("prod", True)]
    shown = json.loads(run("context", "show", "-o", "json").stdout)
    assert shown["gateway"] == "gw.prod:7000" and shown["token"] == "***"
    assert run("context", "rm", "prod").exit_code == 0
    assert run("context", "show").exit_code == 2  # nothing selected any more
    assert run("context", "use", "prod").exit_code == 2


def test_bad_names_and_files_are_usage_errors(run, tmp_path):
    assert run("context", "add", "../escape").exit_code == 2
    (tmp_path / "config" / "contexts").mkdir(parents=True)
    (tmp_path / "config" / "contexts" / "broken.json").write_text("{not json")
    broken = run("--context", "broken", "ledger", "list")
    assert broken.exit_code == 2 and "broken.json" in broken.stderr


def test_a_broken_selected_context_can_be_repaired_with_the_context_commands(run, tmp_path):
    run("context", "add", "gone", "--gateway", "x:1", "--select")
    (tmp_path / "config" / "contexts" / "gone.json").unlink()
    stopped = run("ledger", "list")
    assert stopped.exit_code == 2 and "no context named 'gone'" in stopped.stderr
    run("context", "add", "fresh", "--gateway", "y:1")
    assert run("context", "use", "fresh").exit_code == 0
    assert run("ledger", "list").exit_code == 0


def test_flag_beats_environment_beats_context_beats_default(run, fake, monkeypatch):
    seen: list[Globals] = []
    import click

    @click.command("probe")
    @click.pass_obj
    def probe(settings: Globals) -> None:
        seen.append(settings)

    from quire_client.cli import quire

    quire.add_command(probe)
    try:
        run("context", "add", "c1", "--gateway", "ctx:1", "--registry", "ctx:2", "--select")
        run("probe")
        # The context names no placement: it stays unset rather than 127.0.0.1.
        assert (seen[-1].gateway, seen[-1].registry, seen[-1].placement) == ("ctx:1", "ctx:2", "")
        assert seen[-1].sources["gateway"] == "context c1" and seen[-1].sources["placement"] == "the default"
        monkeypatch.setenv("QUIRE_GATEWAY", "env:1")
        run("probe")
        assert (seen[-1].gateway, seen[-1].registry) == ("env:1", "ctx:2")
        assert seen[-1].sources["gateway"] == "QUIRE_GATEWAY"
        run("--gateway", "flag:1", "probe")
        assert seen[-1].gateway == "flag:1" and seen[-1].sources["gateway"] == "--gateway"
        run("context", "add", "c2", "--registry", "other:2")
        run("--context", "c2", "probe")
        assert seen[-1].registry == "other:2"
    finally:
        quire.commands.pop("probe")
