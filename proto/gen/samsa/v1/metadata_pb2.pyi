from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_RESOURCE_TYPE_UNSPECIFIED: _ClassVar[ConfigResourceType]
    CONFIG_RESOURCE_TYPE_TOPIC: _ClassVar[ConfigResourceType]
    CONFIG_RESOURCE_TYPE_BROKER: _ClassVar[ConfigResourceType]

class AclResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_RESOURCE_TYPE_UNSPECIFIED: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_ANY: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_TOPIC: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_GROUP: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_CLUSTER: _ClassVar[AclResourceType]
    ACL_RESOURCE_TYPE_TRANSACTIONAL_ID: _ClassVar[AclResourceType]

class AclPatternType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_PATTERN_TYPE_UNSPECIFIED: _ClassVar[AclPatternType]
    ACL_PATTERN_TYPE_ANY: _ClassVar[AclPatternType]
    ACL_PATTERN_TYPE_MATCH: _ClassVar[AclPatternType]
    ACL_PATTERN_TYPE_LITERAL: _ClassVar[AclPatternType]
    ACL_PATTERN_TYPE_PREFIXED: _ClassVar[AclPatternType]

class AclOperation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_OPERATION_UNSPECIFIED: _ClassVar[AclOperation]
    ACL_OPERATION_ANY: _ClassVar[AclOperation]
    ACL_OPERATION_ALL: _ClassVar[AclOperation]
    ACL_OPERATION_READ: _ClassVar[AclOperation]
    ACL_OPERATION_WRITE: _ClassVar[AclOperation]
    ACL_OPERATION_CREATE: _ClassVar[AclOperation]
    ACL_OPERATION_DELETE: _ClassVar[AclOperation]
    ACL_OPERATION_ALTER: _ClassVar[AclOperation]
    ACL_OPERATION_DESCRIBE: _ClassVar[AclOperation]
    ACL_OPERATION_CLUSTER_ACTION: _ClassVar[AclOperation]
    ACL_OPERATION_DESCRIBE_CONFIGS: _ClassVar[AclOperation]
    ACL_OPERATION_ALTER_CONFIGS: _ClassVar[AclOperation]
    ACL_OPERATION_IDEMPOTENT_WRITE: _ClassVar[AclOperation]

