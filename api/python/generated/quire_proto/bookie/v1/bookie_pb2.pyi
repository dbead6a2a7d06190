from quire_proto.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PackedEntry(_message.Message):
    __slots__ = ("entry_id", "data")
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    entry_id: int
    data: bytes
    def __init__(self, entry_id: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class AddEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "master_key", "entries", "recovery")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    master_key: bytes
    entries: _containers.RepeatedCompositeFieldContainer[PackedEntry]
    recovery: bool
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., master_key: _Optional[bytes] = ..., entries: _Optional[_Iterable[_Union[PackedEntry, _Mapping]]] = ..., recovery: _Optional[bool] = ...) -> None: ...

class AddEntriesResponse(_message.Message):
    __slots__ = ("entry_ids",)
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, entry_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class AddStreamRequest(_message.Message):
    __slots__ = ("adds", "stored_ids")
    ADDS_FIELD_NUMBER: _ClassVar[int]
    STORED_IDS_FIELD_NUMBER: _ClassVar[int]
    adds: _containers.RepeatedCompositeFieldContainer[StreamedAdd]
    stored_ids: bool
    def __init__(self, adds: _Optional[_Iterable[_Union[StreamedAdd, _Mapping]]] = ..., stored_ids: _Optional[bool] = ...) -> None: ...

class StreamedAdd(_message.Message):
    __slots__ = ("add_id", "ledger_id", "master_key", "entries", "recovery", "traceparent")
    ADD_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    add_id: int
    ledger_id: _common_pb2.LedgerId
    master_key: bytes
    entries: _containers.RepeatedCompositeFieldContainer[PackedEntry]
    recovery: bool
    traceparent: str
    def __init__(self, add_id: _Optional[int] = ..., ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., master_key: _Optional[bytes] = ..., entries: _Optional[_Iterable[_Union[PackedEntry, _Mapping]]] = ..., recovery: _Optional[bool] = ..., traceparent: _Optional[str] = ...) -> None: ...

class AddStreamResponse(_message.Message):
    __slots__ = ("results", "stored_add_ids")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    STORED_ADD_IDS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AddResult]
    stored_add_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, results: _Optional[_Iterable[_Union[AddResult, _Mapping]]] = ..., stored_add_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class AddResult(_message.Message):
    __slots__ = ("add_id", "code", "reason", "message")
    ADD_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    add_id: int
    code: int
    reason: str
    message: str
    def __init__(self, add_id: _Optional[int] = ..., code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ReadEntryRequest(_message.Message):
    __slots__ = ("ledger_id", "entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., entry_id: _Optional[int] = ...) -> None: ...

class ReadEntryResponse(_message.Message):
    __slots__ = ("entry",)
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    entry: PackedEntry
    def __init__(self, entry: _Optional[_Union[PackedEntry, _Mapping]] = ...) -> None: ...

class EntryRange(_message.Message):
    __slots__ = ("first_entry_id", "last_entry_id")
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    first_entry_id: int
    last_entry_id: int
    def __init__(self, first_entry_id: _Optional[int] = ..., last_entry_id: _Optional[int] = ...) -> None: ...

class ReadEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "entry_ids", "range", "max_bytes", "max_entries")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    range: EntryRange
    max_bytes: int
    max_entries: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., entry_ids: _Optional[_Iterable[int]] = ..., range: _Optional[_Union[EntryRange, _Mapping]] = ..., max_bytes: _Optional[int] = ..., max_entries: _Optional[int] = ...) -> None: ...

class ReadEntriesResponse(_message.Message):
    __slots__ = ("entries", "missing_entry_ids", "truncated")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MISSING_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[PackedEntry]
    missing_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    truncated: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[PackedEntry, _Mapping]]] = ..., missing_entry_ids: _Optional[_Iterable[int]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ReadLastAddConfirmedRequest(_message.Message):
    __slots__ = ("ledger_id", "previous_lac", "timeout_ms")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_LAC_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    previous_lac: int
    timeout_ms: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., previous_lac: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ReadLastAddConfirmedResponse(_message.Message):
    __slots__ = ("last_add_confirmed", "last_entry_id", "fenced")
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    last_add_confirmed: int
    last_entry_id: int
    fenced: bool
    def __init__(self, last_add_confirmed: _Optional[int] = ..., last_entry_id: _Optional[int] = ..., fenced: _Optional[bool] = ...) -> None: ...

class WriteLastAddConfirmedRequest(_message.Message):
    __slots__ = ("ledger_id", "master_key", "last_add_confirmed")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    master_key: bytes
    last_add_confirmed: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., master_key: _Optional[bytes] = ..., last_add_confirmed: _Optional[int] = ...) -> None: ...

