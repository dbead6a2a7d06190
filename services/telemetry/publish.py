"""Publish load factors to the registry (`placement/load/<bookieId>`), where
placement reads them."""

from __future__ import annotations

import time

import grpc

from quire.registry.v1 import registry_pb2, registry_pb2_grpc


def publish_load_factors(registry_target: str, factors: dict[str, float], computed_at: float | None = None) -> int:
    """Store every factor with one timestamp; returns how many were stored."""
    if not factors:
        return 0
    request = registry_pb2.PutLoadWeightsRequest()
    for bookie_id, factor in sorted(factors.items()):
        weight = request.weights.add(bookie_id=bookie_id, factor=factor)
        weight.computed_at.FromMicroseconds(int((computed_at or time.time()) * 1e6))
    with grpc.insecure_channel(registry_target) as channel:
        registry_pb2_grpc.RegistryServiceStub(channel).PutLoadWeights(request, timeout=10)
    return len(factors)
