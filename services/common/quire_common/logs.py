"""Logging: JSON lines on stderr, each carrying the current trace and span ids."""

from __future__ import annotations

import json
import logging
import sys
import time

from opentelemetry import trace

from quire_common.settings import LogEnv


class JsonLineFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            line["trace_id"] = f"{context.trace_id:032x}"
            line["span_id"] = f"{context.span_id:016x}"
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


class AnswerAfterTheCallEnded(logging.Filter):
    """grpc.aio logs at ERROR, with a traceback, a call whose answer gRPC core
    would no longer send because the call had already ended: its deadline
    passed as the handler finished, or its connection closed (a caller that
    cancels, gRPC leaves out itself). Nothing failed on this side and the
    caller has its status, so the record becomes one INFO line naming the
    method."""

    GRPC_LOGGER = "grpc._cython.cygrpc"
    _PREFIX = "ExecuteBatchError raised in core by servicer method "

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if not message.startswith(self._PREFIX):
            return True
        method = message.removeprefix(self._PREFIX).strip("[]")
        record.msg, record.args = (
            "%s: the call ended before its answer was sent (its deadline passed or its connection closed)",
            (method,),
        )
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.exc_info = record.exc_text = None
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


_ANSWER_AFTER_THE_CALL_ENDED = AnswerAfterTheCallEnded()


def setup_logging(service: str, settings: LogEnv) -> None:
    """Configure the root logger once, at QUIRE_LOG_LEVEL."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level.upper())
    grpc_logger = logging.getLogger(AnswerAfterTheCallEnded.GRPC_LOGGER)
    if _ANSWER_AFTER_THE_CALL_ENDED not in grpc_logger.filters:
        grpc_logger.addFilter(_ANSWER_AFTER_THE_CALL_ENDED)
