"""Fixtures for tests against a real etcd."""

from __future__ import annotations

import uuid

import pytest

from quire_common.server import create_server
from quire_proto.registry.v1 import registry_pb2_grpc
from quire_registry.registry import Registry
from quire_registry.servicer import RegistryServicer
from quire_registry.store import EtcdStore


@pytest.fixture
async def registry_server(etcd):
    """A registry gRPC server in this process (port 0) on its own cluster prefix;
    yields (Registry, target)."""
    store = EtcdStore([etcd.endpoint])
    await store.connect()
    registry = Registry(store, f"resolver-{uuid.uuid4().hex[:8]}", default_ttl_seconds=5)

    def register(server):
        registry_pb2_grpc.add_RegistryServiceServicer_to_server(RegistryServicer(registry), server)
        return []

    server, port, _ = create_server("127.0.0.1:0", register)
    await server.start()
    try:
        yield registry, f"127.0.0.1:{port}"
    finally:
        await server.stop(None)
        await store.close()
