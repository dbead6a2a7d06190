"""Connection settings refused before anything is sent (exit 2, naming the
setting and where it came from), and addresses that never fall back to
127.0.0.1 once another one is given."""

from __future__ import annotations

import json

import pytest

PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


@pytest.fixture
def pem(tmp_path):  # type: ignore[no-untyped-def]
    (tmp_path / "ca.pem").write_text(PEM_CERTIFICATE)
    (tmp_path / "me.pem").write_text(PEM_CERTIFICATE)
    (tmp_path / "me-key.pem").write_text(PEM_KEY)
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    return tmp_path


def test_unusable_tls_settings_exit_2_naming_them_and_nothing_is_sent(run, fake, pem):
    missing = str(pem / "missing.pem")
    cases = [
        (["--tls-ca", missing], ["--tls-ca", missing, "no such file", "from --tls-ca"]),
        (["--tls-ca", str(pem)], ["--tls-ca", "is a directory"]),
        (["--tls-ca", str(pem / "junk.pem")], ["holds no PEM certificate"]),
        (["--token", "secret"], ["--token ***", "needs TLS", "never sent in plaintext"]),
        (["--tls-cert", str(pem / "me.pem"), "--tls-key", str(pem / "me-key.pem")], ["--tls-cert", "needs --tls-ca"]),
        (["--tls-ca", str(pem / "ca.pem"), "--tls-cert", str(pem / "me.pem")], ["needs --tls-key too"]),
        (["--tls-ca", str(pem / "ca.pem"), "--tls-cert", str(pem / "me.pem"), "--tls-key", missing], ["--tls-key"]),
        (["--gateway", "nohost"], ["--gateway nohost", "expected HOST:PORT"]),
        (["--gateway", "gw:99999"], ["port '99999'"]),
    ]
    for flags, named in cases:
        result = run(*flags, "ledger", "list", "-o", "json")
        assert result.exit_code == 2, (flags, result.stderr)
        assert all(text in result.stderr for text in named), (flags, result.stderr)
        assert "Traceback" not in result.stderr
    assert fake.calls == []
    good = ["--tls-ca", str(pem / "ca.pem"), "--tls-cert", str(pem / "me.pem"), "--tls-key", str(pem / "me-key.pem")]
    assert run(*good, "--token", "t", "ledger", "list").exit_code == 0


def test_a_setting_from_the_environment_or_a_context_is_named_with_its_source(run, fake, pem, monkeypatch):
    monkeypatch.setenv("QUIRE_CLIENT_TLS_CA", str(pem / "gone.pem"))
    from_env = run("ledger", "list")
    assert from_env.exit_code == 2 and "from QUIRE_CLIENT_TLS_CA" in from_env.stderr
    monkeypatch.delenv("QUIRE_CLIENT_TLS_CA")
    assert run("context", "add", "prod", "--gateway", "gw:7000", "--tls-ca", str(pem / "ca.pem")).exit_code == 0
    (pem / "ca.pem").unlink()  # removed after the context was written
    from_context = run("--context", "prod", "ledger", "list")
    assert from_context.exit_code == 2 and "from context prod" in from_context.stderr
    assert "no such file" in from_context.stderr and fake.calls == []


def test_context_add_refuses_what_could_not_connect(run, pem, tmp_path):
    for flags in (
        ["--tls-ca", str(pem / "missing.pem")],
        ["--tls-cert", str(pem / "me.pem"), "--tls-key", str(pem / "me-key.pem")],  # no CA: would be plaintext
        ["--token", "secret"],
        ["--tls-ca", str(pem / "junk.pem")],
        ["--registry", "no-port"],
    ):
        refused = run("context", "add", "bad", "--gateway", "gw:7000", *flags)
        assert refused.exit_code == 2, (flags, refused.stderr)
        assert "quire context add" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "config" / "contexts" / "bad.json").exists()


def test_context_check_refuses_a_context_whose_files_are_gone(run, pem):
    run("context", "add", "prod", "--gateway", "gw:7000", "--tls-ca", str(pem / "ca.pem"), "--select")
    (pem / "ca.pem").unlink()
    checked = run("context", "check")
    assert checked.exit_code == 2 and "in context prod" in checked.stderr and "no such file" in checked.stderr


def test_a_context_naming_only_the_gateway_never_reaches_127_0_0_1_for_the_rest(run, fake):
    run("context", "add", "prod", "--gateway", "gw.prod:7000", "--select")
    assert run("ledger", "list").exit_code == 0  # the gateway is all the ledger commands need
    for args in (["bookie", "list"], ["recovery", "status"]):
        assert run(*args).exit_code == 0  # and the admin commands: the gateway's admin API
    # Break-glass: the direct path needs the registry and placement named, never 127.0.0.1.
    calls_before = len(fake.calls)
    for args, service in ((["bookie", "list"], "registry"), (["placement", "weights"], "placement")):
        refused = run("--direct", *args)
        assert refused.exit_code == 2, refused.stderr
        assert f"needs the {service}'s address" in refused.stderr and "gateway (from context prod)" in refused.stderr
        assert f"--{service}" in refused.stderr
    assert len(fake.calls) == calls_before
    flag_only = run("--context", "prod", "--direct", "--registry", "reg:7001", "recovery", "status", "-o", "json")
    assert flag_only.exit_code == 0, flag_only.stderr  # the registry from a flag, the gateway from the context


def test_admin_commands_through_the_gateway_need_its_address(run, fake):
    refused = run("--registry", "reg:7001", "bookie", "list")
    assert refused.exit_code == 2 and "needs the gateway's address" in refused.stderr
    assert "list_bookies" not in fake.calls


def test_with_no_address_given_the_local_defaults_apply(run, fake):
    fake.bookies = ["127.0.0.1:3181"]
    listed = run("bookie", "list", "-o", "json")
    assert listed.exit_code == 0 and json.loads(listed.stdout)[0]["bookie_id"] == "127.0.0.1:3181"
