import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from quire_proto.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BookieState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOOKIE_STATE_UNSPECIFIED: _ClassVar[BookieState]
    BOOKIE_STATE_WRITABLE: _ClassVar[BookieState]
    BOOKIE_STATE_READ_ONLY: _ClassVar[BookieState]
    BOOKIE_STATE_ALL: _ClassVar[BookieState]

class BookieEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOOKIE_EVENT_TYPE_UNSPECIFIED: _ClassVar[BookieEventType]
    BOOKIE_EVENT_TYPE_SNAPSHOT: _ClassVar[BookieEventType]
    BOOKIE_EVENT_TYPE_JOINED: _ClassVar[BookieEventType]
    BOOKIE_EVENT_TYPE_LEFT: _ClassVar[BookieEventType]
    BOOKIE_EVENT_TYPE_CHANGED: _ClassVar[BookieEventType]
    BOOKIE_EVENT_TYPE_SNAPSHOT_DONE: _ClassVar[BookieEventType]

class LedgerMetadataEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEDGER_METADATA_EVENT_TYPE_UNSPECIFIED: _ClassVar[LedgerMetadataEventType]
    LEDGER_METADATA_EVENT_TYPE_STARTED: _ClassVar[LedgerMetadataEventType]
    LEDGER_METADATA_EVENT_TYPE_PUT: _ClassVar[LedgerMetadataEventType]
    LEDGER_METADATA_EVENT_TYPE_DELETED: _ClassVar[LedgerMetadataEventType]
    LEDGER_METADATA_EVENT_TYPE_RESET: _ClassVar[LedgerMetadataEventType]
    LEDGER_METADATA_EVENT_TYPE_PROGRESS: _ClassVar[LedgerMetadataEventType]
BOOKIE_STATE_UNSPECIFIED: BookieState
BOOKIE_STATE_WRITABLE: BookieState
BOOKIE_STATE_READ_ONLY: BookieState
BOOKIE_STATE_ALL: BookieState
BOOKIE_EVENT_TYPE_UNSPECIFIED: BookieEventType
BOOKIE_EVENT_TYPE_SNAPSHOT: BookieEventType
BOOKIE_EVENT_TYPE_JOINED: BookieEventType
BOOKIE_EVENT_TYPE_LEFT: BookieEventType
BOOKIE_EVENT_TYPE_CHANGED: BookieEventType
BOOKIE_EVENT_TYPE_SNAPSHOT_DONE: BookieEventType
LEDGER_METADATA_EVENT_TYPE_UNSPECIFIED: LedgerMetadataEventType
LEDGER_METADATA_EVENT_TYPE_STARTED: LedgerMetadataEventType
LEDGER_METADATA_EVENT_TYPE_PUT: LedgerMetadataEventType
LEDGER_METADATA_EVENT_TYPE_DELETED: LedgerMetadataEventType
LEDGER_METADATA_EVENT_TYPE_RESET: LedgerMetadataEventType
LEDGER_METADATA_EVENT_TYPE_PROGRESS: LedgerMetadataEventType

