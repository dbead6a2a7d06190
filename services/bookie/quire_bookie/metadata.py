"""Asks the registry whether a ledger's metadata still exists (for the
garbage collector). Only NOT_FOUND means gone."""

from __future__ import annotations

import grpc

from quire_api.errors import NotFound
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.channels import call, open_channel
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc


class RegistryLedgerLookup:
    def __init__(self, registry_target: str, timeout_seconds: float = 5.0) -> None:
        self._channel: grpc.aio.Channel = open_channel(registry_target)
        self._stub = registry_pb2_grpc.RegistryServiceStub(self._channel)
        self._timeout = timeout_seconds

    async def metadata_gone(self, ledger_id: LedgerId) -> bool:
        request = registry_pb2.GetLedgerMetadataRequest(ledger_id=ledger_id_to_proto(ledger_id))
        try:
            await call(self._stub.GetLedgerMetadata(request, timeout=self._timeout), "reading ledger metadata")
        except NotFound:
            return True
        return False

    async def close(self) -> None:
        await self._channel.close()