class AclPermission(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_PERMISSION_UNSPECIFIED: _ClassVar[AclPermission]
    ACL_PERMISSION_ANY: _ClassVar[AclPermission]
    ACL_PERMISSION_DENY: _ClassVar[AclPermission]
    ACL_PERMISSION_ALLOW: _ClassVar[AclPermission]

class ScramMechanism(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCRAM_MECHANISM_UNSPECIFIED: _ClassVar[ScramMechanism]
    SCRAM_MECHANISM_SCRAM_SHA_256: _ClassVar[ScramMechanism]
    SCRAM_MECHANISM_SCRAM_SHA_512: _ClassVar[ScramMechanism]
CONFIG_RESOURCE_TYPE_UNSPECIFIED: ConfigResourceType
CONFIG_RESOURCE_TYPE_TOPIC: ConfigResourceType
CONFIG_RESOURCE_TYPE_BROKER: ConfigResourceType
ACL_RESOURCE_TYPE_UNSPECIFIED: AclResourceType
ACL_RESOURCE_TYPE_ANY: AclResourceType
ACL_RESOURCE_TYPE_TOPIC: AclResourceType
ACL_RESOURCE_TYPE_GROUP: AclResourceType
ACL_RESOURCE_TYPE_CLUSTER: AclResourceType
ACL_RESOURCE_TYPE_TRANSACTIONAL_ID: AclResourceType
ACL_PATTERN_TYPE_UNSPECIFIED: AclPatternType
ACL_PATTERN_TYPE_ANY: AclPatternType
ACL_PATTERN_TYPE_MATCH: AclPatternType
ACL_PATTERN_TYPE_LITERAL: AclPatternType
ACL_PATTERN_TYPE_PREFIXED: AclPatternType
ACL_OPERATION_UNSPECIFIED: AclOperation
ACL_OPERATION_ANY: AclOperation
ACL_OPERATION_ALL: AclOperation
ACL_OPERATION_READ: AclOperation
ACL_OPERATION_WRITE: AclOperation
ACL_OPERATION_CREATE: AclOperation
ACL_OPERATION_DELETE: AclOperation
ACL_OPERATION_ALTER: AclOperation
ACL_OPERATION_DESCRIBE: AclOperation
ACL_OPERATION_CLUSTER_ACTION: AclOperation
ACL_OPERATION_DESCRIBE_CONFIGS: AclOperation
ACL_OPERATION_ALTER_CONFIGS: AclOperation
ACL_OPERATION_IDEMPOTENT_WRITE: AclOperation
ACL_PERMISSION_UNSPECIFIED: AclPermission
ACL_PERMISSION_ANY: AclPermission
ACL_PERMISSION_DENY: AclPermission
ACL_PERMISSION_ALLOW: AclPermission
SCRAM_MECHANISM_UNSPECIFIED: ScramMechanism
SCRAM_MECHANISM_SCRAM_SHA_256: ScramMechanism
SCRAM_MECHANISM_SCRAM_SHA_512: ScramMechanism

class MetadataRecordBatch(_message.Message):
    __slots__ = ("base_offset", "previous_hash", "timestamp_ms", "records")
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_HASH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    base_offset: int
    previous_hash: bytes
    timestamp_ms: int
    records: _containers.RepeatedCompositeFieldContainer[MetadataRecord]
    def __init__(self, base_offset: _Optional[int] = ..., previous_hash: _Optional[bytes] = ..., timestamp_ms: _Optional[int] = ..., records: _Optional[_Iterable[_Union[MetadataRecord, _Mapping]]] = ...) -> None: ...

class MetadataRecord(_message.Message):
    __slots__ = ("register_broker", "unregister_broker", "fence_broker", "unfence_broker", "topic", "partition", "partition_change", "remove_topic", "config", "producer_ids", "register_coordinator", "fence_coordinator", "coordinator_assignment", "client_quota", "access_control_entry", "remove_access_control_entry", "user_scram_credential", "remove_user_scram_credential")
    REGISTER_BROKER_FIELD_NUMBER: _ClassVar[int]
    UNREGISTER_BROKER_FIELD_NUMBER: _ClassVar[int]
    FENCE_BROKER_FIELD_NUMBER: _ClassVar[int]
    UNFENCE_BROKER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_CHANGE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_IDS_FIELD_NUMBER: _ClassVar[int]
    REGISTER_COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    FENCE_COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_QUOTA_FIELD_NUMBER: _ClassVar[int]
    ACCESS_CONTROL_ENTRY_FIELD_NUMBER: _ClassVar[int]
    REMOVE_ACCESS_CONTROL_ENTRY_FIELD_NUMBER: _ClassVar[int]
    USER_SCRAM_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    REMOVE_USER_SCRAM_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    register_broker: RegisterBrokerRecord
    unregister_broker: UnregisterBrokerRecord
    fence_broker: FenceBrokerRecord
    unfence_broker: UnfenceBrokerRecord
    topic: TopicRecord
    partition: PartitionRecord
    partition_change: PartitionChangeRecord
    remove_topic: RemoveTopicRecord
    config: ConfigRecord
    producer_ids: ProducerIdsRecord
    register_coordinator: RegisterCoordinatorRecord
    fence_coordinator: FenceCoordinatorRecord
    coordinator_assignment: CoordinatorAssignmentRecord
    client_quota: ClientQuotaRecord
    access_control_entry: AccessControlEntryRecord
    remove_access_control_entry: RemoveAccessControlEntryRecord
    user_scram_credential: UserScramCredentialRecord
    remove_user_scram_credential: RemoveUserScramCredentialRecord
    def __init__(self, register_broker: _Optional[_Union[RegisterBrokerRecord, _Mapping]] = ..., unregister_broker: _Optional[_Union[UnregisterBrokerRecord, _Mapping]] = ..., fence_broker: _Optional[_Union[FenceBrokerRecord, _Mapping]] = ..., unfence_broker: _Optional[_Union[UnfenceBrokerRecord, _Mapping]] = ..., topic: _Optional[_Union[TopicRecord, _Mapping]] = ..., partition: _Optional[_Union[PartitionRecord, _Mapping]] = ..., partition_change: _Optional[_Union[PartitionChangeRecord, _Mapping]] = ..., remove_topic: _Optional[_Union[RemoveTopicRecord, _Mapping]] = ..., config: _Optional[_Union[ConfigRecord, _Mapping]] = ..., producer_ids: _Optional[_Union[ProducerIdsRecord, _Mapping]] = ..., register_coordinator: _Optional[_Union[RegisterCoordinatorRecord, _Mapping]] = ..., fence_coordinator: _Optional[_Union[FenceCoordinatorRecord, _Mapping]] = ..., coordinator_assignment: _Optional[_Union[CoordinatorAssignmentRecord, _Mapping]] = ..., client_quota: _Optional[_Union[ClientQuotaRecord, _Mapping]] = ..., access_control_entry: _Optional[_Union[AccessControlEntryRecord, _Mapping]] = ..., remove_access_control_entry: _Optional[_Union[RemoveAccessControlEntryRecord, _Mapping]] = ..., user_scram_credential: _Optional[_Union[UserScramCredentialRecord, _Mapping]] = ..., remove_user_scram_credential: _Optional[_Union[RemoveUserScramCredentialRecord, _Mapping]] = ...) -> None: ...

class RegisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "incarnation_id", "endpoint", "rack", "broker_epoch", "internal_endpoint")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    incarnation_id: str
    endpoint: str
    rack: str
    broker_epoch: int
    internal_endpoint: str
    def __init__(self, broker_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., rack: _Optional[str] = ..., broker_epoch: _Optional[int] = ..., internal_endpoint: _Optional[str] = ...) -> None: ...

class UnregisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class FenceBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "in_controlled_shutdown")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    in_controlled_shutdown: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., in_controlled_shutdown: _Optional[bool] = ...) -> None: ...

class UnfenceBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class TopicRecord(_message.Message):
    __slots__ = ("name", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ...) -> None: ...