class BookieRecord(_message.Message):
    __slots__ = ("bookie_id", "read_only", "service_info", "version")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SERVICE_INFO_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    read_only: bool
    service_info: _common_pb2.BookieServiceInfo
    version: int
    def __init__(self, bookie_id: _Optional[str] = ..., read_only: _Optional[bool] = ..., service_info: _Optional[_Union[_common_pb2.BookieServiceInfo, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class RegisterBookieRequest(_message.Message):
    __slots__ = ("bookie_id", "read_only", "service_info", "ttl_seconds", "resume_lease_id")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SERVICE_INFO_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RESUME_LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    read_only: bool
    service_info: _common_pb2.BookieServiceInfo
    ttl_seconds: int
    resume_lease_id: int
    def __init__(self, bookie_id: _Optional[str] = ..., read_only: _Optional[bool] = ..., service_info: _Optional[_Union[_common_pb2.BookieServiceInfo, _Mapping]] = ..., ttl_seconds: _Optional[int] = ..., resume_lease_id: _Optional[int] = ...) -> None: ...

class RegisterBookieResponse(_message.Message):
    __slots__ = ("record", "ttl_seconds", "lease_id")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    record: BookieRecord
    ttl_seconds: int
    lease_id: int
    def __init__(self, record: _Optional[_Union[BookieRecord, _Mapping]] = ..., ttl_seconds: _Optional[int] = ..., lease_id: _Optional[int] = ...) -> None: ...

class ListBookiesRequest(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: BookieState
    def __init__(self, state: _Optional[_Union[BookieState, str]] = ...) -> None: ...

class ListBookiesResponse(_message.Message):
    __slots__ = ("bookies", "version")
    BOOKIES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    bookies: _containers.RepeatedCompositeFieldContainer[BookieRecord]
    version: int
    def __init__(self, bookies: _Optional[_Iterable[_Union[BookieRecord, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class GetBookieServiceInfoRequest(_message.Message):
    __slots__ = ("bookie_id",)
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    def __init__(self, bookie_id: _Optional[str] = ...) -> None: ...

class GetBookieServiceInfoResponse(_message.Message):
    __slots__ = ("record", "effective_service_info")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_SERVICE_INFO_FIELD_NUMBER: _ClassVar[int]
    record: BookieRecord
    effective_service_info: _common_pb2.BookieServiceInfo
    def __init__(self, record: _Optional[_Union[BookieRecord, _Mapping]] = ..., effective_service_info: _Optional[_Union[_common_pb2.BookieServiceInfo, _Mapping]] = ...) -> None: ...

class WatchBookiesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchBookiesResponse(_message.Message):
    __slots__ = ("type", "record")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    type: BookieEventType
    record: BookieRecord
    def __init__(self, type: _Optional[_Union[BookieEventType, str]] = ..., record: _Optional[_Union[BookieRecord, _Mapping]] = ...) -> None: ...

class GetCookieRequest(_message.Message):
    __slots__ = ("bookie_id",)
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    def __init__(self, bookie_id: _Optional[str] = ...) -> None: ...

class Cookie(_message.Message):
    __slots__ = ("instance_id", "data_dirs")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_DIRS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    data_dirs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, instance_id: _Optional[str] = ..., data_dirs: _Optional[_Iterable[str]] = ...) -> None: ...

class GetCookieResponse(_message.Message):
    __slots__ = ("cookie", "version")
    COOKIE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    cookie: Cookie
    version: int
    def __init__(self, cookie: _Optional[_Union[Cookie, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class PutCookieRequest(_message.Message):
    __slots__ = ("bookie_id", "cookie", "expected_version")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    COOKIE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    cookie: Cookie
    expected_version: int
    def __init__(self, bookie_id: _Optional[str] = ..., cookie: _Optional[_Union[Cookie, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class PutCookieResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class DeleteCookieRequest(_message.Message):
    __slots__ = ("bookie_id", "expected_version")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    expected_version: int
    def __init__(self, bookie_id: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class DeleteCookieResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateLedgerMetadataRequest(_message.Message):
    __slots__ = ("ledger_id", "scope_id", "legacy", "metadata", "request_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    LEGACY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    scope_id: int
    legacy: bool
    metadata: _common_pb2.LedgerMetadata
    request_id: str
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., scope_id: _Optional[int] = ..., legacy: _Optional[bool] = ..., metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateLedgerMetadataResponse(_message.Message):
    __slots__ = ("metadata", "version")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.LedgerMetadata
    version: int
    def __init__(self, metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class CreateLedgerMetadataBatchRequest(_message.Message):
    __slots__ = ("creates",)
    CREATES_FIELD_NUMBER: _ClassVar[int]
    creates: _containers.RepeatedCompositeFieldContainer[CreateLedgerMetadataRequest]
    def __init__(self, creates: _Optional[_Iterable[_Union[CreateLedgerMetadataRequest, _Mapping]]] = ...) -> None: ...

class CreateLedgerMetadataBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreateLedgerMetadataResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CreateLedgerMetadataResult, _Mapping]]] = ...) -> None: ...

class CreateLedgerMetadataResult(_message.Message):
    __slots__ = ("created", "code", "reason", "message", "error_metadata")
    class ErrorMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_METADATA_FIELD_NUMBER: _ClassVar[int]
    created: CreateLedgerMetadataResponse
    code: int
    reason: str
    message: str
    error_metadata: _containers.ScalarMap[str, str]
    def __init__(self, created: _Optional[_Union[CreateLedgerMetadataResponse, _Mapping]] = ..., code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., error_metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetLedgerMetadataRequest(_message.Message):
    __slots__ = ("ledger_id",)
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ...) -> None: ...

class GetLedgerMetadataResponse(_message.Message):
    __slots__ = ("metadata", "version")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.LedgerMetadata
    version: int
    def __init__(self, metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class UpdateLedgerMetadataRequest(_message.Message):
    __slots__ = ("ledger_id", "metadata", "expected_version")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    metadata: _common_pb2.LedgerMetadata
    expected_version: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateLedgerMetadataResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class DeleteLedgerMetadataRequest(_message.Message):
    __slots__ = ("ledger_id", "expected_version")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    expected_version: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class DeleteLedgerMetadataResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListLedgerMetadataRequest(_message.Message):
    __slots__ = ("scope_id", "page_size", "page_token", "all_scopes")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ALL_SCOPES_FIELD_NUMBER: _ClassVar[int]
    scope_id: int
    page_size: int
    page_token: str
    all_scopes: bool
    def __init__(self, scope_id: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., all_scopes: _Optional[bool] = ...) -> None: ...

class ListLedgerMetadataResponse(_message.Message):
    __slots__ = ("ledgers", "next_page_token")
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ledgers: _containers.RepeatedCompositeFieldContainer[_common_pb2.LedgerMetadata]
    next_page_token: str
    def __init__(self, ledgers: _Optional[_Iterable[_Union[_common_pb2.LedgerMetadata, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListLedgerIdsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListLedgerIdsResponse(_message.Message):
    __slots__ = ("scope_ids", "ledger_ids", "next_page_token")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEDGER_IDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[int]
    ledger_ids: _containers.RepeatedScalarFieldContainer[int]
    next_page_token: str
    def __init__(self, scope_ids: _Optional[_Iterable[int]] = ..., ledger_ids: _Optional[_Iterable[int]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchLedgerMetadataRequest(_message.Message):
    __slots__ = ("start_revision", "heartbeat_interval_ms")
    START_REVISION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    start_revision: int
    heartbeat_interval_ms: int
    def __init__(self, start_revision: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ...) -> None: ...

class WatchLedgerMetadataResponse(_message.Message):
    __slots__ = ("type", "ledger_id", "metadata", "revision")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    type: LedgerMetadataEventType
    ledger_id: _common_pb2.LedgerId
    metadata: _common_pb2.LedgerMetadata
    revision: int
    def __init__(self, type: _Optional[_Union[LedgerMetadataEventType, str]] = ..., ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ..., revision: _Optional[int] = ...) -> None: ...

class LoadWeight(_message.Message):
    __slots__ = ("bookie_id", "factor", "computed_at")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    FACTOR_FIELD_NUMBER: _ClassVar[int]
    COMPUTED_AT_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    factor: float
    computed_at: _timestamp_pb2.Timestamp
    def __init__(self, bookie_id: _Optional[str] = ..., factor: _Optional[float] = ..., computed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Leader(_message.Message):
    __slots__ = ("role", "holder", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROLE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    role: str
    holder: str
    properties: _containers.ScalarMap[str, str]
    def __init__(self, role: _Optional[str] = ..., holder: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CampaignRequest(_message.Message):
    __slots__ = ("role", "candidate", "ttl_seconds", "lease_id", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    role: str
    candidate: str
    ttl_seconds: int
    lease_id: int
    properties: _containers.ScalarMap[str, str]
    def __init__(self, role: _Optional[str] = ..., candidate: _Optional[str] = ..., ttl_seconds: _Optional[int] = ..., lease_id: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ("elected", "leader", "lease_id", "ttl_seconds")
    ELECTED_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    elected: bool
    leader: Leader
    lease_id: int
    ttl_seconds: int
    def __init__(self, elected: _Optional[bool] = ..., leader: _Optional[_Union[Leader, _Mapping]] = ..., lease_id: _Optional[int] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("role", "candidate", "lease_id")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    role: str
    candidate: str
    lease_id: int
    def __init__(self, role: _Optional[str] = ..., candidate: _Optional[str] = ..., lease_id: _Optional[int] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLeaderRequest(_message.Message):
    __slots__ = ("role",)
    ROLE_FIELD_NUMBER: _ClassVar[int]
    role: str
    def __init__(self, role: _Optional[str] = ...) -> None: ...

class GetLeaderResponse(_message.Message):
    __slots__ = ("leader", "lease_id")
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    leader: Leader
    lease_id: int
    def __init__(self, leader: _Optional[_Union[Leader, _Mapping]] = ..., lease_id: _Optional[int] = ...) -> None: ...

class ListLeadersRequest(_message.Message):
    __slots__ = ("role_prefix",)
    ROLE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    role_prefix: str
    def __init__(self, role_prefix: _Optional[str] = ...) -> None: ...

class ListLeadersResponse(_message.Message):
    __slots__ = ("leaders",)
    LEADERS_FIELD_NUMBER: _ClassVar[int]
    leaders: _containers.RepeatedCompositeFieldContainer[Leader]
    def __init__(self, leaders: _Optional[_Iterable[_Union[Leader, _Mapping]]] = ...) -> None: ...

class PutLoadWeightsRequest(_message.Message):
    __slots__ = ("weights",)
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    weights: _containers.RepeatedCompositeFieldContainer[LoadWeight]
    def __init__(self, weights: _Optional[_Iterable[_Union[LoadWeight, _Mapping]]] = ...) -> None: ...

class PutLoadWeightsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListLoadWeightsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListLoadWeightsResponse(_message.Message):
    __slots__ = ("weights",)
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    weights: _containers.RepeatedCompositeFieldContainer[LoadWeight]
    def __init__(self, weights: _Optional[_Iterable[_Union[LoadWeight, _Mapping]]] = ...) -> None: ...
