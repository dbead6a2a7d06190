"""Raw-channel fuzzing of every public and internal RPC: bytes that are not
what the method expects, sent without serializers (FAULTS BAD-7)."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.gateway.v1 import blob_pb2, ledger_pb2
from quire_proto.placement.v1 import placement_pb2
from quire_proto.registry.v1 import registry_pb2

# Codes that mean the server did not handle the input on purpose.
FORBIDDEN_CODES = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)


@dataclass(frozen=True)
class Method:
    service: str  # "gateway", "registry", "placement", "bookie"
    path: str  # /package.Service/Method
    client_streaming: bool
    server_streaming: bool
    request_type: type


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint encoding (to build raw, broken messages)."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def all_methods() -> list[Method]:
    methods = []
    for service, module in (
        ("gateway", ledger_pb2),
        ("gateway", blob_pb2),
        ("registry", registry_pb2),
        ("placement", placement_pb2),
        ("bookie", bookie_pb2),
    ):
        for descriptor in module.DESCRIPTOR.services_by_name.values():
            for method in descriptor.methods:
                request_type = getattr(module, method.input_type.name, None)
                if request_type is None:  # a request type from another file
                    from quire_proto.common.v1 import common_pb2

                    request_type = getattr(common_pb2, method.input_type.name)
                methods.append(
                    Method(
                        service,
                        f"/{descriptor.full_name}/{method.name}",
                        method.client_streaming,
                        method.server_streaming,
                        request_type,
                    )
                )
    return methods


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str


def call_raw(channel: grpc.Channel, method: Method, messages: list[bytes], timeout: float = 2.0) -> Outcome:
    """Send `messages` (one for a unary request) as they are; the status."""
    try:
        if method.client_streaming and method.server_streaming:
            for _ in channel.stream_stream(method.path)(iter(messages), timeout=timeout):
                pass
        elif method.client_streaming:
            channel.stream_unary(method.path)(iter(messages), timeout=timeout)
        elif method.server_streaming:
            for _ in channel.unary_stream(method.path)(messages[0], timeout=timeout):
                pass
        else:
            channel.unary_unary(method.path)(messages[0], timeout=timeout)
    except grpc.RpcError as exc:
        return Outcome(exc.code(), exc.details() or "")  # type: ignore[attr-defined]
    return Outcome(grpc.StatusCode.OK, "")


def check(outcome: Outcome, method: Method, messages: list[bytes]) -> None:
    sample = [m[:64].hex() for m in messages[:3]]
    assert outcome.code not in FORBIDDEN_CODES, (
        f"{method.path} answered {outcome.code.name}: {outcome.details} {sample}"
    )
    assert "Traceback" not in outcome.details and 'File "' not in outcome.details, (
        f"{method.path} leaked a traceback: {outcome.details}"
    )
