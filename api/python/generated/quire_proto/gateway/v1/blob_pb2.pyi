from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PutBlobRequest(_message.Message):
    __slots__ = ("scope_id", "data")
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    scope_id: int
    data: bytes
    def __init__(self, scope_id: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class PutBlobResponse(_message.Message):
    __slots__ = ("blob_id", "size_bytes")
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    blob_id: str
    size_bytes: int
    def __init__(self, blob_id: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class GetBlobRequest(_message.Message):
    __slots__ = ("blob_id",)
    BLOB_ID_FIELD_NUMBER: _ClassVar[int]
    blob_id: str
    def __init__(self, blob_id: _Optional[str] = ...) -> None: ...

class GetBlobResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...
