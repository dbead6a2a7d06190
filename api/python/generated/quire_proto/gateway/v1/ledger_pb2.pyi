import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from quire_proto.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Entry(_message.Message):
    __slots__ = ("entry_id", "payload", "length")
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    entry_id: int
    payload: bytes
    length: int
    def __init__(self, entry_id: _Optional[int] = ..., payload: _Optional[bytes] = ..., length: _Optional[int] = ...) -> None: ...

class CreateLedgerRequest(_message.Message):
    __slots__ = ("ledger_id", "scope_id", "legacy", "ensemble_size", "write_quorum_size", "ack_quorum_size", "digest_type", "password", "custom_metadata", "request_id")
    class CustomMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    LEGACY_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACK_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_TYPE_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    scope_id: int
    legacy: bool
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    digest_type: _common_pb2.DigestType
    password: bytes
    custom_metadata: _containers.ScalarMap[str, str]
    request_id: str
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., scope_id: _Optional[int] = ..., legacy: _Optional[bool] = ..., ensemble_size: _Optional[int] = ..., write_quorum_size: _Optional[int] = ..., ack_quorum_size: _Optional[int] = ..., digest_type: _Optional[_Union[_common_pb2.DigestType, str]] = ..., password: _Optional[bytes] = ..., custom_metadata: _Optional[_Mapping[str, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateLedgerResponse(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.LedgerMetadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ...) -> None: ...

class OpenLedgerRequest(_message.Message):
    __slots__ = ("ledger_id", "password", "recovery")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    password: bytes
    recovery: bool
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., password: _Optional[bytes] = ..., recovery: _Optional[bool] = ...) -> None: ...

class OpenLedgerResponse(_message.Message):
    __slots__ = ("metadata", "last_add_confirmed")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.LedgerMetadata
    last_add_confirmed: int
    def __init__(self, metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ..., last_add_confirmed: _Optional[int] = ...) -> None: ...

class AppendEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "payloads", "expected_entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    payloads: _containers.RepeatedScalarFieldContainer[bytes]
    expected_entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., payloads: _Optional[_Iterable[bytes]] = ..., expected_entry_id: _Optional[int] = ...) -> None: ...

class AppendEntriesResponse(_message.Message):
    __slots__ = ("first_entry_id", "last_entry_id", "last_add_confirmed", "owner")
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    first_entry_id: int
    last_entry_id: int
    last_add_confirmed: int
    owner: _common_pb2.LedgerOwner
    def __init__(self, first_entry_id: _Optional[int] = ..., last_entry_id: _Optional[int] = ..., last_add_confirmed: _Optional[int] = ..., owner: _Optional[_Union[_common_pb2.LedgerOwner, _Mapping]] = ...) -> None: ...

class AddEntryRequest(_message.Message):
    __slots__ = ("ledger_id", "payload", "expected_entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    payload: bytes
    expected_entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., payload: _Optional[bytes] = ..., expected_entry_id: _Optional[int] = ...) -> None: ...

class AddEntryResponse(_message.Message):
    __slots__ = ("entry_id", "last_add_confirmed", "owner")
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    entry_id: int
    last_add_confirmed: int
    owner: _common_pb2.LedgerOwner
    def __init__(self, entry_id: _Optional[int] = ..., last_add_confirmed: _Optional[int] = ..., owner: _Optional[_Union[_common_pb2.LedgerOwner, _Mapping]] = ...) -> None: ...

class ReadEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "first_entry_id", "last_entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    first_entry_id: int
    last_entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., first_entry_id: _Optional[int] = ..., last_entry_id: _Optional[int] = ...) -> None: ...

class ReadEntriesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    def __init__(self, entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ...) -> None: ...

class ReadEntryRequest(_message.Message):
    __slots__ = ("ledger_id", "entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., entry_id: _Optional[int] = ...) -> None: ...

class ReadEntryResponse(_message.Message):
    __slots__ = ("entry", "error")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    entry: Entry
    error: ReadEntryError
    def __init__(self, entry: _Optional[_Union[Entry, _Mapping]] = ..., error: _Optional[_Union[ReadEntryError, _Mapping]] = ...) -> None: ...

class ReadEntryError(_message.Message):
    __slots__ = ("code", "reason", "message", "metadata", "retry_delay")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAY_FIELD_NUMBER: _ClassVar[int]
    code: int
    reason: str
    message: str
    metadata: _containers.ScalarMap[str, str]
    retry_delay: _duration_pb2.Duration
    def __init__(self, code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., retry_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ReadUnconfirmedEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "first_entry_id", "last_entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    first_entry_id: int
    last_entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., first_entry_id: _Optional[int] = ..., last_entry_id: _Optional[int] = ...) -> None: ...

class ReadUnconfirmedEntriesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    def __init__(self, entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ...) -> None: ...

class TailEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "first_entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    first_entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., first_entry_id: _Optional[int] = ...) -> None: ...

class TailEntriesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    def __init__(self, entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ...) -> None: ...

class ReadLastAddConfirmedRequest(_message.Message):
    __slots__ = ("ledger_id",)
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ...) -> None: ...

class ReadLastAddConfirmedResponse(_message.Message):
    __slots__ = ("last_add_confirmed",)
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    last_add_confirmed: int
    def __init__(self, last_add_confirmed: _Optional[int] = ...) -> None: ...

class CloseLedgerRequest(_message.Message):
    __slots__ = ("ledger_id",)
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ...) -> None: ...

class CloseLedgerResponse(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _common_pb2.LedgerMetadata
    def __init__(self, metadata: _Optional[_Union[_common_pb2.LedgerMetadata, _Mapping]] = ...) -> None: ...

class DeleteLedgerRequest(_message.Message):
    __slots__ = ("ledger_id",)
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ...) -> None: ...

class DeleteLedgerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

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

class ListLedgersRequest(_message.Message):
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

class ListLedgersResponse(_message.Message):
    __slots__ = ("ledgers", "next_page_token")
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ledgers: _containers.RepeatedCompositeFieldContainer[_common_pb2.LedgerMetadata]
    next_page_token: str
    def __init__(self, ledgers: _Optional[_Iterable[_Union[_common_pb2.LedgerMetadata, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
