import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DigestType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIGEST_TYPE_UNSPECIFIED: _ClassVar[DigestType]
    DIGEST_TYPE_CRC32: _ClassVar[DigestType]
    DIGEST_TYPE_HMAC: _ClassVar[DigestType]
    DIGEST_TYPE_CRC32C: _ClassVar[DigestType]
    DIGEST_TYPE_DUMMY: _ClassVar[DigestType]

class LedgerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEDGER_STATE_UNSPECIFIED: _ClassVar[LedgerState]
    LEDGER_STATE_OPEN: _ClassVar[LedgerState]
    LEDGER_STATE_IN_RECOVERY: _ClassVar[LedgerState]
    LEDGER_STATE_CLOSED: _ClassVar[LedgerState]

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ARGUMENT: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_LEDGER_ID: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_QUORUM: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_BOOKIE_ID: _ClassVar[ErrorReason]
    ERROR_REASON_ENTRY_HEADER_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_LEDGER_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_ENTRY_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_BOOKIE_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_READ_BEYOND_LAC: _ClassVar[ErrorReason]
    ERROR_REASON_LEDGER_FENCED: _ClassVar[ErrorReason]
    ERROR_REASON_LEDGER_CLOSED: _ClassVar[ErrorReason]
    ERROR_REASON_BOOKIE_READ_ONLY: _ClassVar[ErrorReason]
    ERROR_REASON_LEDGER_NOT_WRITABLE_HERE: _ClassVar[ErrorReason]
    ERROR_REASON_LEDGER_OWNER_GONE: _ClassVar[ErrorReason]
    ERROR_REASON_UNEXPECTED_ENTRY_ID: _ClassVar[ErrorReason]
    ERROR_REASON_METADATA_VERSION_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_LEDGER_EXISTS: _ClassVar[ErrorReason]
    ERROR_REASON_BOOKIE_ALREADY_REGISTERED: _ClassVar[ErrorReason]
    ERROR_REASON_COOKIE_EXISTS: _ClassVar[ErrorReason]
    ERROR_REASON_REQUEST_ID_REUSED: _ClassVar[ErrorReason]
    ERROR_REASON_WRONG_PASSWORD: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_ENOUGH_BOOKIES: _ClassVar[ErrorReason]
    ERROR_REASON_BOOKIE_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_METADATA_STORE_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_SERVICE_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_DISK_FULL: _ClassVar[ErrorReason]
    ERROR_REASON_OVERLOADED: _ClassVar[ErrorReason]
    ERROR_REASON_ENTRY_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_DIGEST_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_STORAGE_ERROR: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_IMPLEMENTED: _ClassVar[ErrorReason]
    ERROR_REASON_UNAUTHENTICATED: _ClassVar[ErrorReason]
    ERROR_REASON_PERMISSION_DENIED_ROLE: _ClassVar[ErrorReason]
    ERROR_REASON_SERVICE_IDENTITY_REQUIRED: _ClassVar[ErrorReason]
    ERROR_REASON_CLIENT_IDENTITY_REQUIRED: _ClassVar[ErrorReason]
DIGEST_TYPE_UNSPECIFIED: DigestType
DIGEST_TYPE_CRC32: DigestType
DIGEST_TYPE_HMAC: DigestType
DIGEST_TYPE_CRC32C: DigestType
DIGEST_TYPE_DUMMY: DigestType
LEDGER_STATE_UNSPECIFIED: LedgerState
LEDGER_STATE_OPEN: LedgerState
LEDGER_STATE_IN_RECOVERY: LedgerState
LEDGER_STATE_CLOSED: LedgerState
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_INVALID_ARGUMENT: ErrorReason
ERROR_REASON_INVALID_LEDGER_ID: ErrorReason
ERROR_REASON_INVALID_QUORUM: ErrorReason
ERROR_REASON_INVALID_BOOKIE_ID: ErrorReason
ERROR_REASON_ENTRY_HEADER_MISMATCH: ErrorReason
ERROR_REASON_LEDGER_NOT_FOUND: ErrorReason
ERROR_REASON_ENTRY_NOT_FOUND: ErrorReason
ERROR_REASON_BOOKIE_NOT_FOUND: ErrorReason
ERROR_REASON_READ_BEYOND_LAC: ErrorReason
ERROR_REASON_LEDGER_FENCED: ErrorReason
ERROR_REASON_LEDGER_CLOSED: ErrorReason
ERROR_REASON_BOOKIE_READ_ONLY: ErrorReason
ERROR_REASON_LEDGER_NOT_WRITABLE_HERE: ErrorReason
ERROR_REASON_LEDGER_OWNER_GONE: ErrorReason
ERROR_REASON_UNEXPECTED_ENTRY_ID: ErrorReason
ERROR_REASON_METADATA_VERSION_CONFLICT: ErrorReason
ERROR_REASON_LEDGER_EXISTS: ErrorReason
ERROR_REASON_BOOKIE_ALREADY_REGISTERED: ErrorReason
ERROR_REASON_COOKIE_EXISTS: ErrorReason
ERROR_REASON_REQUEST_ID_REUSED: ErrorReason
ERROR_REASON_WRONG_PASSWORD: ErrorReason
ERROR_REASON_NOT_ENOUGH_BOOKIES: ErrorReason
ERROR_REASON_BOOKIE_UNAVAILABLE: ErrorReason
ERROR_REASON_METADATA_STORE_UNAVAILABLE: ErrorReason
ERROR_REASON_SERVICE_UNAVAILABLE: ErrorReason
ERROR_REASON_DISK_FULL: ErrorReason
ERROR_REASON_OVERLOADED: ErrorReason
ERROR_REASON_ENTRY_TOO_LARGE: ErrorReason
ERROR_REASON_DIGEST_MISMATCH: ErrorReason
ERROR_REASON_STORAGE_ERROR: ErrorReason
ERROR_REASON_NOT_IMPLEMENTED: ErrorReason
ERROR_REASON_UNAUTHENTICATED: ErrorReason
ERROR_REASON_PERMISSION_DENIED_ROLE: ErrorReason
ERROR_REASON_SERVICE_IDENTITY_REQUIRED: ErrorReason
ERROR_REASON_CLIENT_IDENTITY_REQUIRED: ErrorReason

