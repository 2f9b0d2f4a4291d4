"""The Python SDK: Producer, Consumer and Admin, configured with Kafka's keys."""

from samsa.client.admin import Admin, NewTopic
from samsa.client.consumer import Consumer, ConsumerRecord, OffsetAndTimestamp
from samsa.client.errors import KafkaError, NoBrokersAvailable, ProduceError, TopicError
from samsa.client.producer import Producer, RecordMetadata

__all__ = [
    "Admin",
    "Consumer",
    "ConsumerRecord",
    "KafkaError",
    "NewTopic",
    "NoBrokersAvailable",
    "OffsetAndTimestamp",
    "ProduceError",
    "Producer",
    "RecordMetadata",
    "TopicError",
]
