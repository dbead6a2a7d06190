"""The root of `quire`: version, completion, help text, exit codes, `python -m`."""

from __future__ import annotations

import os
import subprocess
import sys

from quire_client.cli import main
from quire_client.cli.common import ExitCode


def test_version_and_completion(run):
    version = run("--version")
    assert version.exit_code == 0 and version.stdout.startswith("quire ")
    for shell in ("bash", "zsh", "fish"):
        script = run("completion", shell)
        assert script.exit_code == 0 and "_QUIRE_COMPLETE" in script.stdout
    assert run("completion", "tcsh").exit_code == 2


def test_help_shows_exit_codes_examples_defaults_and_environment(run):
    root = run("--help").stdout
    assert "Exit status:" in root and "3    unavailable" in root and "Examples:" in root
    assert "QUIRE_GATEWAY" in root and "127.0.0.1:7000" in root
    create = run("ledger", "create", "--help").stdout
    assert "QUIRE_CLI_LEDGER_CREATE_ENSEMBLE" in create and "default: 3" in create
    up = run("cluster", "up", "--help").stdout
    assert "QUIRE_DATA_DIR" in up and "--gateways" in up and "--tls" in up


def test_main_returns_the_status_and_reports_usage_on_stderr(capsys):
    assert main([]) == ExitCode.USAGE
    assert "Usage:" in capsys.readouterr().err
    assert main(["ledger", "frobnicate"]) == ExitCode.USAGE
    assert main(["cluster", "up", "--gateways", "0"]) == ExitCode.USAGE
    assert "--gateways" in capsys.readouterr().err


def test_python_dash_m_runs_the_same_command_line():
    result = subprocess.run(
        [sys.executable, "-m", "quire_client.cli", "--version"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.startswith("quire ")


def test_completion_offers_commands_and_choices():
    def complete(words: str, index: int) -> list[str]:
        env = {**os.environ, "_QUIRE_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(index)}
        result = subprocess.run(
            [sys.executable, "-m", "quire_client.cli"], env=env, capture_output=True, text=True, timeout=120
        )
        return [line.split(",", 1)[1] for line in result.stdout.splitlines()]

    assert complete("quire led", 1) == ["ledger"]
    assert complete("quire ledger list -o ", 4) == ["table", "json", "yaml"]