class LedgerId(_message.Message):
    __slots__ = ("scope_id", "ledger_id", "qualified_name")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    QUALIFIED_NAME_FIELD_NUMBER: _ClassVar[int]
    scope_id: int
    ledger_id: int
    qualified_name: str
    def __init__(self, scope_id: _Optional[int] = ..., ledger_id: _Optional[int] = ..., qualified_name: _Optional[str] = ...) -> None: ...

class Ensemble(_message.Message):
    __slots__ = ("first_entry_id", "bookie_ids")
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    first_entry_id: int
    bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, first_entry_id: _Optional[int] = ..., bookie_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class LedgerMetadata(_message.Message):
    __slots__ = ("ledger_id", "format_version", "ensemble_size", "write_quorum_size", "ack_quorum_size", "state", "last_entry_id", "length", "digest_type", "password", "ensembles", "custom_metadata", "create_time", "create_request_id", "owner", "secrets")
    class CustomMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACK_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    DIGEST_TYPE_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLES_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    ledger_id: LedgerId
    format_version: int
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    state: LedgerState
    last_entry_id: int
    length: int
    digest_type: DigestType
    password: bytes
    ensembles: _containers.RepeatedCompositeFieldContainer[Ensemble]
    custom_metadata: _containers.ScalarMap[str, str]
    create_time: _timestamp_pb2.Timestamp
    create_request_id: str
    owner: LedgerOwner
    secrets: LedgerSecrets
    def __init__(self, ledger_id: _Optional[_Union[LedgerId, _Mapping]] = ..., format_version: _Optional[int] = ..., ensemble_size: _Optional[int] = ..., write_quorum_size: _Optional[int] = ..., ack_quorum_size: _Optional[int] = ..., state: _Optional[_Union[LedgerState, str]] = ..., last_entry_id: _Optional[int] = ..., length: _Optional[int] = ..., digest_type: _Optional[_Union[DigestType, str]] = ..., password: _Optional[bytes] = ..., ensembles: _Optional[_Iterable[_Union[Ensemble, _Mapping]]] = ..., custom_metadata: _Optional[_Mapping[str, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_request_id: _Optional[str] = ..., owner: _Optional[_Union[LedgerOwner, _Mapping]] = ..., secrets: _Optional[_Union[LedgerSecrets, _Mapping]] = ...) -> None: ...

class LedgerSecrets(_message.Message):
    __slots__ = ("password_salt", "password_iterations", "password_hash", "master_key", "mac_key")
    PASSWORD_SALT_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_HASH_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    MAC_KEY_FIELD_NUMBER: _ClassVar[int]
    password_salt: bytes
    password_iterations: int
    password_hash: bytes
    master_key: bytes
    mac_key: bytes
    def __init__(self, password_salt: _Optional[bytes] = ..., password_iterations: _Optional[int] = ..., password_hash: _Optional[bytes] = ..., master_key: _Optional[bytes] = ..., mac_key: _Optional[bytes] = ...) -> None: ...

class LedgerOwner(_message.Message):
    __slots__ = ("gateway", "address", "session_id")
    GATEWAY_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    gateway: str
    address: str
    session_id: int
    def __init__(self, gateway: _Optional[str] = ..., address: _Optional[str] = ..., session_id: _Optional[int] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("id", "host", "port", "protocol", "auth", "extensions")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    id: str
    host: str
    port: int
    protocol: str
    auth: _containers.RepeatedScalarFieldContainer[str]
    extensions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., protocol: _Optional[str] = ..., auth: _Optional[_Iterable[str]] = ..., extensions: _Optional[_Iterable[str]] = ...) -> None: ...

class BookieServiceInfo(_message.Message):
    __slots__ = ("endpoints", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...
