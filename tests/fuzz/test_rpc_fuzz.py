"""Every RPC of every service, through a raw channel, against a running
(plaintext development) cluster: garbage, truncated messages, unknown
fields, wrong wire types and huge sizes get a clean error, never INTERNAL,
UNKNOWN or a traceback, and every service stays up."""

from __future__ import annotations

import os
from collections.abc import Iterator

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quire_client.cluster import LocalCluster, grpc_serving
from tests.e2e.conftest import running_cluster
from tests.fuzz.rpc import Method, all_methods, call_raw, check, varint

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
METHODS = all_methods()
EXAMPLES = int(os.environ.get("QUIRE_FUZZ_RPC_EXAMPLES", "300"))


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("fuzz-cluster")) as local:
        yield local


def target(cluster: LocalCluster, method: Method) -> str:
    if method.service == "gateway":
        return cluster.gateway_target
    if method.service == "registry":
        return cluster.registry_target
    if method.service == "placement":
        return cluster.placement_target
    return cluster.bookie_id("bookie-1")


@st.composite
def hostile_message(draw: st.DrawFn) -> bytes:
    """Raw bytes, or a field built to break a decoder: a truncated
    length-delimited field, a huge declared length, an unknown field, a
    known field number with the wrong wire type."""
    kind = draw(st.sampled_from(["raw", "truncated", "huge", "unknown", "wrong_type", "empty"]))
    field = draw(st.integers(min_value=1, max_value=20))
    if kind == "raw":
        return draw(st.binary(max_size=512))
    if kind == "truncated":
        body = draw(st.binary(min_size=1, max_size=64))
        return varint(field << 3 | 2) + varint(len(body) + 10) + body
    if kind == "huge":
        return varint(field << 3 | 2) + varint(draw(st.sampled_from([2**31 - 1, 2**32, 2**63]))) + b"x"
    if kind == "unknown":
        return varint(draw(st.integers(min_value=1000, max_value=2**29 - 1)) << 3 | 0) + varint(7)
    if kind == "wrong_type":
        wire = draw(st.sampled_from([0, 1, 2, 5]))
        payload = {0: varint(2**64 - 1), 1: b"\xff" * 8, 2: varint(3) + b"abc", 5: b"\xff" * 4}[wire]
        return varint(field << 3 | wire) + payload
    return b""


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(method=st.sampled_from(METHODS), messages=st.lists(hostile_message(), min_size=1, max_size=3))
def test_no_rpc_answers_garbage_with_internal(
    fuzz_cluster: LocalCluster, method: Method, messages: list[bytes]
) -> None:
    with grpc.insecure_channel(target(fuzz_cluster, method)) as channel:
        check(call_raw(channel, method, messages), method, messages)


def test_every_method_refuses_a_truncated_message_cleanly(fuzz_cluster: LocalCluster) -> None:
    truncated = b"\x0a\x20abc"  # field 1, 32 bytes declared, 3 present
    for method in METHODS:
        with grpc.insecure_channel(target(fuzz_cluster, method)) as channel:
            outcome = call_raw(channel, method, [truncated])
        check(outcome, method, [truncated])
        assert outcome.code == grpc.StatusCode.INVALID_ARGUMENT, (method.path, outcome)


def test_a_message_above_the_size_limit_is_resource_exhausted(fuzz_cluster: LocalCluster) -> None:
    method = next(m for m in METHODS if m.path.endswith("/AddEntry"))
    with grpc.insecure_channel(
        fuzz_cluster.gateway_target, options=[("grpc.max_send_message_length", 128 * 1024 * 1024)]
    ) as channel:
        outcome = call_raw(channel, method, [b"\x12" + varint(65 * 1024 * 1024) + b"\0" * (65 * 1024 * 1024)], 10)
    assert outcome.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_every_service_is_still_up(fuzz_cluster: LocalCluster) -> None:
    for name, process in fuzz_cluster.processes.items():
        if process.health_target is not None:
            assert grpc_serving(process.health_target), f"{name} is down after fuzzing"
