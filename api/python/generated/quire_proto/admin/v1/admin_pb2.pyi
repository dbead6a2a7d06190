import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from quire_proto.common.v1 import common_pb2 as _common_pb2
from quire_proto.placement.v1 import placement_pb2 as _placement_pb2
from quire_proto.registry.v1 import registry_pb2 as _registry_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListBookiesRequest(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: _registry_pb2.BookieState
    def __init__(self, state: _Optional[_Union[_registry_pb2.BookieState, str]] = ...) -> None: ...

class ListBookiesResponse(_message.Message):
    __slots__ = ("bookies",)
    BOOKIES_FIELD_NUMBER: _ClassVar[int]
    bookies: _containers.RepeatedCompositeFieldContainer[_registry_pb2.BookieRecord]
    def __init__(self, bookies: _Optional[_Iterable[_Union[_registry_pb2.BookieRecord, _Mapping]]] = ...) -> None: ...

class GetBookieServiceInfoRequest(_message.Message):
    __slots__ = ("bookie_id",)
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    def __init__(self, bookie_id: _Optional[str] = ...) -> None: ...

class GetBookieServiceInfoResponse(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: _registry_pb2.GetBookieServiceInfoResponse
    def __init__(self, info: _Optional[_Union[_registry_pb2.GetBookieServiceInfoResponse, _Mapping]] = ...) -> None: ...

class GetBookieDisksRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BookieDisk(_message.Message):
    __slots__ = ("bookie_id", "free_disk_bytes", "total_disk_bytes", "error")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    FREE_DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    free_disk_bytes: int
    total_disk_bytes: int
    error: str
    def __init__(self, bookie_id: _Optional[str] = ..., free_disk_bytes: _Optional[int] = ..., total_disk_bytes: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class GetBookieDisksResponse(_message.Message):
    __slots__ = ("bookies",)
    BOOKIES_FIELD_NUMBER: _ClassVar[int]
    bookies: _containers.RepeatedCompositeFieldContainer[BookieDisk]
    def __init__(self, bookies: _Optional[_Iterable[_Union[BookieDisk, _Mapping]]] = ...) -> None: ...

class GetPlacementWeightsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPlacementWeightsResponse(_message.Message):
    __slots__ = ("weights",)
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    weights: _placement_pb2.GetPlacementWeightsResponse
    def __init__(self, weights: _Optional[_Union[_placement_pb2.GetPlacementWeightsResponse, _Mapping]] = ...) -> None: ...

class GetAuditorRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAuditorResponse(_message.Message):
    __slots__ = ("auditor",)
    AUDITOR_FIELD_NUMBER: _ClassVar[int]
    auditor: _registry_pb2.Leader
    def __init__(self, auditor: _Optional[_Union[_registry_pb2.Leader, _Mapping]] = ...) -> None: ...

class GetRecoveryStatusRequest(_message.Message):
    __slots__ = ("bookie_id",)
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    def __init__(self, bookie_id: _Optional[str] = ...) -> None: ...

class UnderReplicatedSegment(_message.Message):
    __slots__ = ("ledger_id", "state", "segment", "first_entry_id", "last_entry_id", "bookie_id", "why")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    state: _common_pb2.LedgerState
    segment: int
    first_entry_id: int
    last_entry_id: int
    bookie_id: str
    why: str
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., state: _Optional[_Union[_common_pb2.LedgerState, str]] = ..., segment: _Optional[int] = ..., first_entry_id: _Optional[int] = ..., last_entry_id: _Optional[int] = ..., bookie_id: _Optional[str] = ..., why: _Optional[str] = ...) -> None: ...

class GetRecoveryStatusResponse(_message.Message):
    __slots__ = ("auditor", "segments", "total_segments")
    AUDITOR_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    auditor: _registry_pb2.Leader
    segments: _containers.RepeatedCompositeFieldContainer[UnderReplicatedSegment]
    total_segments: int
    def __init__(self, auditor: _Optional[_Union[_registry_pb2.Leader, _Mapping]] = ..., segments: _Optional[_Iterable[_Union[UnderReplicatedSegment, _Mapping]]] = ..., total_segments: _Optional[int] = ...) -> None: ...

class DeleteBookieCookieRequest(_message.Message):
    __slots__ = ("bookie_id",)
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    def __init__(self, bookie_id: _Optional[str] = ...) -> None: ...

class DeleteBookieCookieResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServiceHealth(_message.Message):
    __slots__ = ("service", "address", "health", "version", "detail", "bookie_state")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    BOOKIE_STATE_FIELD_NUMBER: _ClassVar[int]
    service: str
    address: str
    health: str
    version: str
    detail: str
    bookie_state: str
    def __init__(self, service: _Optional[str] = ..., address: _Optional[str] = ..., health: _Optional[str] = ..., version: _Optional[str] = ..., detail: _Optional[str] = ..., bookie_state: _Optional[str] = ...) -> None: ...

class CertificateExpiry(_message.Message):
    __slots__ = ("certificate", "not_after")
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    NOT_AFTER_FIELD_NUMBER: _ClassVar[int]
    certificate: str
    not_after: _timestamp_pb2.Timestamp
    def __init__(self, certificate: _Optional[str] = ..., not_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetClusterStatusResponse(_message.Message):
    __slots__ = ("services", "writable_bookies", "read_only_bookies", "largest_ensemble", "auditor", "under_replicated_ledgers", "under_replicated_segments", "scrub_lag_seconds", "certificates", "missing_bookie_ids")
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_BOOKIES_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_BOOKIES_FIELD_NUMBER: _ClassVar[int]
    LARGEST_ENSEMBLE_FIELD_NUMBER: _ClassVar[int]
    AUDITOR_FIELD_NUMBER: _ClassVar[int]
    UNDER_REPLICATED_LEDGERS_FIELD_NUMBER: _ClassVar[int]
    UNDER_REPLICATED_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    SCRUB_LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    MISSING_BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    services: _containers.RepeatedCompositeFieldContainer[ServiceHealth]
    writable_bookies: int
    read_only_bookies: int
    largest_ensemble: int
    auditor: str
    under_replicated_ledgers: int
    under_replicated_segments: int
    scrub_lag_seconds: float
    certificates: _containers.RepeatedCompositeFieldContainer[CertificateExpiry]
    missing_bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, services: _Optional[_Iterable[_Union[ServiceHealth, _Mapping]]] = ..., writable_bookies: _Optional[int] = ..., read_only_bookies: _Optional[int] = ..., largest_ensemble: _Optional[int] = ..., auditor: _Optional[str] = ..., under_replicated_ledgers: _Optional[int] = ..., under_replicated_segments: _Optional[int] = ..., scrub_lag_seconds: _Optional[float] = ..., certificates: _Optional[_Iterable[_Union[CertificateExpiry, _Mapping]]] = ..., missing_bookie_ids: _Optional[_Iterable[str]] = ...) -> None: ...
