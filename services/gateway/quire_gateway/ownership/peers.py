"""Calls from one gateway to another (the gateway mesh), behind plain async
methods so the forwarding code never sees grpc.

Channels use the same mutual TLS and service identity as every internal hop
(quire_common.channels). Every call carries FORWARDED_BY naming the sending
gateway: the receiver then requires a gateway service identity, skips the
caller's authorization (the sender did it) and never forwards again. Calls do
not wait for a peer to come back: a dead owner must show as UNAVAILABLE at
once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from quire_common.channels import call, error_from_rpc, open_channel, trace_context_metadata
from quire_proto.gateway.v1 import ledger_pb2, ledger_pb2_grpc

FORWARDED_BY = "quire-forwarded-by"


class GatewayPeers:
    def __init__(self, gateway_name: str, tls_name: str = "", timeout_seconds: float = 30.0) -> None:
        self.metadata = ((FORWARDED_BY, gateway_name),)
        self.tls_name = tls_name  # the name the peers' certificates carry; "": the address's host
        self.timeout = timeout_seconds
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, address: str) -> ledger_pb2_grpc.LedgerServiceStub:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = open_channel(address, server_name=self.tls_name)
        return ledger_pb2_grpc.LedgerServiceStub(channel)

    async def append_entries(
        self, address: str, requests: AsyncIterator[ledger_pb2.AppendEntriesRequest]
    ) -> AsyncIterator[ledger_pb2.AppendEntriesResponse]:
        """One write session relayed to `address`. gRPC reads `requests` only
        as fast as the peer's flow-control window lets it write, so a slow
        owner slows the client down instead of filling a buffer here."""
        stream = self._stub(address).AppendEntries(requests, metadata=self.metadata + trace_context_metadata())
        try:
            async for response in stream:
                yield response
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, f"forwarding to the ledger's owner at {address}") from None
        finally:
            stream.cancel()

    async def add_entry(self, address: str, request: ledger_pb2.AddEntryRequest) -> ledger_pb2.AddEntryResponse:
        return await call(
            self._stub(address).AddEntry(request, metadata=self.metadata, timeout=self.timeout),
            f"forwarding to the ledger's owner at {address}",
        )

    async def read_last_add_confirmed(
        self, address: str, request: ledger_pb2.ReadLastAddConfirmedRequest
    ) -> ledger_pb2.ReadLastAddConfirmedResponse:
        return await call(
            self._stub(address).ReadLastAddConfirmed(request, metadata=self.metadata, timeout=self.timeout),
            f"asking the ledger's owner at {address} for its last-add-confirmed",
        )

    async def close_ledger(
        self, address: str, request: ledger_pb2.CloseLedgerRequest
    ) -> ledger_pb2.CloseLedgerResponse:
        return await call(
            self._stub(address).CloseLedger(request, metadata=self.metadata, timeout=self.timeout),
            f"forwarding to the ledger's owner at {address}",
        )

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
