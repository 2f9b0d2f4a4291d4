"""DescribeProducers: the producers a partition leader remembers, and their open transactions.

An operator's view of a partition's producer state (producer_state.py), as Kafka's
DescribeProducers (KIP-664): a transaction that stays open holds back the last stable offset,
and so every read_committed reader; this names its producer and where it began, for an abort.
Answered by the leader, from its producer table at the log end. Beside Kafka's fields, each
producer's `last_append_age_ms`: how long ago, by this leader's clock, it appended the
producer's last batch or marker here (producer_entry.py); AbortTransaction's guard reads it,
since the record timestamps (`last_timestamp_ms`) are the producer's to choose. An age rather
than a time, so that no other machine's clock is compared with this one.
"""

from __future__ import annotations

from samsa.services.broker.hosted_partition import LeadershipError
from samsa.services.broker.log.producer_state import NO_APPEND_TIME, ProducerEntry
from samsa.services.broker.partition_host import PartitionHost
from samsa.v1 import broker_pb2


def describe_producers(
    host: PartitionHost, request: broker_pb2.DescribeProducersRequest, now_ms: int
) -> broker_pb2.DescribeProducersResponse:
    response = broker_pb2.DescribeProducersResponse()
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        for number in topic.partitions:
            result = topic_response.partitions.add(partition=number)
            hosted = host.leader(topic.name, number)
            if isinstance(hosted, LeadershipError):
                result.error_code = hosted.code  # type: ignore[assignment]
                result.error_message = hosted.message
                continue
            for entry in hosted.log.producer_entries():
                result.active_producers.add(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.batches[-1].last_sequence if entry.batches else -1,
                    last_timestamp_ms=entry.last_timestamp,
                    current_txn_start_offset=entry.current_txn_first_offset,
                    last_append_age_ms=append_age_ms(entry, now_ms),
                )
    return response


def append_age_ms(entry: ProducerEntry, now_ms: int) -> int:
    """How long ago the leader appended the producer's last batch or marker here: 0 when that
    is unknown or in the future (the clock went back), the side that refuses an abort."""
    if entry.last_append_ms == NO_APPEND_TIME:
        return 0
    return max(0, now_ms - entry.last_append_ms)
