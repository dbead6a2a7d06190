"""The services' logging: gRPC's record of an answer it could not send to a
call that had ended is one INFO line, not an ERROR with a traceback; gRPC's
other errors keep theirs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from quire_common.logs import AnswerAfterTheCallEnded, setup_logging
from quire_common.settings import LogEnv

GRPC_LOGGER = logging.getLogger(AnswerAfterTheCallEnded.GRPC_LOGGER)


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level, filters = root.handlers[:], root.level, GRPC_LOGGER.filters[:]
    try:
        yield
    finally:
        root.handlers[:], GRPC_LOGGER.filters[:] = handlers, filters
        root.setLevel(level)


def logged_by_grpc(message: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    """`message` logged as grpc.aio logs a servicer's failure (an exception
    record inside its except block); the JSON lines that came out."""
    try:
        raise RuntimeError('Failed "execute_batch"')
    except RuntimeError:
        GRPC_LOGGER.exception(message)
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


def test_an_answer_to_a_call_that_had_ended_is_one_info_line(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("gateway", LogEnv(level="INFO"))
    lines = logged_by_grpc(
        "ExecuteBatchError raised in core by servicer method [/quire.gateway.v1.LedgerService/ReadEntries]", capsys
    )
    assert len(lines) == 1
    assert lines[0]["level"] == "INFO"
    assert "exc" not in lines[0]
    assert lines[0]["msg"] == (
        "/quire.gateway.v1.LedgerService/ReadEntries: the call ended before its answer was sent "
        "(its deadline passed or its connection closed)"
    )


def test_above_info_the_line_is_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("gateway", LogEnv(level="WARNING"))
    assert logged_by_grpc("ExecuteBatchError raised in core by servicer method [/x.v1.S/M]", capsys) == []


def test_grpcs_other_errors_keep_their_level_and_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("gateway", LogEnv(level="INFO"))
    setup_logging("gateway", LogEnv(level="INFO"))  # configured twice: still one filter
    assert sum(isinstance(f, AnswerAfterTheCallEnded) for f in GRPC_LOGGER.filters) == 1
    (line,) = logged_by_grpc("Unexpected [RuntimeError] raised by servicer method [/x.v1.S/M]", capsys)
    assert line["level"] == "ERROR"
    assert "RuntimeError" in str(line["exc"])
