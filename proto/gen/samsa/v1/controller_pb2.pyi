from samsa.v1 import errors_pb2 as _errors_pb2
from samsa.v1 import metadata_pb2 as _metadata_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ELECTION_TYPE_UNSPECIFIED: _ClassVar[ElectionType]
    ELECTION_TYPE_PREFERRED: _ClassVar[ElectionType]
    ELECTION_TYPE_UNCLEAN: _ClassVar[ElectionType]

class ConfigSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_SOURCE_UNSPECIFIED: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DYNAMIC: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DYNAMIC_DEFAULT: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DEFAULT: _ClassVar[ConfigSource]

class AlterConfigOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALTER_CONFIG_OP_UNSPECIFIED: _ClassVar[AlterConfigOp]
    ALTER_CONFIG_OP_SET: _ClassVar[AlterConfigOp]
    ALTER_CONFIG_OP_DELETE: _ClassVar[AlterConfigOp]
    ALTER_CONFIG_OP_APPEND: _ClassVar[AlterConfigOp]
    ALTER_CONFIG_OP_SUBTRACT: _ClassVar[AlterConfigOp]

class QuorumReplicaKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUORUM_REPLICA_KIND_UNSPECIFIED: _ClassVar[QuorumReplicaKind]
    QUORUM_REPLICA_KIND_CONTROLLER: _ClassVar[QuorumReplicaKind]
    QUORUM_REPLICA_KIND_BROKER: _ClassVar[QuorumReplicaKind]
    QUORUM_REPLICA_KIND_COORDINATOR: _ClassVar[QuorumReplicaKind]
ELECTION_TYPE_UNSPECIFIED: ElectionType
ELECTION_TYPE_PREFERRED: ElectionType
ELECTION_TYPE_UNCLEAN: ElectionType
CONFIG_SOURCE_UNSPECIFIED: ConfigSource
CONFIG_SOURCE_DYNAMIC: ConfigSource
CONFIG_SOURCE_DYNAMIC_DEFAULT: ConfigSource
CONFIG_SOURCE_DEFAULT: ConfigSource
ALTER_CONFIG_OP_UNSPECIFIED: AlterConfigOp
ALTER_CONFIG_OP_SET: AlterConfigOp
ALTER_CONFIG_OP_DELETE: AlterConfigOp
ALTER_CONFIG_OP_APPEND: AlterConfigOp
ALTER_CONFIG_OP_SUBTRACT: AlterConfigOp
QUORUM_REPLICA_KIND_UNSPECIFIED: QuorumReplicaKind
QUORUM_REPLICA_KIND_CONTROLLER: QuorumReplicaKind
QUORUM_REPLICA_KIND_BROKER: QuorumReplicaKind
QUORUM_REPLICA_KIND_COORDINATOR: QuorumReplicaKind

class ControllerEndpoint(_message.Message):
    __slots__ = ("node_id", "endpoint", "internal_endpoint")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    endpoint: str
    internal_endpoint: str
    def __init__(self, node_id: _Optional[int] = ..., endpoint: _Optional[str] = ..., internal_endpoint: _Optional[str] = ...) -> None: ...

class ControllerStatus(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "metadata_offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    active_controller: ControllerEndpoint
    metadata_offset: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ControllerEndpoint, _Mapping]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "incarnation_id", "endpoint", "rack", "previous_broker_epoch", "internal_endpoint")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    incarnation_id: str
    endpoint: str
    rack: str
    previous_broker_epoch: int
    internal_endpoint: str
    def __init__(self, broker_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., rack: _Optional[str] = ..., previous_broker_epoch: _Optional[int] = ..., internal_endpoint: _Optional[str] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("status", "broker_epoch")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    broker_epoch: int
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "metadata_offset", "want_shutdown")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    metadata_offset: int
    want_shutdown: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., metadata_offset: _Optional[int] = ..., want_shutdown: _Optional[bool] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("status", "is_fenced", "is_caught_up", "should_shut_down")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    is_fenced: bool
    is_caught_up: bool
    should_shut_down: bool
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., is_fenced: _Optional[bool] = ..., is_caught_up: _Optional[bool] = ..., should_shut_down: _Optional[bool] = ...) -> None: ...

