"""The Python SDK: Producer and AsyncProducer, Consumer and AsyncConsumer, and Admin, with
Kafka's keys. `tune_allocator()` keeps large buffers in the process's heap, as the services do
(common/allocator.py): an application that moves many large batches may call it once at start;
the SDK never changes the process's allocator by itself.

Imported before anything else imports grpc, the SDK turns off gRPC's EventEngine client and
listener for the process (GRPC_EXPERIMENTS; common/grpc_experiments.py says why): set
GRPC_EXPERIMENTS yourself (empty for gRPC's defaults) and the SDK leaves it alone."""

# ruff: noqa: E402  (the experiments are chosen before the modules below import grpc)
from samsa.common.grpc_experiments import prefer_legacy_poller

prefer_legacy_poller()

from samsa.client.acl_admin import AclDeletion
from samsa.client.admin import Admin, NewTopic
from samsa.client.async_consumer import AsyncConsumer
from samsa.client.async_producer import AsyncProducer
from samsa.client.config_resources import BROKER_DEFAULTS, ConfigResource
from samsa.client.consumer import Consumer, ConsumerRecord, OffsetAndTimestamp
from samsa.client.consumer_records import CREATE_TIME, LOG_APPEND_TIME
from samsa.client.errors import (
    AuthenticationError,
    AuthorizationError,
    ConcurrentAccessError,
    KafkaError,
    NoBrokersAvailable,
    ProduceError,
    TopicError,
)
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import CommitFailedError, GroupMetadata
from samsa.client.producer import Producer
from samsa.client.rebalance import ConsumerRebalanceListener
from samsa.client.record_future import RecordMetadata
from samsa.client.scram_admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from samsa.client.transaction_manager import TransactionAbortableError, TransactionFatalError
from samsa.common.allocator import tune_for_large_buffers as tune_allocator
from samsa.metadata.acls import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.metadata.client_quotas import QuotaEntity

__all__ = [
    "BROKER_DEFAULTS",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "AclBinding",
    "AclDeletion",
    "AclFilter",
    "Admin",
    "AsyncConsumer",
    "AsyncProducer",
    "AuthenticationError",
    "AuthorizationError",
    "CommitFailedError",
    "ConcurrentAccessError",
    "ConfigResource",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "GroupMetadata",
    "KafkaError",
    "NewTopic",
    "NoBrokersAvailable",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Operation",
    "PatternType",
    "Permission",
    "ProduceError",
    "Producer",
    "QuotaEntity",
    "RecordMetadata",
    "ResourceType",
    "ScramCredentialInfo",
    "TopicError",
    "TransactionAbortableError",
    "TransactionFatalError",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "tune_allocator",
]
