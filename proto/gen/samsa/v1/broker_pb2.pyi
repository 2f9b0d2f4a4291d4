from samsa.v1 import errors_pb2 as _errors_pb2
from samsa.v1 import records_pb2 as _records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OffsetSpec(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OFFSET_SPEC_UNSPECIFIED: _ClassVar[OffsetSpec]
    OFFSET_SPEC_EARLIEST: _ClassVar[OffsetSpec]
    OFFSET_SPEC_LATEST: _ClassVar[OffsetSpec]
    OFFSET_SPEC_TIMESTAMP: _ClassVar[OffsetSpec]
    OFFSET_SPEC_MAX_TIMESTAMP: _ClassVar[OffsetSpec]
OFFSET_SPEC_UNSPECIFIED: OffsetSpec
OFFSET_SPEC_EARLIEST: OffsetSpec
OFFSET_SPEC_LATEST: OffsetSpec
OFFSET_SPEC_TIMESTAMP: OffsetSpec
OFFSET_SPEC_MAX_TIMESTAMP: OffsetSpec

class LeaderIdAndEpoch(_message.Message):
    __slots__ = ("leader_id", "leader_epoch")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_epoch: int
    def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("transactional_id", "acks", "timeout_ms", "topics", "add_partitions_to_txn")
    class TopicData(_message.Message):
        __slots__ = ("name", "partitions", "topic_id")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ProduceRequest.PartitionData]
        topic_id: bytes
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ProduceRequest.PartitionData, _Mapping]]] = ..., topic_id: _Optional[bytes] = ...) -> None: ...
    class PartitionData(_message.Message):
        __slots__ = ("partition", "records", "typed_records", "compression", "producer_id", "producer_epoch", "base_sequence")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        TYPED_RECORDS_FIELD_NUMBER: _ClassVar[int]
        COMPRESSION_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        BASE_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        partition: int
        records: bytes
        typed_records: _containers.RepeatedCompositeFieldContainer[_records_pb2.Record]
        compression: _records_pb2.Compression
        producer_id: int
        producer_epoch: int
        base_sequence: int
        def __init__(self, partition: _Optional[int] = ..., records: _Optional[bytes] = ..., typed_records: _Optional[_Iterable[_Union[_records_pb2.Record, _Mapping]]] = ..., compression: _Optional[_Union[_records_pb2.Compression, str]] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., base_sequence: _Optional[int] = ...) -> None: ...
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ADD_PARTITIONS_TO_TXN_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    acks: int
    timeout_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[ProduceRequest.TopicData]
    add_partitions_to_txn: bool
    def __init__(self, transactional_id: _Optional[str] = ..., acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ProduceRequest.TopicData, _Mapping]]] = ..., add_partitions_to_txn: _Optional[bool] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    class TopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ProduceResponse.PartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ProduceResponse.PartitionResponse, _Mapping]]] = ...) -> None: ...
    class PartitionResponse(_message.Message):
        __slots__ = ("partition", "error_code", "error_message", "base_offset", "log_append_time_ms", "log_start_offset", "current_leader")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error_code: _errors_pb2.ErrorCode
        error_message: str
        base_offset: int
        log_append_time_ms: int
        log_start_offset: int
        current_leader: LeaderIdAndEpoch
        def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., base_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[ProduceResponse.TopicResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ProduceResponse.TopicResponse, _Mapping]]] = ...) -> None: ...

class InitProducerIdRequest(_message.Message):
    __slots__ = ("transactional_id",)
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    def __init__(self, transactional_id: _Optional[str] = ...) -> None: ...

class InitProducerIdResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "producer_id", "producer_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    producer_id: int
    producer_epoch: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("markers", "timeout_ms")
    class TopicPartitions(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    class TransactionMarker(_message.Message):
        __slots__ = ("producer_id", "producer_epoch", "committed", "coordinator_epoch", "topics")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_FIELD_NUMBER: _ClassVar[int]
        COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        producer_epoch: int
        committed: bool
        coordinator_epoch: int
        topics: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersRequest.TopicPartitions]
        def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., coordinator_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[WriteTxnMarkersRequest.TopicPartitions, _Mapping]]] = ...) -> None: ...
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersRequest.TransactionMarker]
    timeout_ms: int
    def __init__(self, markers: _Optional[_Iterable[_Union[WriteTxnMarkersRequest.TransactionMarker, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("markers",)
    class PartitionResult(_message.Message):
        __slots__ = ("partition", "error_code", "error_message", "current_leader")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error_code: _errors_pb2.ErrorCode
        error_message: str
        current_leader: LeaderIdAndEpoch
        def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ...) -> None: ...
    class TopicResult(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersResponse.PartitionResult]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[WriteTxnMarkersResponse.PartitionResult, _Mapping]]] = ...) -> None: ...
    class MarkerResult(_message.Message):
        __slots__ = ("producer_id", "topics")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        topics: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersResponse.TopicResult]
        def __init__(self, producer_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[WriteTxnMarkersResponse.TopicResult, _Mapping]]] = ...) -> None: ...
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersResponse.MarkerResult]
    def __init__(self, markers: _Optional[_Iterable[_Union[WriteTxnMarkersResponse.MarkerResult, _Mapping]]] = ...) -> None: ...

class DescribeProducersRequest(_message.Message):
    __slots__ = ("topics",)
    class TopicRequest(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeProducersRequest.TopicRequest]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeProducersRequest.TopicRequest, _Mapping]]] = ...) -> None: ...

