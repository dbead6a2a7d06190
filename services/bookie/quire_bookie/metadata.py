"""Asks the registry which ledgers' metadata exists (for the garbage
collector): every ledger's id, a page of thousands at a time, and one
ledger's record. Only NOT_FOUND, or a complete listing without the ledger,
means gone."""

from __future__ import annotations

from collections.abc import AsyncIterator

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

    async def existing_ledgers(self) -> AsyncIterator[list[LedgerId]]:
        """Every ledger with metadata, in pages; raises when a page cannot be read."""
        token = ""
        while True:
            request = registry_pb2.ListLedgerIdsRequest(page_token=token)
            page = await call(self._stub.ListLedgerIds(request, timeout=self._timeout), "listing ledger ids")
            yield [LedgerId(scope, ledger) for scope, ledger in zip(page.scope_ids, page.ledger_ids, strict=True)]
            token = page.next_page_token
            if not token:
                return

    async def metadata_gone(self, ledger_id: LedgerId) -> bool:
        request = registry_pb2.GetLedgerMetadataRequest(ledger_id=ledger_id_to_proto(ledger_id))
        try:
            await call(self._stub.GetLedgerMetadata(request, timeout=self._timeout), "reading ledger metadata")
        except NotFound:
            return True
        return False

    async def close(self) -> None:
        await self._channel.close()
