"""A small synchronous client for the gateway's LedgerService (and the
registry's bookie listing). Errors come back as QuireClientError carrying the
gRPC code and the ErrorInfo reason."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2, status_pb2

from quire.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire.common.v1 import common_pb2
from quire.gateway.v1 import ledger_pb2, ledger_pb2_grpc
from quire.placement.v1 import placement_pb2, placement_pb2_grpc
from quire.registry.v1 import registry_pb2, registry_pb2_grpc
from quire_common.bookies import bookie_rpc_address
from quire_common.ids import LedgerId, ledger_id_to_proto, validate_bookie_id

_STATUS_DETAILS_KEY = "grpc-status-details-bin"


class QuireClientError(Exception):
    def __init__(self, code: grpc.StatusCode, reason: str, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


def _translate(exc: grpc.RpcError) -> QuireClientError:
    reason = ""
    for key, value in exc.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == _STATUS_DETAILS_KEY:
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    reason = info.reason
    return QuireClientError(exc.code(), reason, exc.details() or "")  # type: ignore[attr-defined]


@dataclass(frozen=True)
class AppendAck:
    first_entry_id: int
    last_entry_id: int
    last_add_confirmed: int


def _as_ledger_id(ledger: LedgerId | str) -> LedgerId:
    return ledger if isinstance(ledger, LedgerId) else LedgerId.parse(ledger)


class QuireClient:
    def __init__(
        self,
        gateway: str = "127.0.0.1:7000",
        registry: str = "127.0.0.1:7001",
        timeout: float = 30.0,
        placement: str = "127.0.0.1:7002",
    ):
        options = [
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ]
        self._gateway_channel = grpc.insecure_channel(gateway, options=options)
        self._registry_channel = grpc.insecure_channel(registry, options=options)
        self.ledgers = ledger_pb2_grpc.LedgerServiceStub(self._gateway_channel)
        self.registry = registry_pb2_grpc.RegistryServiceStub(self._registry_channel)
        self._options = options
        self._placement_target = placement
        self.timeout = timeout

    def close(self) -> None:
        self._gateway_channel.close()
        self._registry_channel.close()

    def __enter__(self) -> QuireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _unary(self, method, request):  # type: ignore[no-untyped-def]
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise _translate(exc) from None

    def create_ledger(
        self,
        *,
        ensemble_size: int = 3,
        write_quorum_size: int = 2,
        ack_quorum_size: int = 2,
        password: bytes = b"",
        digest_type: int = common_pb2.DIGEST_TYPE_CRC32C,
        ledger_id: LedgerId | str | None = None,
        scope_id: int | None = None,
        legacy: bool = False,
        custom_metadata: dict[str, str] | None = None,
    ) -> common_pb2.LedgerMetadata:
        request = ledger_pb2.CreateLedgerRequest(
            ensemble_size=ensemble_size,
            write_quorum_size=write_quorum_size,
            ack_quorum_size=ack_quorum_size,
            password=password,
            digest_type=digest_type,
            custom_metadata=custom_metadata or {},
        )
        if ledger_id is not None:
            request.ledger_id.CopyFrom(ledger_id_to_proto(_as_ledger_id(ledger_id)))
        elif scope_id is not None:
            request.scope_id = scope_id
        elif legacy:
            request.legacy = True
        return self._unary(self.ledgers.CreateLedger, request).metadata

    def open_ledger(self, ledger: LedgerId | str, password: bytes = b"", recovery: bool = False):  # type: ignore[no-untyped-def]
        request = ledger_pb2.OpenLedgerRequest(
            ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)), password=password, recovery=recovery
        )
        return self._unary(self.ledgers.OpenLedger, request)

    def add_entry(self, ledger: LedgerId | str, payload: bytes) -> int:
        request = ledger_pb2.AddEntryRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)), payload=payload)
        return self._unary(self.ledgers.AddEntry, request).entry_id

    def append(self, ledger: LedgerId | str, payloads: Iterable[bytes], batch_size: int = 100) -> Iterator[AppendAck]:
        """Stream payloads in one write session, batch_size per message; yields
        acknowledgements as entries are confirmed."""
        ledger_proto = ledger_id_to_proto(_as_ledger_id(ledger))

        def requests() -> Iterator[ledger_pb2.AppendEntriesRequest]:
            yield ledger_pb2.AppendEntriesRequest(ledger_id=ledger_proto)
            batch: list[bytes] = []
            for payload in payloads:
                batch.append(payload)
                if len(batch) >= batch_size:
                    yield ledger_pb2.AppendEntriesRequest(payloads=batch)
                    batch = []
            if batch:
                yield ledger_pb2.AppendEntriesRequest(payloads=batch)

        try:
            for ack in self.ledgers.AppendEntries(requests(), timeout=self.timeout * 10):
                yield AppendAck(ack.first_entry_id, ack.last_entry_id, ack.last_add_confirmed)
        except grpc.RpcError as exc:
            raise _translate(exc) from None

    def append_all(self, ledger: LedgerId | str, payloads: Iterable[bytes], batch_size: int = 100) -> int:
        """Append everything; returns the last acknowledged entry id (-1 if none)."""
        last = -1
        for ack in self.append(ledger, payloads, batch_size):
            last = ack.last_entry_id
        return last

    def read(
        self, ledger: LedgerId | str, first: int = 0, last: int = -1, *, unconfirmed: bool = False
    ) -> Iterator[ledger_pb2.Entry]:
        ledger_proto = ledger_id_to_proto(_as_ledger_id(ledger))
        try:
            if unconfirmed:
                stream = self.ledgers.ReadUnconfirmedEntries(
                    ledger_pb2.ReadUnconfirmedEntriesRequest(
                        ledger_id=ledger_proto, first_entry_id=first, last_entry_id=last
                    ),
                    timeout=self.timeout * 10,
                )
            else:
                stream = self.ledgers.ReadEntries(
                    ledger_pb2.ReadEntriesRequest(ledger_id=ledger_proto, first_entry_id=first, last_entry_id=last),
                    timeout=self.timeout * 10,
                )
            for response in stream:
                yield from response.entries
        except grpc.RpcError as exc:
            raise _translate(exc) from None

    def last_add_confirmed(self, ledger: LedgerId | str) -> int:
        request = ledger_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        return self._unary(self.ledgers.ReadLastAddConfirmed, request).last_add_confirmed

    def close_ledger(self, ledger: LedgerId | str) -> common_pb2.LedgerMetadata:
        request = ledger_pb2.CloseLedgerRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        return self._unary(self.ledgers.CloseLedger, request).metadata

    def delete_ledger(self, ledger: LedgerId | str) -> None:
        request = ledger_pb2.DeleteLedgerRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        self._unary(self.ledgers.DeleteLedger, request)

    def ledger_metadata(self, ledger: LedgerId | str) -> tuple[common_pb2.LedgerMetadata, int]:
        request = ledger_pb2.GetLedgerMetadataRequest(ledger_id=ledger_id_to_proto(_as_ledger_id(ledger)))
        response = self._unary(self.ledgers.GetLedgerMetadata, request)
        return response.metadata, response.version

    def list_ledgers(self, scope_id: int | None = None, page_size: int = 100) -> Iterator[common_pb2.LedgerMetadata]:
        """Ledgers of one scope, or of every scope when scope_id is None."""
        token = ""
        while True:
            response = self._unary(
                self.ledgers.ListLedgers,
                ledger_pb2.ListLedgersRequest(
                    scope_id=scope_id or 0, all_scopes=scope_id is None, page_size=page_size, page_token=token
                ),
            )
            yield from response.ledgers
            token = response.next_page_token
            if not token:
                return

    def list_bookies(self, state: int = registry_pb2.BOOKIE_STATE_ALL) -> list[registry_pb2.BookieRecord]:
        return list(self._unary(self.registry.ListBookies, registry_pb2.ListBookiesRequest(state=state)).bookies)

    def bookie_info(self, record: registry_pb2.BookieRecord, timeout: float = 5.0) -> bookie_pb2.GetBookieInfoResponse:
        """One bookie's GetBookieInfo, at the address its registration resolves to."""
        address = bookie_rpc_address(record.bookie_id, record.service_info)
        with grpc.insecure_channel(address, options=self._options) as channel:
            try:
                return bookie_pb2_grpc.BookieServiceStub(channel).GetBookieInfo(
                    bookie_pb2.GetBookieInfoRequest(), timeout=timeout
                )
            except grpc.RpcError as exc:
                raise _translate(exc) from None

    def placement_weights(self) -> placement_pb2.GetPlacementWeightsResponse:
        with grpc.insecure_channel(self._placement_target, options=self._options) as channel:
            stub = placement_pb2_grpc.PlacementServiceStub(channel)
            return self._unary(stub.GetPlacementWeights, placement_pb2.GetPlacementWeightsRequest())

    def bookie_service_info(self, bookie_id: str) -> registry_pb2.GetBookieServiceInfoResponse:
        """A bookie's registration as stored, and the service info clients use."""
        validate_bookie_id(bookie_id)
        return self._unary(
            self.registry.GetBookieServiceInfo, registry_pb2.GetBookieServiceInfoRequest(bookie_id=bookie_id)
        )
