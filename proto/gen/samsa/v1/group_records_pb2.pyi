from samsa.v1 import coordinator_pb2 as _coordinator_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemberReconcileState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMBER_RECONCILE_STATE_UNSPECIFIED: _ClassVar[MemberReconcileState]
    MEMBER_RECONCILE_STATE_STABLE: _ClassVar[MemberReconcileState]
    MEMBER_RECONCILE_STATE_UNREVOKED_PARTITIONS: _ClassVar[MemberReconcileState]
    MEMBER_RECONCILE_STATE_UNRELEASED_PARTITIONS: _ClassVar[MemberReconcileState]
MEMBER_RECONCILE_STATE_UNSPECIFIED: MemberReconcileState
MEMBER_RECONCILE_STATE_STABLE: MemberReconcileState
MEMBER_RECONCILE_STATE_UNREVOKED_PARTITIONS: MemberReconcileState
MEMBER_RECONCILE_STATE_UNRELEASED_PARTITIONS: MemberReconcileState

class GroupRecordKey(_message.Message):
    __slots__ = ("offset_commit", "group_metadata", "member_metadata", "target_assignment_metadata", "target_assignment_member", "current_assignment", "writer_epoch")
    OFFSET_COMMIT_FIELD_NUMBER: _ClassVar[int]
    GROUP_METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_METADATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_ASSIGNMENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_ASSIGNMENT_MEMBER_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    WRITER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    offset_commit: OffsetCommitKey
    group_metadata: GroupKey
    member_metadata: GroupMemberKey
    target_assignment_metadata: GroupKey
    target_assignment_member: GroupMemberKey
    current_assignment: GroupMemberKey
    writer_epoch: WriterEpochKey
    def __init__(self, offset_commit: _Optional[_Union[OffsetCommitKey, _Mapping]] = ..., group_metadata: _Optional[_Union[GroupKey, _Mapping]] = ..., member_metadata: _Optional[_Union[GroupMemberKey, _Mapping]] = ..., target_assignment_metadata: _Optional[_Union[GroupKey, _Mapping]] = ..., target_assignment_member: _Optional[_Union[GroupMemberKey, _Mapping]] = ..., current_assignment: _Optional[_Union[GroupMemberKey, _Mapping]] = ..., writer_epoch: _Optional[_Union[WriterEpochKey, _Mapping]] = ...) -> None: ...

class OffsetCommitKey(_message.Message):
    __slots__ = ("group_id", "topic", "partition")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topic: str
    partition: int
    def __init__(self, group_id: _Optional[str] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class GroupKey(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class GroupMemberKey(_message.Message):
    __slots__ = ("group_id", "member_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ...) -> None: ...

class WriterEpochKey(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GroupRecordValue(_message.Message):
    __slots__ = ("offset_commit", "group_metadata", "member_metadata", "target_assignment_metadata", "target_assignment_member", "current_assignment", "writer_epoch")
    OFFSET_COMMIT_FIELD_NUMBER: _ClassVar[int]
    GROUP_METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_METADATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_ASSIGNMENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_ASSIGNMENT_MEMBER_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    WRITER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    offset_commit: OffsetCommitValue
    group_metadata: GroupMetadataValue
    member_metadata: MemberMetadataValue
    target_assignment_metadata: TargetAssignmentMetadataValue
    target_assignment_member: TargetAssignmentMemberValue
    current_assignment: CurrentAssignmentValue
    writer_epoch: WriterEpochValue
    def __init__(self, offset_commit: _Optional[_Union[OffsetCommitValue, _Mapping]] = ..., group_metadata: _Optional[_Union[GroupMetadataValue, _Mapping]] = ..., member_metadata: _Optional[_Union[MemberMetadataValue, _Mapping]] = ..., target_assignment_metadata: _Optional[_Union[TargetAssignmentMetadataValue, _Mapping]] = ..., target_assignment_member: _Optional[_Union[TargetAssignmentMemberValue, _Mapping]] = ..., current_assignment: _Optional[_Union[CurrentAssignmentValue, _Mapping]] = ..., writer_epoch: _Optional[_Union[WriterEpochValue, _Mapping]] = ...) -> None: ...

class OffsetCommitValue(_message.Message):
    __slots__ = ("committed_offset", "committed_leader_epoch", "metadata", "commit_timestamp_ms", "topic_id")
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    topic_id: bytes
    def __init__(self, committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., commit_timestamp_ms: _Optional[int] = ..., topic_id: _Optional[bytes] = ...) -> None: ...

class GroupMetadataValue(_message.Message):
    __slots__ = ("group_epoch", "subscription_digest", "empty_since_ms")
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EMPTY_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    group_epoch: int
    subscription_digest: bytes
    empty_since_ms: int
    def __init__(self, group_epoch: _Optional[int] = ..., subscription_digest: _Optional[bytes] = ..., empty_since_ms: _Optional[int] = ...) -> None: ...

class MemberMetadataValue(_message.Message):
    __slots__ = ("group_instance_id", "client_id", "subscription", "rebalance_timeout_ms", "server_assignor", "principal", "host")
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    group_instance_id: str
    client_id: str
    subscription: _coordinator_pb2.ConsumerGroupSubscription
    rebalance_timeout_ms: int
    server_assignor: str
    principal: str
    host: str
    def __init__(self, group_instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., subscription: _Optional[_Union[_coordinator_pb2.ConsumerGroupSubscription, _Mapping]] = ..., rebalance_timeout_ms: _Optional[int] = ..., server_assignor: _Optional[str] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ...) -> None: ...

class TargetAssignmentMetadataValue(_message.Message):
    __slots__ = ("assignment_epoch",)
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    assignment_epoch: int
    def __init__(self, assignment_epoch: _Optional[int] = ...) -> None: ...

class TargetAssignmentMemberValue(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[_coordinator_pb2.TopicPartitions]
    def __init__(self, partitions: _Optional[_Iterable[_Union[_coordinator_pb2.TopicPartitions, _Mapping]]] = ...) -> None: ...

class CurrentAssignmentValue(_message.Message):
    __slots__ = ("member_epoch", "previous_member_epoch", "state", "assigned_partitions", "partitions_pending_revocation")
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_PENDING_REVOCATION_FIELD_NUMBER: _ClassVar[int]
    member_epoch: int
    previous_member_epoch: int
    state: MemberReconcileState
    assigned_partitions: _containers.RepeatedCompositeFieldContainer[_coordinator_pb2.TopicPartitions]
    partitions_pending_revocation: _containers.RepeatedCompositeFieldContainer[_coordinator_pb2.TopicPartitions]
    def __init__(self, member_epoch: _Optional[int] = ..., previous_member_epoch: _Optional[int] = ..., state: _Optional[_Union[MemberReconcileState, str]] = ..., assigned_partitions: _Optional[_Iterable[_Union[_coordinator_pb2.TopicPartitions, _Mapping]]] = ..., partitions_pending_revocation: _Optional[_Iterable[_Union[_coordinator_pb2.TopicPartitions, _Mapping]]] = ...) -> None: ...

class WriterEpochValue(_message.Message):
    __slots__ = ("coordinator_id", "assignment_epoch")
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    coordinator_id: int
    assignment_epoch: int
    def __init__(self, coordinator_id: _Optional[int] = ..., assignment_epoch: _Optional[int] = ...) -> None: ...
