from samsa.v1 import coordinator_pb2 as _coordinator_pb2
from samsa.v1 import errors_pb2 as _errors_pb2
from samsa.v1 import transaction_records_pb2 as _transaction_records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InitTransactionsRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_ms", "producer_id", "producer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class InitTransactionsResponse(_message.Message):
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

class TransactionalProducer(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class AddPartitionsToTxnRequest(_message.Message):
    __slots__ = ("producer", "partitions", "verify_only")
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_ONLY_FIELD_NUMBER: _ClassVar[int]
    producer: TransactionalProducer
    partitions: _containers.RepeatedCompositeFieldContainer[_coordinator_pb2.TopicPartitions]
    verify_only: bool
    def __init__(self, producer: _Optional[_Union[TransactionalProducer, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[_coordinator_pb2.TopicPartitions, _Mapping]]] = ..., verify_only: _Optional[bool] = ...) -> None: ...

class TxnPartitionResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AddPartitionsToTxnResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "results")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[TxnPartitionResult]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[TxnPartitionResult, _Mapping]]] = ...) -> None: ...

class AddPartitionsToTxnStreamRequest(_message.Message):
    __slots__ = ("correlation_id", "request")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    request: AddPartitionsToTxnRequest
    def __init__(self, correlation_id: _Optional[int] = ..., request: _Optional[_Union[AddPartitionsToTxnRequest, _Mapping]] = ...) -> None: ...

class AddPartitionsToTxnStreamResponse(_message.Message):
    __slots__ = ("correlation_id", "response")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    response: AddPartitionsToTxnResponse
    def __init__(self, correlation_id: _Optional[int] = ..., response: _Optional[_Union[AddPartitionsToTxnResponse, _Mapping]] = ...) -> None: ...

class AddOffsetsToTxnRequest(_message.Message):
    __slots__ = ("producer", "group_id")
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    producer: TransactionalProducer
    group_id: str
    def __init__(self, producer: _Optional[_Union[TransactionalProducer, _Mapping]] = ..., group_id: _Optional[str] = ...) -> None: ...

class AddOffsetsToTxnResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class TxnOffsetCommitPartition(_message.Message):
    __slots__ = ("partition", "committed_offset", "committed_leader_epoch", "metadata")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    partition: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    def __init__(self, partition: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ...) -> None: ...

class TxnOffsetCommitTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TxnOffsetCommitPartition, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitRequest(_message.Message):
    __slots__ = ("producer", "group_id", "member_id", "member_epoch", "topics")
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    producer: TransactionalProducer
    group_id: str
    member_id: str
    member_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitTopic]
    def __init__(self, producer: _Optional[_Union[TransactionalProducer, _Mapping]] = ..., group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TxnOffsetCommitTopic, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[TxnPartitionResult]
    def __init__(self, results: _Optional[_Iterable[_Union[TxnPartitionResult, _Mapping]]] = ...) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("producer", "committed")
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    producer: TransactionalProducer
    committed: bool
    def __init__(self, producer: _Optional[_Union[TransactionalProducer, _Mapping]] = ..., committed: _Optional[bool] = ...) -> None: ...

class EndTxnResponse(_message.Message):
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

class TransactionStreamRequest(_message.Message):
    __slots__ = ("correlation_id", "end_txn", "add_offsets_to_txn", "txn_offset_commit")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    END_TXN_FIELD_NUMBER: _ClassVar[int]
    ADD_OFFSETS_TO_TXN_FIELD_NUMBER: _ClassVar[int]
    TXN_OFFSET_COMMIT_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    end_txn: EndTxnRequest
    add_offsets_to_txn: AddOffsetsToTxnRequest
    txn_offset_commit: TxnOffsetCommitRequest
    def __init__(self, correlation_id: _Optional[int] = ..., end_txn: _Optional[_Union[EndTxnRequest, _Mapping]] = ..., add_offsets_to_txn: _Optional[_Union[AddOffsetsToTxnRequest, _Mapping]] = ..., txn_offset_commit: _Optional[_Union[TxnOffsetCommitRequest, _Mapping]] = ...) -> None: ...

class TransactionStreamResponse(_message.Message):
    __slots__ = ("correlation_id", "end_txn", "add_offsets_to_txn", "txn_offset_commit")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    END_TXN_FIELD_NUMBER: _ClassVar[int]
    ADD_OFFSETS_TO_TXN_FIELD_NUMBER: _ClassVar[int]
    TXN_OFFSET_COMMIT_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    end_txn: EndTxnResponse
    add_offsets_to_txn: AddOffsetsToTxnResponse
    txn_offset_commit: TxnOffsetCommitResponse
    def __init__(self, correlation_id: _Optional[int] = ..., end_txn: _Optional[_Union[EndTxnResponse, _Mapping]] = ..., add_offsets_to_txn: _Optional[_Union[AddOffsetsToTxnResponse, _Mapping]] = ..., txn_offset_commit: _Optional[_Union[TxnOffsetCommitResponse, _Mapping]] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ("state_filters", "producer_id_filters", "duration_filter_ms")
    STATE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FILTERS_FIELD_NUMBER: _ClassVar[int]
    DURATION_FILTER_MS_FIELD_NUMBER: _ClassVar[int]
    state_filters: _containers.RepeatedScalarFieldContainer[_transaction_records_pb2.TransactionState]
    producer_id_filters: _containers.RepeatedScalarFieldContainer[int]
    duration_filter_ms: int
    def __init__(self, state_filters: _Optional[_Iterable[_Union[_transaction_records_pb2.TransactionState, str]]] = ..., producer_id_filters: _Optional[_Iterable[int]] = ..., duration_filter_ms: _Optional[int] = ...) -> None: ...

class ListedTransaction(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "state")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    state: _transaction_records_pb2.TransactionState
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., state: _Optional[_Union[_transaction_records_pb2.TransactionState, str]] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("transactions", "partitions_loading")
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_LOADING_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[ListedTransaction]
    partitions_loading: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, transactions: _Optional[_Iterable[_Union[ListedTransaction, _Mapping]]] = ..., partitions_loading: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeTransactionsRequest(_message.Message):
    __slots__ = ("transactional_ids",)
    TRANSACTIONAL_IDS_FIELD_NUMBER: _ClassVar[int]
    transactional_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, transactional_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribedTransaction(_message.Message):
    __slots__ = ("transactional_id", "error_code", "error_message", "state", "producer_id", "producer_epoch", "transaction_timeout_ms", "transaction_start_ms", "partitions")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_START_MS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    state: _transaction_records_pb2.TransactionState
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_ms: int
    partitions: _containers.RepeatedCompositeFieldContainer[_coordinator_pb2.TopicPartitions]
    def __init__(self, transactional_id: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., state: _Optional[_Union[_transaction_records_pb2.TransactionState, str]] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., transaction_timeout_ms: _Optional[int] = ..., transaction_start_ms: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_coordinator_pb2.TopicPartitions, _Mapping]]] = ...) -> None: ...

class DescribeTransactionsResponse(_message.Message):
    __slots__ = ("transactions",)
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[DescribedTransaction]
    def __init__(self, transactions: _Optional[_Iterable[_Union[DescribedTransaction, _Mapping]]] = ...) -> None: ...

class AbortTransactionRequest(_message.Message):
    __slots__ = ("topic", "partition", "producer_id", "producer_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class AbortTransactionResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
