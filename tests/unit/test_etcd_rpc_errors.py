"""Which of etcd's gRPC failures the registry's store turns into QuireErrors."""

from __future__ import annotations

import grpc

from quire_api.errors import Reason, ResourceExhausted, Unavailable
from quire_registry.store import etcd_rpc_error

# What grpc.aio raised in CI when a lease keep-alive was sent as a partition broke the connection.
BROKEN_SEND = 'Failed "execute_batch": (<grpc._cython.cygrpc.SendMessageOperation object at 0x7f85641abd30>,)'


def rpc_error(code: grpc.StatusCode, details: str, debug: str = "") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details, debug)


def test_a_message_sent_on_a_call_the_connection_broke_under_is_unavailable():
    mapped = etcd_rpc_error(
        "lease keep-alive", rpc_error(grpc.StatusCode.INTERNAL, "Internal error from Core", BROKEN_SEND)
    )
    assert isinstance(mapped, Unavailable) and mapped.reason == Reason.METADATA_STORE_UNAVAILABLE
    assert "lease keep-alive" in mapped.message


def test_etcd_out_of_reach_is_unavailable_and_its_space_alarm_is_disk_full():
    assert isinstance(etcd_rpc_error("get", rpc_error(grpc.StatusCode.UNAVAILABLE, "connection refused")), Unavailable)
    assert isinstance(etcd_rpc_error("get", rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline")), Unavailable)
    full = etcd_rpc_error(
        "put", rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded")
    )
    assert isinstance(full, ResourceExhausted) and full.reason == Reason.DISK_FULL


def test_any_other_internal_error_is_left_a_bug():
    assert etcd_rpc_error("get", rpc_error(grpc.StatusCode.INTERNAL, "etcdserver: something new")) is None
    assert etcd_rpc_error("get", rpc_error(grpc.StatusCode.UNKNOWN, "?", BROKEN_SEND)) is None