class FetchMetadataRequest(_message.Message):
    __slots__ = ("end_offset", "hash", "max_wait_ms")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    hash: bytes
    max_wait_ms: int
    def __init__(self, end_offset: _Optional[int] = ..., hash: _Optional[bytes] = ..., max_wait_ms: _Optional[int] = ...) -> None: ...

class FetchMetadataResponse(_message.Message):
    __slots__ = ("status", "batches", "snapshot_id", "committed_end_offset", "controllers", "cluster_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    batches: _containers.RepeatedCompositeFieldContainer[_metadata_pb2.MetadataRecordBatch]
    snapshot_id: SnapshotId
    committed_end_offset: int
    controllers: _containers.RepeatedCompositeFieldContainer[ControllerEndpoint]
    cluster_id: str
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., batches: _Optional[_Iterable[_Union[_metadata_pb2.MetadataRecordBatch, _Mapping]]] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., committed_end_offset: _Optional[int] = ..., controllers: _Optional[_Iterable[_Union[ControllerEndpoint, _Mapping]]] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class SnapshotId(_message.Message):
    __slots__ = ("end_offset", "hash", "size_bytes", "crc32")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    hash: bytes
    size_bytes: int
    crc32: int
    def __init__(self, end_offset: _Optional[int] = ..., hash: _Optional[bytes] = ..., size_bytes: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class FetchSnapshotRequest(_message.Message):
    __slots__ = ("snapshot_id", "position", "max_bytes")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: SnapshotId
    position: int
    max_bytes: int
    def __init__(self, snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., position: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class FetchSnapshotResponse(_message.Message):
    __slots__ = ("status", "chunk")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    chunk: bytes
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    class ReplicaAssignment(_message.Message):
        __slots__ = ("partition_index", "broker_ids")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        broker_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition_index: _Optional[int] = ..., broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "num_partitions", "replication_factor", "configs", "assignments")
        class ConfigsEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        NAME_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        name: str
        num_partitions: int
        replication_factor: int
        configs: _containers.ScalarMap[str, str]
        assignments: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.ReplicaAssignment]
        def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ..., assignments: _Optional[_Iterable[_Union[CreateTopicsRequest.ReplicaAssignment, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.Topic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicsRequest.Topic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("status", "topics")
    class Result(_message.Message):
        __slots__ = ("name", "error_code", "error_message", "topic_id", "num_partitions", "replication_factor")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        topic_id: bytes
        num_partitions: int
        replication_factor: int
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[CreateTopicsResponse.Result, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("status", "topics")
    class Result(_message.Message):
        __slots__ = ("name", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    topics: _containers.RepeatedCompositeFieldContainer[DeleteTopicsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[DeleteTopicsResponse.Result, _Mapping]]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    class Assignment(_message.Message):
        __slots__ = ("broker_ids",)
        BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
        broker_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "count", "assignments")
        NAME_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        name: str
        count: int
        assignments: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.Assignment]
        def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[CreatePartitionsRequest.Assignment, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.Topic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsRequest.Topic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("status", "topics")
    class Result(_message.Message):
        __slots__ = ("name", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[CreatePartitionsResponse.Result, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions",)
    class Partition(_message.Message):
        __slots__ = ("topic", "partition", "replicas", "cancel")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        CANCEL_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        cancel: bool
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., cancel: _Optional[bool] = ...) -> None: ...
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.Partition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.Partition, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("status", "partitions")
    class Result(_message.Message):
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
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionReassignmentsResponse.Result, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topics", "min_metadata_offset")
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    MIN_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsRequest.Topic]
    min_metadata_offset: int
    def __init__(self, topics: _Optional[_Iterable[_Union[ListPartitionReassignmentsRequest.Topic, _Mapping]]] = ..., min_metadata_offset: _Optional[int] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("metadata_offset", "reassignments")
    class Reassignment(_message.Message):
        __slots__ = ("topic", "partition", "replicas", "adding_replicas", "removing_replicas")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    metadata_offset: int
    reassignments: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsResponse.Reassignment]
    def __init__(self, metadata_offset: _Optional[int] = ..., reassignments: _Optional[_Iterable[_Union[ListPartitionReassignmentsResponse.Reassignment, _Mapping]]] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id",)
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    def __init__(self, broker_id: _Optional[int] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "partitions")
    class Partition(_message.Message):
        __slots__ = ("topic", "partition")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    election_type: ElectionType
    partitions: _containers.RepeatedCompositeFieldContainer[ElectLeadersRequest.Partition]
    def __init__(self, election_type: _Optional[_Union[ElectionType, str]] = ..., partitions: _Optional[_Iterable[_Union[ElectLeadersRequest.Partition, _Mapping]]] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("status", "partitions")
    class Result(_message.Message):
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
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    partitions: _containers.RepeatedCompositeFieldContainer[ElectLeadersResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[ElectLeadersResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ("min_metadata_offset",)
    MIN_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    min_metadata_offset: int
    def __init__(self, min_metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("status", "cluster_id", "controllers", "brokers", "coordinators")
    class Controller(_message.Message):
        __slots__ = ("node_id", "endpoint", "is_active")
        NODE_ID_FIELD_NUMBER: _ClassVar[int]
        ENDPOINT_FIELD_NUMBER: _ClassVar[int]
        IS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
        node_id: int
        endpoint: str
        is_active: bool
        def __init__(self, node_id: _Optional[int] = ..., endpoint: _Optional[str] = ..., is_active: _Optional[bool] = ...) -> None: ...
    class Broker(_message.Message):
        __slots__ = ("broker_id", "endpoint", "rack", "broker_epoch", "is_fenced")
        BROKER_ID_FIELD_NUMBER: _ClassVar[int]
        ENDPOINT_FIELD_NUMBER: _ClassVar[int]
        RACK_FIELD_NUMBER: _ClassVar[int]
        BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        IS_FENCED_FIELD_NUMBER: _ClassVar[int]
        broker_id: int
        endpoint: str
        rack: str
        broker_epoch: int
        is_fenced: bool
        def __init__(self, broker_id: _Optional[int] = ..., endpoint: _Optional[str] = ..., rack: _Optional[str] = ..., broker_epoch: _Optional[int] = ..., is_fenced: _Optional[bool] = ...) -> None: ...
    class Coordinator(_message.Message):
        __slots__ = ("coordinator_id", "endpoint", "coordinator_epoch", "is_fenced", "owned_partitions")
        COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
        ENDPOINT_FIELD_NUMBER: _ClassVar[int]
        COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
        IS_FENCED_FIELD_NUMBER: _ClassVar[int]
        OWNED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        coordinator_id: int
        endpoint: str
        coordinator_epoch: int
        is_fenced: bool
        owned_partitions: int
        def __init__(self, coordinator_id: _Optional[int] = ..., endpoint: _Optional[str] = ..., coordinator_epoch: _Optional[int] = ..., is_fenced: _Optional[bool] = ..., owned_partitions: _Optional[int] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    COORDINATORS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    cluster_id: str
    controllers: _containers.RepeatedCompositeFieldContainer[DescribeClusterResponse.Controller]
    brokers: _containers.RepeatedCompositeFieldContainer[DescribeClusterResponse.Broker]
    coordinators: _containers.RepeatedCompositeFieldContainer[DescribeClusterResponse.Coordinator]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., cluster_id: _Optional[str] = ..., controllers: _Optional[_Iterable[_Union[DescribeClusterResponse.Controller, _Mapping]]] = ..., brokers: _Optional[_Iterable[_Union[DescribeClusterResponse.Broker, _Mapping]]] = ..., coordinators: _Optional[_Iterable[_Union[DescribeClusterResponse.Coordinator, _Mapping]]] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "min_metadata_offset", "partition_limit", "cursor")
    class Cursor(_message.Message):
        __slots__ = ("topic", "partition")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...
    NAMES_FIELD_NUMBER: _ClassVar[int]
    MIN_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PARTITION_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    min_metadata_offset: int
    partition_limit: int
    cursor: DescribeTopicsRequest.Cursor
    def __init__(self, names: _Optional[_Iterable[str]] = ..., min_metadata_offset: _Optional[int] = ..., partition_limit: _Optional[int] = ..., cursor: _Optional[_Union[DescribeTopicsRequest.Cursor, _Mapping]] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("status", "topics", "broker_endpoints", "next_cursor")
    class Partition(_message.Message):
        __slots__ = ("partition", "leader", "leader_epoch", "replicas", "isr", "eligible_leader_replicas", "adding_replicas", "removing_replicas")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        LEADER_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        partition: int
        leader: int
        leader_epoch: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        isr: _containers.RepeatedScalarFieldContainer[int]
        eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "error_code", "error_message", "topic_id", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        topic_id: bytes
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeTopicsResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[_Union[DescribeTopicsResponse.Partition, _Mapping]]] = ...) -> None: ...
    class BrokerEndpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    BROKER_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    topics: _containers.RepeatedCompositeFieldContainer[DescribeTopicsResponse.Topic]
    broker_endpoints: _containers.ScalarMap[int, str]
    next_cursor: DescribeTopicsRequest.Cursor
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[DescribeTopicsResponse.Topic, _Mapping]]] = ..., broker_endpoints: _Optional[_Mapping[int, str]] = ..., next_cursor: _Optional[_Union[DescribeTopicsRequest.Cursor, _Mapping]] = ...) -> None: ...

class ConfigResource(_message.Message):
    __slots__ = ("type", "name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    type: _metadata_pb2.ConfigResourceType
    name: str
    def __init__(self, type: _Optional[_Union[_metadata_pb2.ConfigResourceType, str]] = ..., name: _Optional[str] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources", "min_metadata_offset")
    class Resource(_message.Message):
        __slots__ = ("resource", "names")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        NAMES_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        names: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    MIN_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[DescribeConfigsRequest.Resource]
    min_metadata_offset: int
    def __init__(self, resources: _Optional[_Iterable[_Union[DescribeConfigsRequest.Resource, _Mapping]]] = ..., min_metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("status", "results")
    class Entry(_message.Message):
        __slots__ = ("name", "value", "source", "read_only", "documentation")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        READ_ONLY_FIELD_NUMBER: _ClassVar[int]
        DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        source: ConfigSource
        read_only: bool
        documentation: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[_Union[ConfigSource, str]] = ..., read_only: _Optional[bool] = ..., documentation: _Optional[str] = ...) -> None: ...
    class Result(_message.Message):
        __slots__ = ("resource", "error_code", "error_message", "entries")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        error_code: _errors_pb2.ErrorCode
        error_message: str
        entries: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Entry]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[DescribeConfigsResponse.Entry, _Mapping]]] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DescribeConfigsResponse.Result, _Mapping]]] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    class Alteration(_message.Message):
        __slots__ = ("name", "op", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        OP_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        op: AlterConfigOp
        value: str
        def __init__(self, name: _Optional[str] = ..., op: _Optional[_Union[AlterConfigOp, str]] = ..., value: _Optional[str] = ...) -> None: ...
    class Resource(_message.Message):
        __slots__ = ("resource", "alterations")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        ALTERATIONS_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        alterations: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.Alteration]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., alterations: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.Alteration, _Mapping]]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.Resource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.Resource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class IncrementalAlterConfigsResponse(_message.Message):
    __slots__ = ("status", "results")
    class Result(_message.Message):
        __slots__ = ("resource", "error_code", "error_message")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        error_code: _errors_pb2.ErrorCode
        error_message: str
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    results: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[IncrementalAlterConfigsResponse.Result, _Mapping]]] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "partitions")
    class BrokerState(_message.Message):
        __slots__ = ("broker_id", "broker_epoch")
        BROKER_ID_FIELD_NUMBER: _ClassVar[int]
        BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        broker_id: int
        broker_epoch: int
        def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...
    class PartitionIsr(_message.Message):
        __slots__ = ("topic", "partition", "leader_epoch", "partition_epoch", "new_isr", "new_isr_with_epochs")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_WITH_EPOCHS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        leader_epoch: int
        partition_epoch: int
        new_isr: _containers.RepeatedScalarFieldContainer[int]
        new_isr_with_epochs: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.BrokerState]
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ..., new_isr_with_epochs: _Optional[_Iterable[_Union[AlterPartitionRequest.BrokerState, _Mapping]]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.PartitionIsr]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionRequest.PartitionIsr, _Mapping]]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("status", "partitions")
    class PartitionResult(_message.Message):
        __slots__ = ("topic", "partition", "error_code", "error_message", "leader", "leader_epoch", "partition_epoch", "isr")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        LEADER_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        error_code: _errors_pb2.ErrorCode
        error_message: str
        leader: int
        leader_epoch: int
        partition_epoch: int
        isr: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionResponse.PartitionResult]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionResponse.PartitionResult, _Mapping]]] = ...) -> None: ...

class ReportCorruptReplicaRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topic", "partition", "leader_epoch", "partition_epoch", "first_corrupt_offset")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FIRST_CORRUPT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    first_corrupt_offset: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., first_corrupt_offset: _Optional[int] = ...) -> None: ...

class ReportCorruptReplicaResponse(_message.Message):
    __slots__ = ("status", "error_code", "error_message", "leader", "leader_epoch", "partition_epoch", "isr")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    error_code: _errors_pb2.ErrorCode
    error_message: str
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("status", "producer_id_start", "producer_id_len")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    producer_id_start: int
    producer_id_len: int
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ...) -> None: ...

class RegisterCoordinatorRequest(_message.Message):
    __slots__ = ("coordinator_id", "incarnation_id", "endpoint", "internal_endpoint")
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    coordinator_id: int
    incarnation_id: str
    endpoint: str
    internal_endpoint: str
    def __init__(self, coordinator_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., internal_endpoint: _Optional[str] = ...) -> None: ...

class RegisterCoordinatorResponse(_message.Message):
    __slots__ = ("status", "coordinator_epoch")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    coordinator_epoch: int
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class CoordinatorHeartbeatRequest(_message.Message):
    __slots__ = ("coordinator_id", "coordinator_epoch", "metadata_offset", "want_shutdown")
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    coordinator_id: int
    coordinator_epoch: int
    metadata_offset: int
    want_shutdown: bool
    def __init__(self, coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., metadata_offset: _Optional[int] = ..., want_shutdown: _Optional[bool] = ...) -> None: ...

