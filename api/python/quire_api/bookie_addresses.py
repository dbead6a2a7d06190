"""Where a bookie is reached: the BookieServiceInfo rules every client and
service share (BP-38, BP-41), with no channel of their own.

- `validate_service_info` is what the registry accepts;
- `effective_service_info` applies BP-38's legacy rule (an empty record means
  one `bookie-rpc` endpoint at the `host:port` the id spells);
- `bookie_rpc_address` picks the first `bookie-rpc` endpoint;
- `legacy_address` parses a `host:port` id for clusters run without the resolver.
"""

from __future__ import annotations

from quire_api.errors import InvalidArgument, NotFound, Reason
from quire_api.ids import parse_host_port, validate_bookie_id
from quire_proto.common.v1 import common_pb2

BOOKIE_RPC_PROTOCOL = "bookie-rpc"
HTTP_PROTOCOL = "http"
# Protocols an endpoint may name (an allow-list: a typo such as "bookie_rpc"
# would otherwise register a bookie that no client can reach).
KNOWN_PROTOCOLS = frozenset({BOOKIE_RPC_PROTOCOL, HTTP_PROTOCOL, "https"})
MAX_SERVICE_INFO_BYTES = 64 * 1024  # a registration is read by every client: keep it small
MAX_ENDPOINTS = 16
_ENDPOINT_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def validate_service_info(info: common_pb2.BookieServiceInfo) -> None:
    """INVALID_ARGUMENT (reason INVALID_ARGUMENT) for a BookieServiceInfo the
    registry must not store: ports outside 1-65535, an unknown protocol, a
    missing host, endpoint ids that repeat, or a record above 64 KiB.
    Extensions and auth names are opaque strings readers ignore when unknown;
    unknown protobuf fields are kept and ignored the same way."""
    size = info.ByteSize()
    if size > MAX_SERVICE_INFO_BYTES:
        raise InvalidArgument(
            f"BookieServiceInfo is {size} bytes; at most {MAX_SERVICE_INFO_BYTES} are allowed "
            f"(properties: {len(info.properties)})"
        )
    if len(info.endpoints) > MAX_ENDPOINTS:
        raise InvalidArgument(f"BookieServiceInfo has {len(info.endpoints)} endpoints; at most {MAX_ENDPOINTS}")
    seen: set[str] = set()
    for endpoint in info.endpoints:
        if not endpoint.id or len(endpoint.id) > 64 or not _ENDPOINT_ID_CHARS.issuperset(endpoint.id):
            raise InvalidArgument(f"endpoint id {endpoint.id!r} must be 1-64 letters, digits, '.', '_' or '-'")
        if endpoint.id in seen:
            raise InvalidArgument(f"endpoint id {endpoint.id!r} appears twice; endpoint ids must be unique")
        seen.add(endpoint.id)
        if not 0 < endpoint.port < 65536:
            raise InvalidArgument(f"endpoint {endpoint.id!r}: port {endpoint.port} is not between 1 and 65535")
        if endpoint.protocol not in KNOWN_PROTOCOLS:
            raise InvalidArgument(
                f"endpoint {endpoint.id!r}: unknown protocol {endpoint.protocol!r}; "
                f"use one of {', '.join(sorted(KNOWN_PROTOCOLS))}"
            )
        if not endpoint.host or len(endpoint.host) > 253 or any(c.isspace() or c == "/" for c in endpoint.host):
            raise InvalidArgument(f"endpoint {endpoint.id!r}: host {endpoint.host!r} is not a host name or address")
    for key in info.properties:
        if not key:
            raise InvalidArgument("BookieServiceInfo has a property with an empty name")


def effective_service_info(bookie_id: str, info: common_pb2.BookieServiceInfo) -> common_pb2.BookieServiceInfo:
    """The record clients go by: the registered one, or for an empty record one
    bookie-rpc endpoint parsed from a `host:port` id. NOT_FOUND when the record
    is empty and the id is not `host:port`."""
    if info.endpoints or info.properties:
        return info
    host_port = parse_host_port(bookie_id)
    if host_port is None:
        raise NotFound(
            f"bookie {bookie_id} registered no endpoints and its id is not host:port, so it cannot be resolved",
            Reason.BOOKIE_NOT_FOUND,
        )
    derived = common_pb2.BookieServiceInfo()
    derived.endpoints.add(id="rpc", host=host_port[0], port=host_port[1], protocol=BOOKIE_RPC_PROTOCOL)
    return derived


def bookie_rpc_address(bookie_id: str, info: common_pb2.BookieServiceInfo) -> str:
    """`host:port` of the bookie's first bookie-rpc endpoint."""
    for endpoint in effective_service_info(bookie_id, info).endpoints:
        if endpoint.protocol == BOOKIE_RPC_PROTOCOL:
            return f"{endpoint.host}:{endpoint.port}"
    raise NotFound(f"bookie {bookie_id} advertises no {BOOKIE_RPC_PROTOCOL} endpoint", Reason.BOOKIE_NOT_FOUND)


def legacy_address(bookie_id: str) -> str:
    """The address a `host:port` id spells, for clusters run without the resolver."""
    validate_bookie_id(bookie_id)
    host_port = parse_host_port(bookie_id)
    if host_port is None:
        raise NotFound(
            f"bookie {bookie_id} is not host:port and the address resolver is disabled",
            Reason.BOOKIE_NOT_FOUND,
        )
    return f"{host_port[0]}:{host_port[1]}"
