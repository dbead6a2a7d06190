"""Test-only fault injection at the gRPC edge (the fault lab, docs/faults.md).

QUIRE_FAULT_INJECTION_RULES holds a JSON list of rules, for example
`[{"method": "FenceLedger", "action": "reject", "code": "UNAVAILABLE"}]`.
`method` matches the end of the full method name; `action` is `reject`
(abort with `code`), `drop` (never answer: the caller's deadline fires) or
`delay` (wait `delay_ms`, then serve). Production never sets the variable;
when it is set the server logs a loud warning at start.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc

from quire_common.config import ConfigError
from quire_common.handler_cache import HandlerWrapper

log = logging.getLogger(__name__)

FAULT_RULES_VARIABLE = "QUIRE_FAULT_INJECTION_RULES"
_ACTIONS = ("reject", "drop", "delay")


@dataclass(frozen=True)
class FaultRule:
    method: str
    action: str
    code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    delay_ms: int = 0

    def matches(self, full_method: str) -> bool:
        return full_method.endswith(self.method)


def parse_fault_rules(text: str) -> list[FaultRule]:
    """Rules from their JSON text; ConfigError naming the variable when invalid."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, list):
            raise ValueError("expected a JSON list of rules")
        rules = []
        for item in raw:
            action = str(item["action"])
            if action not in _ACTIONS:
                raise ValueError(f"unknown action {action!r} (one of {', '.join(_ACTIONS)})")
            rules.append(
                FaultRule(
                    method=str(item["method"]),
                    action=action,
                    code=grpc.StatusCode[str(item.get("code", "UNAVAILABLE"))],
                    delay_ms=int(item.get("delay_ms", 0)),
                )
            )
        return rules
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{FAULT_RULES_VARIABLE}: {exc}") from None


def fault_rules_from_settings(text: str) -> list[FaultRule]:
    """The rules QUIRE_FAULT_INJECTION_RULES holds (`text`), with a loud warning."""
    if not text:
        return []
    rules = parse_fault_rules(text)
    log.warning("FAULT INJECTION ENABLED (%s): %s; never set this in production", FAULT_RULES_VARIABLE, rules)
    return rules


async def _inject(rule: FaultRule, context: grpc.aio.ServicerContext) -> None:
    if rule.action == "reject":
        await context.abort(rule.code, f"injected fault: {rule.method} rejected")
    elif rule.action == "drop":
        await asyncio.Event().wait()  # never set: hangs until the caller gives up
    else:
        await asyncio.sleep(rule.delay_ms / 1000)


class FaultInjectionInterceptor(HandlerWrapper):
    def __init__(self, rules: list[FaultRule]) -> None:
        self.rules = rules

    def wrap(
        self, handler: grpc.RpcMethodHandler | None, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        rule = next((r for r in self.rules if r.matches(handler_call_details.method)), None)
        if handler is None or rule is None:
            return handler
        if handler.unary_unary or handler.stream_unary:
            inner_unary = handler.unary_unary or handler.stream_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                await _inject(rule, context)
                return await inner_unary(request, context)

            factory = (
                grpc.unary_unary_rpc_method_handler if handler.unary_unary else grpc.stream_unary_rpc_method_handler
            )
            return factory(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        inner_stream = handler.unary_stream or handler.stream_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await _inject(rule, context)
            async for response in inner_stream(request, context):
                yield response

        factory = (
            grpc.unary_stream_rpc_method_handler if handler.unary_stream else grpc.stream_stream_rpc_method_handler
        )
        return factory(
            stream, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