class PartitionRecord(_message.Message):
    __slots__ = ("topic_id", "partition", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "eligible_leader_replicas", "adding_replicas", "removing_replicas")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class BrokerIdList(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class PartitionChangeRecord(_message.Message):
    __slots__ = ("topic_id", "partition", "leader", "isr", "replicas", "eligible_leader_replicas", "adding_replicas", "removing_replicas")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    partition: int
    leader: int
    isr: BrokerIdList
    replicas: BrokerIdList
    eligible_leader_replicas: BrokerIdList
    adding_replicas: BrokerIdList
    removing_replicas: BrokerIdList
    def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., leader: _Optional[int] = ..., isr: _Optional[_Union[BrokerIdList, _Mapping]] = ..., replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ..., eligible_leader_replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ..., adding_replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ..., removing_replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ...) -> None: ...

class RemoveTopicRecord(_message.Message):
    __slots__ = ("topic_id",)
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    def __init__(self, topic_id: _Optional[bytes] = ...) -> None: ...

class ProducerIdsRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "next_producer_id")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    next_producer_id: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., next_producer_id: _Optional[int] = ...) -> None: ...

class RegisterCoordinatorRecord(_message.Message):
    __slots__ = ("coordinator_id", "incarnation_id", "endpoint", "coordinator_epoch", "internal_endpoint")
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    coordinator_id: int
    incarnation_id: str
    endpoint: str
    coordinator_epoch: int
    internal_endpoint: str
    def __init__(self, coordinator_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., coordinator_epoch: _Optional[int] = ..., internal_endpoint: _Optional[str] = ...) -> None: ...

class FenceCoordinatorRecord(_message.Message):
    __slots__ = ("coordinator_id", "coordinator_epoch")
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    coordinator_id: int
    coordinator_epoch: int
    def __init__(self, coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class CoordinatorAssignmentRecord(_message.Message):
    __slots__ = ("partition", "coordinator_id", "coordinator_epoch", "assignment_epoch", "producer_id", "topic", "retired_producer_id")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RETIRED_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    partition: int
    coordinator_id: int
    coordinator_epoch: int
    assignment_epoch: int
    producer_id: int
    topic: str
    retired_producer_id: int
    def __init__(self, partition: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., assignment_epoch: _Optional[int] = ..., producer_id: _Optional[int] = ..., topic: _Optional[str] = ..., retired_producer_id: _Optional[int] = ...) -> None: ...

class ConfigRecord(_message.Message):
    __slots__ = ("resource_type", "resource_name", "name", "value")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    resource_type: ConfigResourceType
    resource_name: str
    name: str
    value: str
    def __init__(self, resource_type: _Optional[_Union[ConfigResourceType, str]] = ..., resource_name: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class MetadataSnapshot(_message.Message):
    __slots__ = ("end_offset", "hash", "timestamp_ms", "records")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    hash: bytes
    timestamp_ms: int
    records: _containers.RepeatedCompositeFieldContainer[MetadataRecord]
    def __init__(self, end_offset: _Optional[int] = ..., hash: _Optional[bytes] = ..., timestamp_ms: _Optional[int] = ..., records: _Optional[_Iterable[_Union[MetadataRecord, _Mapping]]] = ...) -> None: ...

class ClientQuotaEntity(_message.Message):
    __slots__ = ("client_id", "default_client", "user", "default_user")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_CLIENT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_USER_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    default_client: bool
    user: str
    default_user: bool
    def __init__(self, client_id: _Optional[str] = ..., default_client: _Optional[bool] = ..., user: _Optional[str] = ..., default_user: _Optional[bool] = ...) -> None: ...

class ClientQuotaRecord(_message.Message):
    __slots__ = ("entity", "key", "value")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    entity: ClientQuotaEntity
    key: str
    value: float
    def __init__(self, entity: _Optional[_Union[ClientQuotaEntity, _Mapping]] = ..., key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class AccessControlEntryRecord(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: AclResourceType
    resource_name: str
    pattern_type: AclPatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission
    def __init__(self, resource_type: _Optional[_Union[AclResourceType, str]] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[_Union[AclPatternType, str]] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[_Union[AclOperation, str]] = ..., permission: _Optional[_Union[AclPermission, str]] = ...) -> None: ...

class RemoveAccessControlEntryRecord(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: AclResourceType
    resource_name: str
    pattern_type: AclPatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission
    def __init__(self, resource_type: _Optional[_Union[AclResourceType, str]] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[_Union[AclPatternType, str]] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[_Union[AclOperation, str]] = ..., permission: _Optional[_Union[AclPermission, str]] = ...) -> None: ...

class UserScramCredentialRecord(_message.Message):
    __slots__ = ("name", "mechanism", "salt", "stored_key", "server_key", "iterations")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[_Union[ScramMechanism, str]] = ..., salt: _Optional[bytes] = ..., stored_key: _Optional[bytes] = ..., server_key: _Optional[bytes] = ..., iterations: _Optional[int] = ...) -> None: ...

class RemoveUserScramCredentialRecord(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: ScramMechanism
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[_Union[ScramMechanism, str]] = ...) -> None: ...
