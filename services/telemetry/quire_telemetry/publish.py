"""Publish load factors to the registry (`placement/load/<bookieId>`), where
placement reads them."""

from __future__ import annotations

import time

import grpc

from quire_common.config import load_settings
from quire_common.security import TlsSettings, channel_credentials, channel_options
from quire_common.settings import TlsEnv
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc


def publish_load_factors(registry_target: str, factors: dict[str, float], computed_at: float | None = None) -> int:
    """Store every factor with one timestamp; returns how many were stored."""
    if not factors:
        return 0
    request = registry_pb2.PutLoadWeightsRequest()
    for bookie_id, factor in sorted(factors.items()):
        weight = request.weights.add(bookie_id=bookie_id, factor=factor)
        weight.computed_at.FromMicroseconds(int((computed_at or time.time()) * 1e6))
    # The registry is internal: with QUIRE_TLS_* set, this job presents a
    # service certificate like any other service; without, plaintext (dev).
    env = load_settings(TlsEnv)
    tls = TlsSettings.from_settings(env) if env.cert else None
    if tls is not None and tls.enabled:
        channel = grpc.secure_channel(registry_target, channel_credentials(tls), options=channel_options(tls))
    else:
        channel = grpc.insecure_channel(registry_target)
    with channel:
        registry_pb2_grpc.RegistryServiceStub(channel).PutLoadWeights(request, timeout=10)
    return len(factors)
