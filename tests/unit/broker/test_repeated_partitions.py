"""Goal: ListOffsets, DescribeProducers and DeleteRecords name each partition at most once
(broker.proto), and a request naming one twice is refused before any work (INVALID_ARGUMENT
naming the partition), as Produce and Fetch refuse theirs. Unchecked, each copy was answered:
a ~10 KB DescribeProducers naming one partition 10,000 times (within request_partitions_max, no
proof needed) had the broker build that partition's whole producer table into its answer 10,000
times, on its event loop (200 producers: a 32 MB answer, 3 s); DeleteRecords answered two
results, of different offsets, for one partition.

Method: the pure check the three adapters apply (`partitions_refusal`); then a real log in a
temp dir with 20 idempotent producers, whose DescribeProducers answer for a partition named
once is what the check lets through.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.record.codec import build_batch
from samsa.services.broker.requests.describe_producers import describe_producers
from samsa.services.broker.requests.produce import produce
from samsa.services.broker.requests.request_checks import partitions_refusal
from samsa.v1 import broker_pb2 as b


def _list_offsets(*partitions: int) -> b.ListOffsetsRequest:
    wanted = [
        b.ListOffsetsRequest.PartitionData(partition=p, offset_spec=b.OFFSET_SPEC_LATEST)
        for p in partitions
    ]
    return b.ListOffsetsRequest(
        topics=[b.ListOffsetsRequest.TopicData(name="t", partitions=wanted)]
    )


def _describe_producers(*partitions: int) -> b.DescribeProducersRequest:
    topic = b.DescribeProducersRequest.TopicRequest(name="t", partitions=partitions)
    return b.DescribeProducersRequest(topics=[topic])


def _delete_records(*partitions: int) -> b.DeleteRecordsRequest:
    wanted = [b.DeleteRecordsRequest.PartitionData(partition=p, offset=p) for p in partitions]
    return b.DeleteRecordsRequest(
        topics=[b.DeleteRecordsRequest.TopicData(name="t", partitions=wanted)]
    )


@pytest.mark.parametrize("build", [_list_offsets, _describe_producers, _delete_records])
def test_a_partition_named_twice_is_refused(build) -> None:  # type: ignore[no-untyped-def]
    assert partitions_refusal(build(0, 1, 2)) is None
    assert partitions_refusal(build(0, 1, 0)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "t-0 is named twice: name each partition once",
    )


def test_a_partition_named_again_in_another_entry_of_its_topic_is_refused() -> None:
    request = _describe_producers(0)
    request.topics.add(name="t", partitions=[1, 0])
    refusal = partitions_refusal(request)
    assert refusal is not None and refusal[0] == grpc.StatusCode.INVALID_ARGUMENT
    request = _describe_producers(0)
    request.topics.add(name="u", partitions=[0])  # another topic's partition 0: fine
    assert partitions_refusal(request) is None


def test_describe_producers_answers_each_partition_named_once(tmp_path: Path) -> None:
    image = single_broker_image({"t": (b"\x01" * 16, led_partitions(1))})
    with hosting(tmp_path, image) as host:
        for producer_id in range(1000, 1020):
            batch = build_batch([b"v"], producer_id=producer_id, producer_epoch=0, base_sequence=0)
            data = b.ProduceRequest.PartitionData(partition=0, records=batch)
            topic = b.ProduceRequest.TopicData(name="t", partitions=[data])
            answer, _ = produce(host, b.ProduceRequest(acks=1, topics=[topic]), 5)
            assert answer.topics[0].partitions[0].error_code == 0
        repeated = _describe_producers(*[0] * 10_000)
        assert partitions_refusal(repeated) is not None
        once = _describe_producers(0)
        assert partitions_refusal(once) is None
        answer = describe_producers(host, once, 0)
        assert len(answer.topics[0].partitions) == 1
        assert len(answer.topics[0].partitions[0].active_producers) == 20
