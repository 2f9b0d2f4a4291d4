"""DescribeProducers: the producers a partition leader remembers, and their open transactions.

An operator's view of a partition's producer state (producer_state.py), as Kafka's
DescribeProducers (KIP-664): a transaction that stays open holds back the last stable offset,
and so every read_committed reader; this names its producer and where it began, for an abort.
Answered by the leader, from its producer table at the log end.
"""

from __future__ import annotations

from samsa.services.broker.hosted_partition import LeadershipError
from samsa.services.broker.partition_host import PartitionHost
from samsa.v1 import broker_pb2


def describe_producers(
    host: PartitionHost, request: broker_pb2.DescribeProducersRequest
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
                )
    return response