class WriteLastAddConfirmedResponse(_message.Message):
    __slots__ = ("last_add_confirmed",)
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    last_add_confirmed: int
    def __init__(self, last_add_confirmed: _Optional[int] = ...) -> None: ...

class WriteLastAddConfirmedBatchRequest(_message.Message):
    __slots__ = ("writes",)
    WRITES_FIELD_NUMBER: _ClassVar[int]
    writes: _containers.RepeatedCompositeFieldContainer[WriteLastAddConfirmedRequest]
    def __init__(self, writes: _Optional[_Iterable[_Union[WriteLastAddConfirmedRequest, _Mapping]]] = ...) -> None: ...

class WriteLastAddConfirmedBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[LastAddConfirmedWritten]
    def __init__(self, results: _Optional[_Iterable[_Union[LastAddConfirmedWritten, _Mapping]]] = ...) -> None: ...

class LastAddConfirmedWritten(_message.Message):
    __slots__ = ("code", "reason", "message", "last_add_confirmed")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    code: int
    reason: str
    message: str
    last_add_confirmed: int
    def __init__(self, code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., last_add_confirmed: _Optional[int] = ...) -> None: ...

class FenceLedgerRequest(_message.Message):
    __slots__ = ("ledger_id", "master_key")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    master_key: bytes
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., master_key: _Optional[bytes] = ...) -> None: ...

class FenceLedgerResponse(_message.Message):
    __slots__ = ("last_add_confirmed", "last_entry_id")
    LAST_ADD_CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    last_add_confirmed: int
    last_entry_id: int
    def __init__(self, last_add_confirmed: _Optional[int] = ..., last_entry_id: _Optional[int] = ...) -> None: ...

class DeleteLedgerRequest(_message.Message):
    __slots__ = ("ledger_id",)
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ...) -> None: ...

class DeleteLedgerResponse(_message.Message):
    __slots__ = ("deleted_entries",)
    DELETED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    deleted_entries: int
    def __init__(self, deleted_entries: _Optional[int] = ...) -> None: ...

class FindMissingEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "entry_ids")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., entry_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class FindMissingEntriesResponse(_message.Message):
    __slots__ = ("missing_entry_ids",)
    MISSING_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    missing_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, missing_entry_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CheckEntriesRequest(_message.Message):
    __slots__ = ("ledgers", "stripes")
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    STRIPES_FIELD_NUMBER: _ClassVar[int]
    ledgers: _containers.RepeatedCompositeFieldContainer[LedgerEntriesToCheck]
    stripes: EntryStripes
    def __init__(self, ledgers: _Optional[_Iterable[_Union[LedgerEntriesToCheck, _Mapping]]] = ..., stripes: _Optional[_Union[EntryStripes, _Mapping]] = ...) -> None: ...

