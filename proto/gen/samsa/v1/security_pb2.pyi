from samsa.v1 import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SaslAuthenticateRequest(_message.Message):
    __slots__ = ("mechanism", "auth_bytes")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    auth_bytes: bytes
    def __init__(self, mechanism: _Optional[str] = ..., auth_bytes: _Optional[bytes] = ...) -> None: ...

class SaslAuthenticateResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "auth_bytes", "session_ticket", "session_lifetime_ms", "enabled_mechanisms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    SESSION_TICKET_FIELD_NUMBER: _ClassVar[int]
    SESSION_LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    ENABLED_MECHANISMS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    auth_bytes: bytes
    session_ticket: str
    session_lifetime_ms: int
    enabled_mechanisms: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., auth_bytes: _Optional[bytes] = ..., session_ticket: _Optional[str] = ..., session_lifetime_ms: _Optional[int] = ..., enabled_mechanisms: _Optional[_Iterable[str]] = ...) -> None: ...