class CoordinatorHeartbeatResponse(_message.Message):
    __slots__ = ("status", "is_fenced", "should_shut_down")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    is_fenced: bool
    should_shut_down: bool
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., is_fenced: _Optional[bool] = ..., should_shut_down: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("entries", "validate_only")
    class Op(_message.Message):
        __slots__ = ("key", "value", "remove")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        REMOVE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        remove: bool
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...
    class Entry(_message.Message):
        __slots__ = ("entity", "ops")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        entity: _metadata_pb2.ClientQuotaEntity
        ops: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Op]
        def __init__(self, entity: _Optional[_Union[_metadata_pb2.ClientQuotaEntity, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Op, _Mapping]]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Entry]
    validate_only: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Entry, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("status", "results")
    class Result(_message.Message):
        __slots__ = ("entity", "error_code", "error_message")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        entity: _metadata_pb2.ClientQuotaEntity
        error_code: _errors_pb2.ErrorCode
        error_message: str
        def __init__(self, entity: _Optional[_Union[_metadata_pb2.ClientQuotaEntity, _Mapping]] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    results: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AlterClientQuotasResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("entity", "min_metadata_offset")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    MIN_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    entity: _metadata_pb2.ClientQuotaEntity
    min_metadata_offset: int
    def __init__(self, entity: _Optional[_Union[_metadata_pb2.ClientQuotaEntity, _Mapping]] = ..., min_metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("status", "entries")
    class Entry(_message.Message):
        __slots__ = ("entity", "values")
        class ValuesEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: float
            def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        VALUES_FIELD_NUMBER: _ClassVar[int]
        entity: _metadata_pb2.ClientQuotaEntity
        values: _containers.ScalarMap[str, float]
        def __init__(self, entity: _Optional[_Union[_metadata_pb2.ClientQuotaEntity, _Mapping]] = ..., values: _Optional[_Mapping[str, float]] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    entries: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasResponse.Entry]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[DescribeClientQuotasResponse.Entry, _Mapping]]] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QuorumReplicaState(_message.Message):
    __slots__ = ("node_id", "kind", "log_end_offset", "lag", "last_fetch_timestamp_ms", "last_caught_up_timestamp_ms", "connected")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCH_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_CAUGHT_UP_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    kind: QuorumReplicaKind
    log_end_offset: int
    lag: int
    last_fetch_timestamp_ms: int
    last_caught_up_timestamp_ms: int
    connected: bool
    def __init__(self, node_id: _Optional[int] = ..., kind: _Optional[_Union[QuorumReplicaKind, str]] = ..., log_end_offset: _Optional[int] = ..., lag: _Optional[int] = ..., last_fetch_timestamp_ms: _Optional[int] = ..., last_caught_up_timestamp_ms: _Optional[int] = ..., connected: _Optional[bool] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("status", "cluster_id", "leader_id", "leader_epoch", "high_watermark", "metadata_offset", "voters", "observers")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    cluster_id: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    metadata_offset: int
    voters: _containers.RepeatedCompositeFieldContainer[QuorumReplicaState]
    observers: _containers.RepeatedCompositeFieldContainer[QuorumReplicaState]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., cluster_id: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., metadata_offset: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[QuorumReplicaState, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[QuorumReplicaState, _Mapping]]] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: _metadata_pb2.AclResourceType
    resource_name: str
    pattern_type: _metadata_pb2.AclPatternType
    principal: str
    host: str
    operation: _metadata_pb2.AclOperation
    permission: _metadata_pb2.AclPermission
    def __init__(self, resource_type: _Optional[_Union[_metadata_pb2.AclResourceType, str]] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[_Union[_metadata_pb2.AclPatternType, str]] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[_Union[_metadata_pb2.AclOperation, str]] = ..., permission: _Optional[_Union[_metadata_pb2.AclPermission, str]] = ...) -> None: ...

