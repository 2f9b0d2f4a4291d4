from samsa.v1 import coordinator_pb2 as _coordinator_pb2
from samsa.v1 import group_records_pb2 as _group_records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TransactionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_STATE_UNSPECIFIED: _ClassVar[TransactionState]
    TRANSACTION_STATE_EMPTY: _ClassVar[TransactionState]
    TRANSACTION_STATE_ONGOING: _ClassVar[TransactionState]
    TRANSACTION_STATE_PREPARE_COMMIT: _ClassVar[TransactionState]
    TRANSACTION_STATE_PREPARE_ABORT: _ClassVar[TransactionState]
    TRANSACTION_STATE_COMPLETE_COMMIT: _ClassVar[TransactionState]
    TRANSACTION_STATE_COMPLETE_ABORT: _ClassVar[TransactionState]
    TRANSACTION_STATE_PREPARE_EPOCH_FENCE: _ClassVar[TransactionState]
    TRANSACTION_STATE_DEAD: _ClassVar[TransactionState]
TRANSACTION_STATE_UNSPECIFIED: TransactionState
TRANSACTION_STATE_EMPTY: TransactionState
TRANSACTION_STATE_ONGOING: TransactionState
TRANSACTION_STATE_PREPARE_COMMIT: TransactionState
TRANSACTION_STATE_PREPARE_ABORT: TransactionState
TRANSACTION_STATE_COMPLETE_COMMIT: TransactionState
TRANSACTION_STATE_COMPLETE_ABORT: TransactionState
TRANSACTION_STATE_PREPARE_EPOCH_FENCE: TransactionState
TRANSACTION_STATE_DEAD: TransactionState

class TransactionRecordKey(_message.Message):
    __slots__ = ("transactional_id", "writer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    WRITER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    writer_epoch: _group_records_pb2.WriterEpochKey
    def __init__(self, transactional_id: _Optional[str] = ..., writer_epoch: _Optional[_Union[_group_records_pb2.WriterEpochKey, _Mapping]] = ...) -> None: ...

class TransactionRecordValue(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "previous_producer_id", "previous_producer_epoch", "next_producer_id", "transaction_timeout_ms", "state", "partitions", "transaction_start_ms", "last_update_ms")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_START_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_MS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    previous_producer_id: int
    previous_producer_epoch: int
    next_producer_id: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: _containers.RepeatedCompositeFieldContainer[_coordinator_pb2.TopicPartitions]
    transaction_start_ms: int
    last_update_ms: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., previous_producer_id: _Optional[int] = ..., previous_producer_epoch: _Optional[int] = ..., next_producer_id: _Optional[int] = ..., transaction_timeout_ms: _Optional[int] = ..., state: _Optional[_Union[TransactionState, str]] = ..., partitions: _Optional[_Iterable[_Union[_coordinator_pb2.TopicPartitions, _Mapping]]] = ..., transaction_start_ms: _Optional[int] = ..., last_update_ms: _Optional[int] = ...) -> None: ...
