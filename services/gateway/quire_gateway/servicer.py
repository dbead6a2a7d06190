"""LedgerService and BlobService over gRPC: validate, call the gateway's
ledger operations (ledgers.py) or blob store, shape responses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import grpc

from quire_api.errors import InvalidArgument, QuireError
from quire_api.ids import ledger_id_from_proto
from quire_common.telemetry import tracing_enabled
from quire_gateway.blobs import BlobStore
from quire_gateway.client_streams import answered_in_order, chained, first_and_rest
from quire_gateway.ledgers import CreateSpec, LedgerOperations, public_metadata
from quire_gateway.ownership.peers import FORWARDED_BY
from quire_gateway.ownership.router import WriteRouter
from quire_gateway.read.replies import blob_data_reply, entry_replies, read_entry_response
from quire_gateway.write.session import WriteSession
from quire_proto.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc

# Requests of one ReadEntryStream worked on at once (ledger.proto says so).
READ_STREAM_WINDOW = 16


def read_entry_error_response(error: QuireError) -> bytes:
    """The ReadEntryResponse of a ReadEntryStream request that failed with `error`, encoded."""
    return ledger_pb2.ReadEntryResponse(error=read_entry_error(error)).SerializeToString()


def read_entry_error(error: QuireError) -> ledger_pb2.ReadEntryError:
    """What the status of a call failing with `error` carries (quire_api.rpc_status), as one stream answer."""
    message = ledger_pb2.ReadEntryError(
        code=grpc.StatusCode[error.code].value[0], reason=error.reason, message=error.message, metadata=error.metadata
    )
    delay = error.retry_delay
    if delay is not None:
        message.retry_delay.FromNanoseconds(int(delay * 1e9))
    return message


class ActiveStreams:
    """How many streaming calls of each method are open right now: the
    gateway's admin /status and the gauge quire.gateway.active_streams show
    it, so a cancelled or timed-out stream that is never released shows up as
    a count that does not fall."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    @contextmanager
    def track(self, method: str) -> Iterator[None]:
        self.counts[method] = self.counts.get(method, 0) + 1
        try:
            yield
        finally:
            self.counts[method] -= 1

    def snapshot(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


def forwarded(context: grpc.aio.ServicerContext) -> bool:
    """Whether another gateway relayed this call (authn.py checked who sent it)."""
    return any(key == FORWARDED_BY for key, _ in context.invocation_metadata() or ())


class LedgerServicer(ledger_pb2_grpc.LedgerServiceServicer):
    def __init__(
        self, ledgers: LedgerOperations, router: WriteRouter | None = None, streams: ActiveStreams | None = None
    ) -> None:
        self.ledgers = ledgers
        self.router = router or WriteRouter(ledgers, None)  # where appends, adds and closes are done
        self.streams = streams or ActiveStreams()
        self._traced = tracing_enabled()  # spans cost a share of every entry even when they record nothing

    async def CreateLedger(
        self, request: ledger_pb2.CreateLedgerRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.CreateLedgerResponse:
        which = request.WhichOneof("id")
        spec = CreateSpec(
            ensemble_size=request.ensemble_size,
            write_quorum_size=request.write_quorum_size,
            ack_quorum_size=request.ack_quorum_size,
            digest_type=request.digest_type,
            password=request.password,
            custom_metadata=dict(request.custom_metadata),
            exact_id=ledger_id_from_proto(request.ledger_id) if which == "ledger_id" else None,
            scope_id=request.scope_id if which == "scope_id" else None,
            legacy=which == "legacy" and request.legacy,
            request_id=request.request_id,
        )
        return ledger_pb2.CreateLedgerResponse(metadata=await self.ledgers.create(spec))

    async def OpenLedger(
        self, request: ledger_pb2.OpenLedgerRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.OpenLedgerResponse:
        metadata, lac = await self.ledgers.open(
            ledger_id_from_proto(request.ledger_id), request.password, request.recovery
        )
        return ledger_pb2.OpenLedgerResponse(metadata=metadata, last_add_confirmed=lac)

    async def AppendEntries(
        self,
        request_iterator: AsyncIterator[ledger_pb2.AppendEntriesRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[ledger_pb2.AppendEntriesResponse]:
        with self.streams.track("AppendEntries"):
            first, rest = await first_and_rest(request_iterator)
            if first is None:
                return
            ledger = ledger_id_from_proto(first.ledger_id)
            relay = await self.router.relay_for(ledger, forwarded=forwarded(context))
            if relay is not None:
                async for response in relay.append_entries(first, rest):
                    yield response
                return
            session = WriteSession(
                self.ledgers,
                ledger,
                chained(first, rest),
                self._traced,
                self.ledgers.settings.session_window_entries,
            )
            async for ack in session.acknowledgements():
                yield ledger_pb2.AppendEntriesResponse(
                    first_entry_id=ack.first_entry_id,
                    last_entry_id=ack.last_entry_id,
                    last_add_confirmed=ack.last_add_confirmed,
                    owner=ack.owner,
                )

    async def AddEntry(
        self, request: ledger_pb2.AddEntryRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.AddEntryResponse:
        ledger = ledger_id_from_proto(request.ledger_id)
        relay = await self.router.relay_for(ledger, forwarded=forwarded(context))
        if relay is not None:
            return await relay.add_entry(request)
        expected = request.expected_entry_id if request.HasField("expected_entry_id") else None
        entry_id, lac = await self.ledgers.add(ledger, request.payload, expected)
        return ledger_pb2.AddEntryResponse(
            entry_id=entry_id, last_add_confirmed=lac, owner=self.ledgers.owner_here(ledger)
        )

    async def ReadEntries(
        self, request: ledger_pb2.ReadEntriesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        chunks = self.ledgers.reads.read(
            ledger_id_from_proto(request.ledger_id),
            request.first_entry_id,
            request.last_entry_id,
            confirmed=True,
        )
        with self.streams.track("ReadEntries"):
            async for chunk in chunks:
                for reply in entry_replies(chunk):
                    yield reply

    async def ReadEntry(self, request: ledger_pb2.ReadEntryRequest, context: grpc.aio.ServicerContext) -> bytes:
        reads = self.ledgers.reads
        ledger_id = ledger_id_from_proto(request.ledger_id)
        # A cached entry is answered without the coroutines of a read that may have to wait.
        entry = reads.entry_at_hand(ledger_id, request.entry_id)
        if entry is None:
            entry = await reads.read_entry(ledger_id, request.entry_id)
        return read_entry_response(entry)

    async def ReadEntryStream(
        self, request_iterator: AsyncIterator[ledger_pb2.ReadEntryRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        async def answer(request: ledger_pb2.ReadEntryRequest) -> bytes:
            try:
                entry = await self.ledgers.reads.read_entry(ledger_id_from_proto(request.ledger_id), request.entry_id)
            except QuireError as error:  # answers this request; the stream goes on
                return read_entry_error_response(error)
            return read_entry_response(entry)

        def answer_at_once(request: ledger_pb2.ReadEntryRequest) -> bytes | None:
            try:
                ledger_id = ledger_id_from_proto(request.ledger_id)
            except QuireError:
                return None  # answered with its error by `answer`
            entry = self.ledgers.reads.entry_at_hand(ledger_id, request.entry_id)
            return None if entry is None else read_entry_response(entry)

        with self.streams.track("ReadEntryStream"):
            responses = answered_in_order(request_iterator, answer, READ_STREAM_WINDOW, answer_at_once)
            async for response in responses:
                yield response

    async def ReadUnconfirmedEntries(
        self, request: ledger_pb2.ReadUnconfirmedEntriesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        chunks = self.ledgers.reads.read(
            ledger_id_from_proto(request.ledger_id),
            request.first_entry_id,
            request.last_entry_id,
            confirmed=False,
        )
        with self.streams.track("ReadUnconfirmedEntries"):
            async for chunk in chunks:
                for reply in entry_replies(chunk):
                    yield reply

    async def TailEntries(
        self, request: ledger_pb2.TailEntriesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        ledger_id = ledger_id_from_proto(request.ledger_id)
        with self.streams.track("TailEntries"):
            async for chunk in self.ledgers.reads.tail(ledger_id, request.first_entry_id):
                for reply in entry_replies(chunk):
                    yield reply

    async def ReadLastAddConfirmed(
        self, request: ledger_pb2.ReadLastAddConfirmedRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.ReadLastAddConfirmedResponse:
        lac = await self.ledgers.reads.last_add_confirmed(ledger_id_from_proto(request.ledger_id))
        return ledger_pb2.ReadLastAddConfirmedResponse(last_add_confirmed=lac)

    async def CloseLedger(
        self, request: ledger_pb2.CloseLedgerRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.CloseLedgerResponse:
        ledger = ledger_id_from_proto(request.ledger_id)
        relay = await self.router.relay_for(ledger, forwarded=forwarded(context), closing=True)
        if relay is not None:
            return await relay.close_ledger(request)
        return ledger_pb2.CloseLedgerResponse(metadata=await self.ledgers.close(ledger))

    async def DeleteLedger(
        self, request: ledger_pb2.DeleteLedgerRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.DeleteLedgerResponse:
        await self.ledgers.delete(ledger_id_from_proto(request.ledger_id))
        return ledger_pb2.DeleteLedgerResponse()

    async def GetLedgerMetadata(
        self, request: ledger_pb2.GetLedgerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.GetLedgerMetadataResponse:
        metadata, version = await self.ledgers.metadata(ledger_id_from_proto(request.ledger_id))
        return ledger_pb2.GetLedgerMetadataResponse(metadata=public_metadata(metadata), version=version)

    async def ListLedgers(
        self, request: ledger_pb2.ListLedgersRequest, context: grpc.aio.ServicerContext
    ) -> ledger_pb2.ListLedgersResponse:
        page, token = await self.ledgers.list(
            request.scope_id, request.page_size, request.page_token, request.all_scopes
        )
        return ledger_pb2.ListLedgersResponse(ledgers=page, next_page_token=token)


def add_ledger_servicer_to_server(servicer: LedgerServicer, server: grpc.aio.Server) -> None:
    """LedgerService on `server`. The methods that answer with entries send
    replies already encoded (quire_gateway.read.replies) as they are; every
    other method as generated. grpc asks its generic handlers in the order
    they were added, so this one answers those methods first."""
    read_entry_request = ledger_pb2.ReadEntryRequest.FromString
    encoded = {
        "ReadEntry": grpc.unary_unary_rpc_method_handler(servicer.ReadEntry, read_entry_request),
        "ReadEntryStream": grpc.stream_stream_rpc_method_handler(servicer.ReadEntryStream, read_entry_request),
        "ReadEntries": grpc.unary_stream_rpc_method_handler(
            servicer.ReadEntries, ledger_pb2.ReadEntriesRequest.FromString
        ),
        "ReadUnconfirmedEntries": grpc.unary_stream_rpc_method_handler(
            servicer.ReadUnconfirmedEntries, ledger_pb2.ReadUnconfirmedEntriesRequest.FromString
        ),
        "TailEntries": grpc.unary_stream_rpc_method_handler(
            servicer.TailEntries, ledger_pb2.TailEntriesRequest.FromString
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(LEDGER_SERVICE, encoded),))
    ledger_pb2_grpc.add_LedgerServiceServicer_to_server(servicer, server)


LEDGER_SERVICE = ledger_pb2.DESCRIPTOR.services_by_name["LedgerService"].full_name


class BlobServicer(blob_pb2_grpc.BlobServiceServicer):
    def __init__(self, store: BlobStore, streams: ActiveStreams | None = None) -> None:
        self.store = store
        self.streams = streams or ActiveStreams()

    async def PutBlob(
        self, request_iterator: AsyncIterator[blob_pb2.PutBlobRequest], context: grpc.aio.ServicerContext
    ) -> blob_pb2.PutBlobResponse:
        with self.streams.track("PutBlob"):
            first, rest = await first_and_rest(request_iterator)
            if first is None:
                raise InvalidArgument("PutBlob received no message")
            parts = (request.data async for request in chained(first, rest))
            blob_id, size = await self.store.put(first.scope_id, parts)
            return blob_pb2.PutBlobResponse(blob_id=blob_id, size_bytes=size)

    async def GetBlob(
        self, request: blob_pb2.GetBlobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        with self.streams.track("GetBlob"):
            async for data in self.store.get(request.blob_id):
                yield blob_data_reply(data)


def add_blob_servicer_to_server(servicer: BlobServicer, server: grpc.aio.Server) -> None:
    """BlobService on `server`: GetBlob sends its replies already encoded
    (quire_gateway.read.replies) as they are, every other method as generated."""
    encoded = {"GetBlob": grpc.unary_stream_rpc_method_handler(servicer.GetBlob, blob_pb2.GetBlobRequest.FromString)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(BLOB_SERVICE, encoded),))
    blob_pb2_grpc.add_BlobServiceServicer_to_server(servicer, server)


BLOB_SERVICE = blob_pb2.DESCRIPTOR.services_by_name["BlobService"].full_name