class AclBindingFilter(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: _metadata_pb2.AclResourceType
    resource_name: str
    pattern_type: _metadata_pb2.AclPatternType
    principal: str
    host: str
    operation: _metadata_pb2.AclOperation
    permission: _metadata_pb2.AclPermission
    def __init__(self, resource_type: _Optional[_Union[_metadata_pb2.AclResourceType, str]] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[_Union[_metadata_pb2.AclPatternType, str]] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[_Union[_metadata_pb2.AclOperation, str]] = ..., permission: _Optional[_Union[_metadata_pb2.AclPermission, str]] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("creations",)
    CREATIONS_FIELD_NUMBER: _ClassVar[int]
    creations: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, creations: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("status", "results")
    class Result(_message.Message):
        __slots__ = ("error_code", "error_message")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        error_code: _errors_pb2.ErrorCode
        error_message: str
        def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    results: _containers.RepeatedCompositeFieldContainer[CreateAclsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[CreateAclsResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter", "min_metadata_offset")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    MIN_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    filter: AclBindingFilter
    min_metadata_offset: int
    def __init__(self, filter: _Optional[_Union[AclBindingFilter, _Mapping]] = ..., min_metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("status", "bindings")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BINDINGS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    bindings: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., bindings: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclBindingFilter]
    def __init__(self, filters: _Optional[_Iterable[_Union[AclBindingFilter, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("status", "results")
    class Result(_message.Message):
        __slots__ = ("error_code", "error_message", "deleted")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        DELETED_FIELD_NUMBER: _ClassVar[int]
        error_code: _errors_pb2.ErrorCode
        error_message: str
        deleted: _containers.RepeatedCompositeFieldContainer[AclBinding]
        def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., deleted: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    results: _containers.RepeatedCompositeFieldContainer[DeleteAclsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DeleteAclsResponse.Result, _Mapping]]] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("deletions", "upsertions")
    class Deletion(_message.Message):
        __slots__ = ("name", "mechanism")
        NAME_FIELD_NUMBER: _ClassVar[int]
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        name: str
        mechanism: _metadata_pb2.ScramMechanism
        def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[_Union[_metadata_pb2.ScramMechanism, str]] = ...) -> None: ...
    class Upsertion(_message.Message):
        __slots__ = ("name", "mechanism", "iterations", "salt", "salted_password")
        NAME_FIELD_NUMBER: _ClassVar[int]
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        ITERATIONS_FIELD_NUMBER: _ClassVar[int]
        SALT_FIELD_NUMBER: _ClassVar[int]
        SALTED_PASSWORD_FIELD_NUMBER: _ClassVar[int]
        name: str
        mechanism: _metadata_pb2.ScramMechanism
        iterations: int
        salt: bytes
        salted_password: bytes
        def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[_Union[_metadata_pb2.ScramMechanism, str]] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., salted_password: _Optional[bytes] = ...) -> None: ...
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    deletions: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsRequest.Deletion]
    upsertions: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsRequest.Upsertion]
    def __init__(self, deletions: _Optional[_Iterable[_Union[AlterUserScramCredentialsRequest.Deletion, _Mapping]]] = ..., upsertions: _Optional[_Iterable[_Union[AlterUserScramCredentialsRequest.Upsertion, _Mapping]]] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("status", "results")
    class Result(_message.Message):
        __slots__ = ("name", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    results: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AlterUserScramCredentialsResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeUserScramCredentialsRequest(_message.Message):
    __slots__ = ("users", "min_metadata_offset")
    USERS_FIELD_NUMBER: _ClassVar[int]
    MIN_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    min_metadata_offset: int
    def __init__(self, users: _Optional[_Iterable[str]] = ..., min_metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeUserScramCredentialsResponse(_message.Message):
    __slots__ = ("status", "results")
    class CredentialInfo(_message.Message):
        __slots__ = ("mechanism", "iterations")
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        ITERATIONS_FIELD_NUMBER: _ClassVar[int]
        mechanism: _metadata_pb2.ScramMechanism
        iterations: int
        def __init__(self, mechanism: _Optional[_Union[_metadata_pb2.ScramMechanism, str]] = ..., iterations: _Optional[int] = ...) -> None: ...
    class Result(_message.Message):
        __slots__ = ("name", "error_code", "error_message", "credentials")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _errors_pb2.ErrorCode
        error_message: str
        credentials: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResponse.CredentialInfo]
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., credentials: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResponse.CredentialInfo, _Mapping]]] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    status: ControllerStatus
    results: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResponse.Result]
    def __init__(self, status: _Optional[_Union[ControllerStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResponse.Result, _Mapping]]] = ...) -> None: ...