class DescribeProducersResponse(_message.Message):
    __slots__ = ("topics",)
    class ProducerState(_message.Message):
        __slots__ = ("producer_id", "producer_epoch", "last_sequence", "last_timestamp_ms", "current_txn_start_offset", "last_append_age_ms")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        LAST_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
        CURRENT_TXN_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LAST_APPEND_AGE_MS_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        producer_epoch: int
        last_sequence: int
        last_timestamp_ms: int
        current_txn_start_offset: int
        last_append_age_ms: int
        def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., last_sequence: _Optional[int] = ..., last_timestamp_ms: _Optional[int] = ..., current_txn_start_offset: _Optional[int] = ..., last_append_age_ms: _Optional[int] = ...) -> None: ...
    class PartitionResponse(_message.Message):
        __slots__ = ("partition", "error_code", "error_message", "active_producers")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        ACTIVE_PRODUCERS_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error_code: _errors_pb2.ErrorCode
        error_message: str
        active_producers: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.ProducerState]
        def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_producers: _Optional[_Iterable[_Union[DescribeProducersResponse.ProducerState, _Mapping]]] = ...) -> None: ...
    class TopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.PartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DescribeProducersResponse.PartitionResponse, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.TopicResponse]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeProducersResponse.TopicResponse, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "decode_records", "rack_id", "topics", "session_id", "session_epoch", "forgotten_topics")
    class TopicData(_message.Message):
        __slots__ = ("name", "partitions", "topic_id")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[FetchRequest.PartitionData]
        topic_id: bytes
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchRequest.PartitionData, _Mapping]]] = ..., topic_id: _Optional[bytes] = ...) -> None: ...
    class PartitionData(_message.Message):
        __slots__ = ("partition", "fetch_offset", "current_leader_epoch", "last_fetched_epoch", "log_start_offset", "partition_max_bytes")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
        partition: int
        fetch_offset: int
        current_leader_epoch: int
        last_fetched_epoch: int
        log_start_offset: int
        partition_max_bytes: int
        def __init__(self, partition: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ...) -> None: ...
    class ForgottenTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    DECODE_RECORDS_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: _records_pb2.IsolationLevel
    decode_records: bool
    rack_id: str
    topics: _containers.RepeatedCompositeFieldContainer[FetchRequest.TopicData]
    session_id: int
    session_epoch: int
    forgotten_topics: _containers.RepeatedCompositeFieldContainer[FetchRequest.ForgottenTopic]
    def __init__(self, replica_id: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[_Union[_records_pb2.IsolationLevel, str]] = ..., decode_records: _Optional[bool] = ..., rack_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[FetchRequest.TopicData, _Mapping]]] = ..., session_id: _Optional[int] = ..., session_epoch: _Optional[int] = ..., forgotten_topics: _Optional[_Iterable[_Union[FetchRequest.ForgottenTopic, _Mapping]]] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics", "session_id", "error_code", "error_message")
    class TopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[FetchResponse.PartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchResponse.PartitionResponse, _Mapping]]] = ...) -> None: ...
    class AbortedTransaction(_message.Message):
        __slots__ = ("producer_id", "first_offset")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        first_offset: int
        def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ...) -> None: ...
    class EpochEndOffset(_message.Message):
        __slots__ = ("leader_epoch", "end_offset")
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        leader_epoch: int
        end_offset: int
        def __init__(self, leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...
    class PartitionResponse(_message.Message):
        __slots__ = ("partition", "error_code", "error_message", "high_watermark", "last_stable_offset", "log_start_offset", "aborted_transactions", "records", "decoded_records", "next_fetch_offset", "diverging_epoch", "current_leader", "preferred_read_replica")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        ABORTED_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        DECODED_RECORDS_FIELD_NUMBER: _ClassVar[int]
        NEXT_FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
        DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
        PREFERRED_READ_REPLICA_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error_code: _errors_pb2.ErrorCode
        error_message: str
        high_watermark: int
        last_stable_offset: int
        log_start_offset: int
        aborted_transactions: _containers.RepeatedCompositeFieldContainer[FetchResponse.AbortedTransaction]
        records: bytes
        decoded_records: _containers.RepeatedCompositeFieldContainer[_records_pb2.Record]
        next_fetch_offset: int
        diverging_epoch: FetchResponse.EpochEndOffset
        current_leader: LeaderIdAndEpoch
        preferred_read_replica: int
        def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., aborted_transactions: _Optional[_Iterable[_Union[FetchResponse.AbortedTransaction, _Mapping]]] = ..., records: _Optional[bytes] = ..., decoded_records: _Optional[_Iterable[_Union[_records_pb2.Record, _Mapping]]] = ..., next_fetch_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[FetchResponse.EpochEndOffset, _Mapping]] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ..., preferred_read_replica: _Optional[int] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[FetchResponse.TopicResponse]
    session_id: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[FetchResponse.TopicResponse, _Mapping]]] = ..., session_id: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("replica_id", "isolation_level", "topics")
    class TopicData(_message.Message):
        __slots__ = ("name", "partitions", "topic_id")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsRequest.PartitionData]
        topic_id: bytes
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsRequest.PartitionData, _Mapping]]] = ..., topic_id: _Optional[bytes] = ...) -> None: ...
    class PartitionData(_message.Message):
        __slots__ = ("partition", "current_leader_epoch", "offset_spec", "timestamp_ms")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        OFFSET_SPEC_FIELD_NUMBER: _ClassVar[int]
        TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
        partition: int
        current_leader_epoch: int
        offset_spec: OffsetSpec
        timestamp_ms: int
        def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., offset_spec: _Optional[_Union[OffsetSpec, str]] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    isolation_level: _records_pb2.IsolationLevel
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsRequest.TopicData]
    def __init__(self, replica_id: _Optional[int] = ..., isolation_level: _Optional[_Union[_records_pb2.IsolationLevel, str]] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsRequest.TopicData, _Mapping]]] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    class TopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsResponse.PartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsResponse.PartitionResponse, _Mapping]]] = ...) -> None: ...
    class PartitionResponse(_message.Message):
        __slots__ = ("partition", "error_code", "error_message", "timestamp_ms", "offset", "leader_epoch")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error_code: _errors_pb2.ErrorCode
        error_message: str
        timestamp_ms: int
        offset: int
        leader_epoch: int
        def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., timestamp_ms: _Optional[int] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsResponse.TopicResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsResponse.TopicResponse, _Mapping]]] = ...) -> None: ...

class DeleteRecordsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms")
    class TopicData(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DeleteRecordsRequest.PartitionData]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DeleteRecordsRequest.PartitionData, _Mapping]]] = ...) -> None: ...
    class PartitionData(_message.Message):
        __slots__ = ("partition", "offset")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        partition: int
        offset: int
        def __init__(self, partition: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteRecordsRequest.TopicData]
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteRecordsRequest.TopicData, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteRecordsResponse(_message.Message):
    __slots__ = ("topics",)
    class TopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DeleteRecordsResponse.PartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DeleteRecordsResponse.PartitionResponse, _Mapping]]] = ...) -> None: ...
    class PartitionResponse(_message.Message):
        __slots__ = ("partition", "error_code", "error_message", "low_watermark", "current_leader")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        LOW_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error_code: _errors_pb2.ErrorCode
        error_message: str
        low_watermark: int
        current_leader: LeaderIdAndEpoch
        def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., low_watermark: _Optional[int] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteRecordsResponse.TopicResponse]
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteRecordsResponse.TopicResponse, _Mapping]]] = ...) -> None: ...

class ReplicaFetchStreamRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: FetchRequest
    def __init__(self, request: _Optional[_Union[FetchRequest, _Mapping]] = ...) -> None: ...

class ReplicaFetchStreamResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: FetchResponse
    def __init__(self, response: _Optional[_Union[FetchResponse, _Mapping]] = ...) -> None: ...

class FetchStreamRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: FetchRequest
    def __init__(self, request: _Optional[_Union[FetchRequest, _Mapping]] = ...) -> None: ...

class FetchStreamResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: FetchResponse
    def __init__(self, response: _Optional[_Union[FetchResponse, _Mapping]] = ...) -> None: ...

class ProduceStreamRequest(_message.Message):
    __slots__ = ("correlation_id", "request", "traceparent")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    request: ProduceRequest
    traceparent: str
    def __init__(self, correlation_id: _Optional[int] = ..., request: _Optional[_Union[ProduceRequest, _Mapping]] = ..., traceparent: _Optional[str] = ...) -> None: ...

class WriteTxnMarkersStreamRequest(_message.Message):
    __slots__ = ("correlation_id", "request")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    request: WriteTxnMarkersRequest
    def __init__(self, correlation_id: _Optional[int] = ..., request: _Optional[_Union[WriteTxnMarkersRequest, _Mapping]] = ...) -> None: ...

class WriteTxnMarkersStreamResponse(_message.Message):
    __slots__ = ("correlation_id", "response")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    response: WriteTxnMarkersResponse
    def __init__(self, correlation_id: _Optional[int] = ..., response: _Optional[_Union[WriteTxnMarkersResponse, _Mapping]] = ...) -> None: ...

class ProduceStreamResponse(_message.Message):
    __slots__ = ("correlation_id", "response")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    response: ProduceResponse
    def __init__(self, correlation_id: _Optional[int] = ..., response: _Optional[_Union[ProduceResponse, _Mapping]] = ...) -> None: ...

class DescribeLogDirsRequest(_message.Message):
    __slots__ = ("topics", "partition_limit", "cursor")
    class TopicRequest(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    class Cursor(_message.Message):
        __slots__ = ("topic", "partition")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsRequest.TopicRequest]
    partition_limit: int
    cursor: DescribeLogDirsRequest.Cursor
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeLogDirsRequest.TopicRequest, _Mapping]]] = ..., partition_limit: _Optional[int] = ..., cursor: _Optional[_Union[DescribeLogDirsRequest.Cursor, _Mapping]] = ...) -> None: ...

class DescribeLogDirsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "log_dirs", "next_cursor")
    class PartitionResult(_message.Message):
        __slots__ = ("partition", "size_bytes", "offset_lag", "is_future")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
        OFFSET_LAG_FIELD_NUMBER: _ClassVar[int]
        IS_FUTURE_FIELD_NUMBER: _ClassVar[int]
        partition: int
        size_bytes: int
        offset_lag: int
        is_future: bool
        def __init__(self, partition: _Optional[int] = ..., size_bytes: _Optional[int] = ..., offset_lag: _Optional[int] = ..., is_future: _Optional[bool] = ...) -> None: ...
    class TopicResult(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.PartitionResult]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DescribeLogDirsResponse.PartitionResult, _Mapping]]] = ...) -> None: ...
    class LogDir(_message.Message):
        __slots__ = ("error_code", "error_message", "path", "topics", "total_bytes", "usable_bytes")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        PATH_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
        USABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
        error_code: _errors_pb2.ErrorCode
        error_message: str
        path: str
        topics: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.TopicResult]
        total_bytes: int
        usable_bytes: int
        def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., path: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[DescribeLogDirsResponse.TopicResult, _Mapping]]] = ..., total_bytes: _Optional[int] = ..., usable_bytes: _Optional[int] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    log_dirs: _containers.RepeatedCompositeFieldContainer[DescribeLogDirsResponse.LogDir]
    next_cursor: DescribeLogDirsRequest.Cursor
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., log_dirs: _Optional[_Iterable[_Union[DescribeLogDirsResponse.LogDir, _Mapping]]] = ..., next_cursor: _Optional[_Union[DescribeLogDirsRequest.Cursor, _Mapping]] = ...) -> None: ...
