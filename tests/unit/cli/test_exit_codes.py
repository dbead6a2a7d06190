"""Exit statuses (docs/cli.md): 2 refused before sending, 3 unreachable, 4 a
write whose outcome is unknown, 1 a refusal, also NOT_ENOUGH_BOOKIES; the
unreachable service named with where its address came from."""

from __future__ import annotations

import json
from collections.abc import Iterable

import grpc

from quire_api.ids import LedgerId
from quire_client.client import DeadlineExceededError, QuireClientError, UnavailableError

LEDGER = LedgerId(7, 42).qualified_name
NOT_CONNECTED = "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:7000: Connection refused"


def unavailable(message: str, reason: str = "") -> UnavailableError:
    return UnavailableError(grpc.StatusCode.UNAVAILABLE, reason, message)


def deadline() -> DeadlineExceededError:
    return DeadlineExceededError(grpc.StatusCode.DEADLINE_EXCEEDED, "", "Deadline Exceeded")


def test_input_refused_by_the_client_exits_2(run, fake):
    for args in (
        ["ledger", "meta", "nonsense"],
        ["ledger", "append", "nonsense", "x"],
        ["ledger", "read", "nonsense"],
    ):
        result = run(*args, "-o", "json")
        assert result.exit_code == 2, (args, result.stderr)
        assert json.loads(result.stdout)["error"]["code"] == "INVALID_ARGUMENT"


def test_a_read_that_gets_no_answer_exits_3_whatever_the_reason(run, fake):
    for error in (unavailable(NOT_CONNECTED), unavailable("Socket closed"), deadline()):
        fake.fail = error
        assert run("ledger", "list").exit_code == 3, error


def test_a_write_that_never_connected_exits_3_and_one_sent_without_answer_exits_4(run, fake):
    run("ledger", "create", "--id", "7:42")
    fake.fail = unavailable(NOT_CONNECTED)
    assert run("ledger", "create").exit_code == 3
    assert run("ledger", "close", LEDGER).exit_code == 3
    for error in (
        deadline(),
        unavailable("Socket closed"),
        unavailable("etcd is down", "ERROR_REASON_METADATA_STORE_UNAVAILABLE"),
    ):
        fake.fail = error
        for args in (["ledger", "create"], ["ledger", "append", LEDGER, "x"], ["ledger", "delete", LEDGER, "--force"]):
            result = run(*args)
            assert result.exit_code == 4, (args, error, result.stderr)


def test_an_append_whose_entries_left_exits_4_even_when_the_last_error_is_a_failed_connection(run, fake, monkeypatch):
    run("ledger", "create", "--id", "7:42")

    def append_all(ledger: str, payloads: Iterable[bytes], batch_size: int = 100) -> int:
        next(iter(payloads))  # one entry taken to send; then the gateway goes away for good
        raise unavailable(NOT_CONNECTED)

    monkeypatch.setattr(fake, "append_all", append_all)
    assert run("ledger", "append", LEDGER, "a", "b").exit_code == 4
    assert run("ledger", "append", LEDGER, input="a\nb\n").exit_code == 4


def test_not_enough_bookies_is_the_clusters_refusal_not_an_unreachable_service(run, fake):
    fake.fail = unavailable("3 bookies needed, 2 writable", "ERROR_REASON_NOT_ENOUGH_BOOKIES")
    refused = run("ledger", "create", "-o", "json")
    assert refused.exit_code == 1, refused.stderr
    assert json.loads(refused.stdout)["error"]["reason"] == "ERROR_REASON_NOT_ENOUGH_BOOKIES"


def test_an_unreachable_service_is_named_with_where_its_address_came_from(run, fake, monkeypatch):
    fake.fail = unavailable(NOT_CONNECTED)
    by_flag = run("--gateway", "gw.example:7000", "ledger", "list")
    assert by_flag.exit_code == 3
    assert "no answer from the gateway at gw.example:7000 (from --gateway)" in by_flag.stderr
    monkeypatch.setenv("QUIRE_REGISTRY", "reg.example:7001")
    by_env = run("--direct", "bookie", "list")
    assert "the registry at reg.example:7001 (from QUIRE_REGISTRY)" in by_env.stderr
    run("context", "add", "prod", "--gateway", "gw.prod:7000", "--registry", "reg.prod:7001")
    monkeypatch.delenv("QUIRE_REGISTRY")
    by_context = run("--context", "prod", "--direct", "recovery", "status")
    assert "no answer from the registry at reg.prod:7001 (from context prod)" in by_context.stderr
    through_gateway = run("--context", "prod", "recovery", "status")
    assert "no answer from the gateway at gw.prod:7000 (from context prod)" in through_gateway.stderr
    by_default = run("ledger", "list")
    assert "the gateway at 127.0.0.1:7000 (the default)" in by_default.stderr
    fake.fail = QuireClientError(grpc.StatusCode.NOT_FOUND, "ERROR_REASON_LEDGER_NOT_FOUND", "no ledger")
    assert "no answer" not in run("ledger", "meta", LEDGER).stderr  # an answer is not relabelled
