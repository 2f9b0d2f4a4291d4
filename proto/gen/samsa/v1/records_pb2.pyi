from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Compression(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSION_UNSPECIFIED: _ClassVar[Compression]
    COMPRESSION_NONE: _ClassVar[Compression]
    COMPRESSION_ZSTD: _ClassVar[Compression]

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ISOLATION_LEVEL_UNSPECIFIED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_READ_UNCOMMITTED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_READ_COMMITTED: _ClassVar[IsolationLevel]
COMPRESSION_UNSPECIFIED: Compression
COMPRESSION_NONE: Compression
COMPRESSION_ZSTD: Compression
ISOLATION_LEVEL_UNSPECIFIED: IsolationLevel
ISOLATION_LEVEL_READ_UNCOMMITTED: IsolationLevel
ISOLATION_LEVEL_READ_COMMITTED: IsolationLevel

class Record(_message.Message):
    __slots__ = ("offset", "timestamp_ms", "key", "value", "headers")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    offset: int
    timestamp_ms: int
    key: bytes
    value: bytes
    headers: _containers.RepeatedCompositeFieldContainer[RecordHeader]
    def __init__(self, offset: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., headers: _Optional[_Iterable[_Union[RecordHeader, _Mapping]]] = ...) -> None: ...

class RecordHeader(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
