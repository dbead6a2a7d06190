from quire.common.v1 import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BlobId(_message.Message):
    __slots__ = ("ledger_id", "entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: _common_pb2.LedgerId
    entry_id: int
    def __init__(self, ledger_id: _Optional[_Union[_common_pb2.LedgerId, _Mapping]] = ..., entry_id: _Optional[int] = ...) -> None: ...

class PutBlobRequest(_message.Message):
    __slots__ = ("scope_id", "data")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    scope_id: int
    data: bytes
    def __init__(self, scope_id: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class PutBlobResponse(_message.Message):
    __slots__ = ("blob_id",)
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    blob_id: BlobId
    def __init__(self, blob_id: _Optional[_Union[BlobId, _Mapping]] = ...) -> None: ...

class GetBlobRequest(_message.Message):
    __slots__ = ("blob_id",)
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    blob_id: BlobId
    def __init__(self, blob_id: _Optional[_Union[BlobId, _Mapping]] = ...) -> None: ...

class GetBlobResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...
