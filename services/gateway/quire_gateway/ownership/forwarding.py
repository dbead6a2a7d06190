"""Writes that arrive at a gateway which does not own the ledger: relayed to
the owner over the gateway mesh (peers.py), one hop at most. A confirmed read
past what this gateway knows asks the owner for its LAC the same way.

The caller has been authenticated and authorized here already; the owner
accepts the relayed call only from a gateway service identity and, not being
the owner (any more), refuses it instead of relaying it again. Whatever the
owner answers (acknowledgements, or an error with its code, reason and
details) goes back to the client unchanged. Back-pressure is end to end: one
request is read from the client only when the owner's stream can take it,
so nothing here buffers more than gRPC's flow-control window.
No grpc here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_gateway.ownership.peers import GatewayPeers
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2


class Forwarder:
    def __init__(self, peers: GatewayPeers) -> None:
        self.peers = peers

    async def append_entries(
        self,
        owner: common_pb2.LedgerOwner,
        first: ledger_pb2.AppendEntriesRequest,
        rest: AsyncIterator[ledger_pb2.AppendEntriesRequest],
    ) -> AsyncIterator[ledger_pb2.AppendEntriesResponse]:
        async def requests() -> AsyncIterator[ledger_pb2.AppendEntriesRequest]:
            yield first
            async for request in rest:
                yield request

        async for response in self.peers.append_entries(owner.address, requests()):
            yield response

    async def add_entry(
        self, owner: common_pb2.LedgerOwner, request: ledger_pb2.AddEntryRequest
    ) -> ledger_pb2.AddEntryResponse:
        return await self.peers.add_entry(owner.address, request)

    async def last_add_confirmed(self, owner: common_pb2.LedgerOwner, ledger_id: LedgerId) -> int:
        """The owner's LAC of a ledger it writes: what it has acknowledged."""
        request = ledger_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id_to_proto(ledger_id))
        return (await self.peers.read_last_add_confirmed(owner.address, request)).last_add_confirmed

    async def close_ledger(
        self, owner: common_pb2.LedgerOwner, request: ledger_pb2.CloseLedgerRequest
    ) -> ledger_pb2.CloseLedgerResponse:
        return await self.peers.close_ledger(owner.address, request)

    async def close(self) -> None:
        await self.peers.close()