class EntryStripes(_message.Message):
    __slots__ = ("scope_ids", "ledger_ids", "first_entry_ids", "last_entry_ids", "ensemble_sizes", "write_quorums", "positions", "verify_first_ids", "verify_last_ids")
    SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEDGER_IDS_FIELD_NUMBER: _ClassVar[int]
    FIRST_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_SIZES_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUORUMS_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIRST_IDS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_LAST_IDS_FIELD_NUMBER: _ClassVar[int]
    scope_ids: _containers.RepeatedScalarFieldContainer[int]
    ledger_ids: _containers.RepeatedScalarFieldContainer[int]
    first_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    last_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    ensemble_sizes: _containers.RepeatedScalarFieldContainer[int]
    write_quorums: _containers.RepeatedScalarFieldContainer[int]
    positions: _containers.RepeatedScalarFieldContainer[int]
    verify_first_ids: _containers.RepeatedScalarFieldContainer[int]
    verify_last_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, scope_ids: _Optional[_Iterable[int]] = ..., ledger_ids: _Optional[_Iterable[int]] = ..., first_entry_ids: _Optional[_Iterable[int]] = ..., last_entry_ids: _Optional[_Iterable[int]] = ..., ensemble_sizes: _Optional[_Iterable[int]] = ..., write_quorums: _Optional[_Iterable[int]] = ..., positions: _Optional[_Iterable[int]] = ..., verify_first_ids: _Optional[_Iterable[int]] = ..., verify_last_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class LedgerEntriesToCheck(_message.Message):
    __slots__ = ("ledger_id", "entry_ids", "verify_entry_ids")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    verify_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., entry_ids: _Optional[_Iterable[int]] = ..., verify_entry_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CheckEntriesResponse(_message.Message):
    __slots__ = ("ledgers", "rows_checked", "missing_rows", "missing_entry_ids", "damaged_rows", "damaged_entry_ids", "bytes_verified")
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    ROWS_CHECKED_FIELD_NUMBER: _ClassVar[int]
    MISSING_ROWS_FIELD_NUMBER: _ClassVar[int]
    MISSING_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    DAMAGED_ROWS_FIELD_NUMBER: _ClassVar[int]
    DAMAGED_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    ledgers: _containers.RepeatedCompositeFieldContainer[LedgerEntriesFound]
    rows_checked: int
    missing_rows: _containers.RepeatedScalarFieldContainer[int]
    missing_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    damaged_rows: _containers.RepeatedScalarFieldContainer[int]
    damaged_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    bytes_verified: int
    def __init__(self, ledgers: _Optional[_Iterable[_Union[LedgerEntriesFound, _Mapping]]] = ..., rows_checked: _Optional[int] = ..., missing_rows: _Optional[_Iterable[int]] = ..., missing_entry_ids: _Optional[_Iterable[int]] = ..., damaged_rows: _Optional[_Iterable[int]] = ..., damaged_entry_ids: _Optional[_Iterable[int]] = ..., bytes_verified: _Optional[int] = ...) -> None: ...

class LedgerEntriesFound(_message.Message):
    __slots__ = ("ledger_id", "missing_entry_ids", "damaged_entry_ids", "bytes_verified")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MISSING_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    DAMAGED_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    missing_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    damaged_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    bytes_verified: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., missing_entry_ids: _Optional[_Iterable[int]] = ..., damaged_entry_ids: _Optional[_Iterable[int]] = ..., bytes_verified: _Optional[int] = ...) -> None: ...

class GetBookieInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBookieInfoResponse(_message.Message):
    __slots__ = ("total_disk_bytes", "free_disk_bytes", "read_only", "adds_per_second", "add_bytes_per_second", "sync_latency_ms", "sync_latency_p50_ms", "sync_latency_p99_ms", "used_bytes", "read_only_reason", "sync_disabled")
    TOTAL_DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    FREE_DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    ADDS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    ADD_BYTES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    SYNC_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    SYNC_LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    SYNC_LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_REASON_FIELD_NUMBER: _ClassVar[int]
    SYNC_DISABLED_FIELD_NUMBER: _ClassVar[int]
    total_disk_bytes: int
    free_disk_bytes: int
    read_only: bool
    adds_per_second: float
    add_bytes_per_second: float
    sync_latency_ms: float
    sync_latency_p50_ms: float
    sync_latency_p99_ms: float
    used_bytes: int
    read_only_reason: str
    sync_disabled: bool
    def __init__(self, total_disk_bytes: _Optional[int] = ..., free_disk_bytes: _Optional[int] = ..., read_only: _Optional[bool] = ..., adds_per_second: _Optional[float] = ..., add_bytes_per_second: _Optional[float] = ..., sync_latency_ms: _Optional[float] = ..., sync_latency_p50_ms: _Optional[float] = ..., sync_latency_p99_ms: _Optional[float] = ..., used_bytes: _Optional[int] = ..., read_only_reason: _Optional[str] = ..., sync_disabled: _Optional[bool] = ...) -> None: ...
