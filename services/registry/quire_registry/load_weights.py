"""Bookies' load weights on a MetadataStore. No grpc here."""

from __future__ import annotations

import logging

from quire_api.errors import (
    InvalidArgument,
)
from quire_api.ids import (
    validate_bookie_id,
)
from quire_proto.registry.v1 import registry_pb2
from quire_registry.keys import Keys
from quire_registry.store import OPS_PER_TRANSACTION, MetadataStore, Put

log = logging.getLogger(__name__)


class LoadWeights:
    """Load factors per bookie, written by the telemetry stage, read by placement."""

    def __init__(self, store: MetadataStore, keys: Keys) -> None:
        self.store = store
        self.keys = keys

    async def put_load_weights(self, weights: list[registry_pb2.LoadWeight]) -> None:
        for weight in weights:
            validate_bookie_id(weight.bookie_id)
            if not 0 < weight.factor <= 1:
                raise InvalidArgument(f"load factor {weight.factor} of bookie {weight.bookie_id} is not in (0, 1]")
        for start in range(0, len(weights), OPS_PER_TRANSACTION):
            chunk = weights[start : start + OPS_PER_TRANSACTION]
            await self.store.transact(
                [], {}, [Put(self.keys.load_weight(w.bookie_id), w.SerializeToString()) for w in chunk]
            )

    async def list_load_weights(self) -> list[registry_pb2.LoadWeight]:
        items, _ = await self.store.list_prefix(self.keys.load_weights)
        return [registry_pb2.LoadWeight.FromString(kv.value) for kv in items]
