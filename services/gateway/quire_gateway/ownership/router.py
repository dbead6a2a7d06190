"""Where a write of a ledger is done: here, when this gateway writes it (or,
for a close, when it is closed already), or relayed to the gateway that owns
it (forwarding.py). The one place the servicer asks, for appends, single
adds and closes alike. A relayed append's acknowledgements are also learned
as the readers' LAC here, so that a read through this gateway sees what it
acknowledged (read-your-writes). No grpc here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from quire_api.ids import LedgerId
from quire_gateway.ledgers import LedgerOperations
from quire_gateway.ownership.forwarding import Forwarder
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2


class Relay:
    """A write of one ledger, relayed to its owner."""

    def __init__(self, forwarder: Forwarder, owner: common_pb2.LedgerOwner, learned: Callable[[int, int], None]):
        self._forwarder = forwarder
        self._owner = owner
        self._learned = learned  # (last entry acknowledged, LAC) of each relayed acknowledgement

    async def append_entries(
        self, first: ledger_pb2.AppendEntriesRequest, rest: AsyncIterator[ledger_pb2.AppendEntriesRequest]
    ) -> AsyncIterator[ledger_pb2.AppendEntriesResponse]:
        async for response in self._forwarder.append_entries(self._owner, first, rest):
            self._learned(response.last_entry_id, response.last_add_confirmed)
            yield response

    async def add_entry(self, request: ledger_pb2.AddEntryRequest) -> ledger_pb2.AddEntryResponse:
        response = await self._forwarder.add_entry(self._owner, request)
        self._learned(response.entry_id, response.last_add_confirmed)
        return response

    async def close_ledger(self, request: ledger_pb2.CloseLedgerRequest) -> ledger_pb2.CloseLedgerResponse:
        return await self._forwarder.close_ledger(self._owner, request)


class WriteRouter:
    def __init__(self, ledgers: LedgerOperations, forwarder: Forwarder | None) -> None:
        self.ledgers = ledgers
        self.forwarder = forwarder  # None: no gateway mesh, every write is done (or refused) here

    async def relay_for(self, ledger_id: LedgerId, *, forwarded: bool, closing: bool = False) -> Relay | None:
        """None when the write is done here (LedgerOperations.route_write says
        when, and raises when it can be done nowhere), else the relay to the
        ledger's owner. A call that was itself relayed is never relayed again."""
        owner = await self.ledgers.route_write(ledger_id, forwarded=forwarded, closing=closing)
        if owner is None or self.forwarder is None:
            return None
        if closing:
            return Relay(self.forwarder, owner, lambda acknowledged, lac: None)
        return Relay(self.forwarder, owner, await self.ledgers.reads.relayed_acks(ledger_id))
