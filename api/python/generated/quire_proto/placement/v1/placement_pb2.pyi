import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

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

class NewEnsemblesRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[NewEnsembleRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[NewEnsembleRequest, _Mapping]]] = ...) -> None: ...

class NewEnsemblesResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[NewEnsembleResult]
    def __init__(self, results: _Optional[_Iterable[_Union[NewEnsembleResult, _Mapping]]] = ...) -> None: ...

class NewEnsembleResult(_message.Message):
    __slots__ = ("bookie_ids", "code", "reason", "message", "error_metadata")
    class ErrorMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_METADATA_FIELD_NUMBER: _ClassVar[int]
    bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    code: int
    reason: str
    message: str
    error_metadata: _containers.ScalarMap[str, str]
    def __init__(self, bookie_ids: _Optional[_Iterable[str]] = ..., code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., error_metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

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

class GetPlacementWeightsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BookieWeight(_message.Message):
    __slots__ = ("bookie_id", "free_bytes", "total_bytes", "natural_weight", "capped_weight", "load_factor", "selection_probability", "info_read_at", "selections")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    NATURAL_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CAPPED_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LOAD_FACTOR_FIELD_NUMBER: _ClassVar[int]
    SELECTION_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    INFO_READ_AT_FIELD_NUMBER: _ClassVar[int]
    SELECTIONS_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    free_bytes: int
    total_bytes: int
    natural_weight: float
    capped_weight: float
    load_factor: float
    selection_probability: float
    info_read_at: _timestamp_pb2.Timestamp
    selections: int
    def __init__(self, bookie_id: _Optional[str] = ..., free_bytes: _Optional[int] = ..., total_bytes: _Optional[int] = ..., natural_weight: _Optional[float] = ..., capped_weight: _Optional[float] = ..., load_factor: _Optional[float] = ..., selection_probability: _Optional[float] = ..., info_read_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., selections: _Optional[int] = ...) -> None: ...

class GetPlacementWeightsResponse(_message.Message):
    __slots__ = ("disk_weight_placement_enabled", "max_weight_multiple", "bookies", "unknown_bookie_ids", "policy")
    DISK_WEIGHT_PLACEMENT_ENABLED_FIELD_NUMBER: _ClassVar[int]
    MAX_WEIGHT_MULTIPLE_FIELD_NUMBER: _ClassVar[int]
    BOOKIES_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_BOOKIE_IDS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    disk_weight_placement_enabled: bool
    max_weight_multiple: float
    bookies: _containers.RepeatedCompositeFieldContainer[BookieWeight]
    unknown_bookie_ids: _containers.RepeatedScalarFieldContainer[str]
    policy: str
    def __init__(self, disk_weight_placement_enabled: _Optional[bool] = ..., max_weight_multiple: _Optional[float] = ..., bookies: _Optional[_Iterable[_Union[BookieWeight, _Mapping]]] = ..., unknown_bookie_ids: _Optional[_Iterable[str]] = ..., policy: _Optional[str] = ...) -> None: ...
