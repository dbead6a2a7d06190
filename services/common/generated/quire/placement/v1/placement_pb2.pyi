from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class NewEnsembleRequest(_message.Message):
    __slots__ = ("ensemble_size", "write_quorum_size", "ack_quorum_size", "exclude_bookie_ids", "custom_metadata")
    class CustomMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENSEMBLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACK_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    exclude_bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    custom_metadata: _containers.ScalarMap[str, str]
    def __init__(self, ensemble_size: _Optional[int] = ..., write_quorum_size: _Optional[int] = ..., ack_quorum_size: _Optional[int] = ..., exclude_bookie_ids: _Optional[_Iterable[str]] = ..., custom_metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class NewEnsembleResponse(_message.Message):
    __slots__ = ("bookie_ids",)
    BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, bookie_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ReplaceBookieRequest(_message.Message):
    __slots__ = ("ensemble_size", "write_quorum_size", "ack_quorum_size", "ensemble_bookie_ids", "failed_bookie_id", "exclude_bookie_ids", "custom_metadata")
    class CustomMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENSEMBLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACK_QUORUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    FAILED_BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    ensemble_bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    failed_bookie_id: str
    exclude_bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    custom_metadata: _containers.ScalarMap[str, str]
    def __init__(self, ensemble_size: _Optional[int] = ..., write_quorum_size: _Optional[int] = ..., ack_quorum_size: _Optional[int] = ..., ensemble_bookie_ids: _Optional[_Iterable[str]] = ..., failed_bookie_id: _Optional[str] = ..., exclude_bookie_ids: _Optional[_Iterable[str]] = ..., custom_metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ReplaceBookieResponse(_message.Message):
    __slots__ = ("bookie_id",)
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    def __init__(self, bookie_id: _Optional[str] = ...) -> None: ...
