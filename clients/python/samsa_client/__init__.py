"""The Python SDK: Producer and AsyncProducer, Consumer and Admin, with Kafka's keys."""

from samsa.client.admin import Admin, NewTopic
from samsa.client.async_producer import AsyncProducer
from samsa.client.consumer import Consumer, ConsumerRecord, OffsetAndTimestamp
from samsa.client.errors import KafkaError, NoBrokersAvailable, ProduceError, TopicError
from samsa.client.producer import Producer
from samsa.client.record_future import RecordMetadata

__all__ = [
    "Admin",
    "AsyncProducer",
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
