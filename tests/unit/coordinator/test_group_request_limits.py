"""Goal: every group RPC that names partitions refuses, before any work, a request naming more
than `limits.request_partitions_max` of them (RESOURCE_EXHAUSTED), as OffsetDelete and the
brokers' Produce and Fetch do. OffsetCommit and OffsetFetch took any number: one OffsetCommit of
200,000 copies of one partition (800 KB) cost 1.7 s of the coordinator's event loop and queued
200,000 records; one of gRPC's 80 MiB held every group of the coordinator (and its heartbeats to
the controller) for minutes and wrote 20 million records to __consumer_offsets.

Likewise the filters of ListGroups and ListTransactions refuse more than
`limits.admin_request_items_max` entries: each owned partition built a set of the filter, so one
80 MiB ListGroups held the event loop about 1.4 s per partition (over a minute for 50).

A ConsumerGroupHeartbeat over `limits.group_heartbeat_request_bytes_max` is refused too: its
client id, instance id and subscription went whole into one member record, and one over the
topic's max.message.bytes was refused by the broker, which failed every group of the partition
(it reloaded, and the client's next heartbeat failed it again).

So is an OffsetCommit whose records would not fit one batch of __consumer_offsets (its
max.message.bytes): a commit is written as one batch, and 300 partitions with 4 KiB of metadata
each (1.25 MB), or 10,000 with 50-character topic names, made the broker refuse it, which failed
every group of the partition, again at each retry. `commit_size_problem` is checked against the
real batch size.

Method: the servicer over a stand-in coordinator that owns nothing (so a request that gets past
the check answers NOT_COORDINATOR) and a context whose abort raises, as grpc's does.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.coordinator import group_offsets, group_records
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.services.coordinator.transaction_servicer import TransactionCoordinatorServicer
from samsa.services.coordinator.transaction_stream import stream_refusal
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g
from samsa.v1 import transactions_pb2 as x


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code


class Context:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class OwnsNothing:
    def __init__(self) -> None:
        self.topics = {"t": 1}

    def partition_for(self, group_id: str) -> None:
        raise PartitionUnavailableError(ErrorCode.NOT_COORDINATOR, "not here")

    def in_touch(self) -> bool:
        return True

    def owned_partitions(self) -> list[object]:
        return []

    def owned_transaction_partitions(self) -> list[object]:
        return []


TOO_MANY = limits.request_partitions_max + 1


def commit(count: int) -> c.OffsetCommitRequest:
    partitions = [c.OffsetCommitPartition(partition=0, committed_offset=1)] * count
    return c.OffsetCommitRequest(
        group_id="g", member_epoch=-1, topics=[c.OffsetCommitTopic(name="t", partitions=partitions)]
    )


def fetch(count: int) -> c.OffsetFetchRequest:
    return c.OffsetFetchRequest(
        group_id="g", topics=[c.TopicPartitions(topic="t", partitions=[0] * count)]
    )


@pytest.mark.parametrize(
    ("method", "request_of"), [("OffsetCommit", commit), ("OffsetFetch", fetch)]
)
def test_a_request_naming_too_many_partitions_is_refused(method, request_of) -> None:
    servicer = GroupCoordinatorServicer(OwnsNothing())  # type: ignore[arg-type]
    call = getattr(servicer, method)
    with pytest.raises(Aborted) as refused:
        asyncio.run(call(request_of(TOO_MANY), Context()))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(limits.request_partitions_max) in str(refused.value)
    # At the limit the request is considered (and answered: this coordinator owns nothing).
    answer = asyncio.run(call(request_of(limits.request_partitions_max), Context()))
    assert answer is not None


ITEMS = limits.admin_request_items_max


@pytest.mark.parametrize(
    ("servicer_of", "method", "request_of"),
    [
        (
            GroupCoordinatorServicer,
            "ListGroups",
            lambda n: c.ListGroupsRequest(states_filter=[1] * n),
        ),
        (
            TransactionCoordinatorServicer,
            "ListTransactions",
            lambda n: x.ListTransactionsRequest(state_filters=[1] * n),
        ),
        (
            TransactionCoordinatorServicer,
            "ListTransactions",
            lambda n: x.ListTransactionsRequest(producer_id_filters=range(n)),
        ),
    ],
)
def test_a_listing_with_too_long_a_filter_is_refused(servicer_of, method, request_of) -> None:
    call = getattr(servicer_of(OwnsNothing()), method)
    with pytest.raises(Aborted) as refused:
        asyncio.run(call(request_of(ITEMS + 1), Context()))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(ITEMS) in str(refused.value)
    assert asyncio.run(call(request_of(ITEMS), Context())) is not None


def test_a_heartbeat_too_large_for_its_member_record_is_refused() -> None:
    servicer = GroupCoordinatorServicer(OwnsNothing())  # type: ignore[arg-type]
    heartbeat = c.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)
    heartbeat.client_id = "c" * limits.group_heartbeat_request_bytes_max
    with pytest.raises(Aborted) as refused:
        asyncio.run(servicer.ConsumerGroupHeartbeat(heartbeat, Context()))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    heartbeat.client_id = "c" * 1000
    answer = asyncio.run(servicer.ConsumerGroupHeartbeat(heartbeat, Context()))
    assert answer.error_code == ErrorCode.NOT_COORDINATOR


def commit_of(partitions: int, metadata: str, topic: str = "t") -> c.OffsetCommitRequest:
    return c.OffsetCommitRequest(
        group_id="g" * 20,
        member_epoch=-1,
        topics=[
            c.OffsetCommitTopic(
                name=topic,
                partitions=[
                    c.OffsetCommitPartition(partition=p, committed_offset=2**40, metadata=metadata)
                    for p in range(partitions)
                ],
            )
        ],
    )


def batch_bytes(request: c.OffsetCommitRequest) -> int:
    """The size of the batch the commit is written as (with the record of a new group, and
    each offset's topic id, KIP-516)."""
    written = [group_records.group_metadata(request.group_id, g.GroupMetadataValue())]
    for topic in request.topics:
        for p in topic.partitions:
            value = g.OffsetCommitValue(
                committed_offset=p.committed_offset,
                metadata=p.metadata,
                commit_timestamp_ms=1,
                topic_id=b"\x0a" * 16,
            )
            written.append(
                group_records.offset_commit(request.group_id, topic.name, p.partition, value)
            )
    encoded = [group_records.encode(record) for record in written]
    batch = build_batch(
        [v for _, v in encoded],
        keys=[k for k, _ in encoded],
        timestamps=1,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )
    return len(batch)


def test_a_commit_too_large_for_one_batch_is_refused() -> None:
    limit = group_offsets.COMMIT_BATCH_BYTES_MAX
    servicer = GroupCoordinatorServicer(OwnsNothing())  # type: ignore[arg-type]
    too_large = commit_of(300, "m" * 4096)
    assert batch_bytes(too_large) > limit
    with pytest.raises(Aborted) as refused:
        asyncio.run(servicer.OffsetCommit(too_large, Context()))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    long_names = commit_of(limits.request_partitions_max, "", "t" * 50)
    assert batch_bytes(long_names) > limit
    assert group_offsets.commit_size_problem(long_names, 1) is not None
    # What fits one batch is considered, even near the limit (the exact size decides).
    fits = commit_of(limits.request_partitions_max, "", "t" * 10)
    assert limit * 0.8 < batch_bytes(fits) <= limit
    assert group_offsets.commit_size_problem(fits, 1) is None
    assert batch_bytes(commit_of(230, "m" * 4096)) <= limit
    assert asyncio.run(servicer.OffsetCommit(commit_of(230, "m" * 4096), Context())) is not None


def test_a_transactional_commit_too_large_for_one_batch_is_refused() -> None:
    """TxnOffsetCommit was not held to the bound: its records went to the broker as one
    transactional batch, refused there (MESSAGE_TOO_LARGE) for every partition named."""
    servicer = TransactionCoordinatorServicer(OwnsNothing())  # type: ignore[arg-type]
    plain = commit_of(300, "m" * 4096)
    too_large = x.TxnOffsetCommitRequest(
        producer=x.TransactionalProducer(transactional_id="tx", producer_id=1, producer_epoch=0),
        group_id=plain.group_id,
        member_epoch=-1,
    )
    too_large.topics.add(
        name="t",
        partitions=[
            x.TxnOffsetCommitPartition(
                partition=p.partition, committed_offset=p.committed_offset, metadata=p.metadata
            )
            for p in plain.topics[0].partitions
        ],
    )
    with pytest.raises(Aborted) as refused:
        asyncio.run(servicer.TxnOffsetCommit(too_large, Context()))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "commit fewer partitions" in str(refused.value)
    # Over TransactionStream it ends the stream with the same status.
    item = x.TransactionStreamRequest(correlation_id=1, txn_offset_commit=too_large)
    assert stream_refusal(item) == (grpc.StatusCode.RESOURCE_EXHAUSTED, str(refused.value))
    del too_large.topics[0].partitions[230:]
    answer = asyncio.run(servicer.TxnOffsetCommit(too_large, Context()))
    assert {result.error_code for result in answer.results} == {ErrorCode.NOT_COORDINATOR}


def _empty_entries(request_type: type, field: str, count: int, **fields: object):  # type: ignore[no-untyped-def]
    """`request_type` with `count` empty entries in repeated `field` (two bytes each)."""
    number = request_type.DESCRIPTOR.fields_by_name[field].number
    raw = request_type(**fields).SerializeToString() + bytes([(number << 3) | 2, 0]) * count
    return request_type.FromString(raw)


@pytest.mark.parametrize(
    ("servicer_of", "method", "request_type", "field", "limit", "fields"),
    [
        (GroupCoordinatorServicer, "OffsetFetch", c.OffsetFetchRequest, "topics", None, {}),
        (GroupCoordinatorServicer, "OffsetCommit", c.OffsetCommitRequest, "topics", None, {}),
        (GroupCoordinatorServicer, "OffsetDelete", c.OffsetDeleteRequest, "topics", None, {}),
        (
            TransactionCoordinatorServicer,
            "TxnOffsetCommit",
            x.TxnOffsetCommitRequest,
            "topics",
            ITEMS,
            {},
        ),
        (
            TransactionCoordinatorServicer,
            "AddPartitionsToTxn",
            x.AddPartitionsToTxnRequest,
            "partitions",
            ITEMS,
            {},
        ),
    ],
)
def test_a_request_of_too_many_empty_topic_entries_is_refused(
    servicer_of, method, request_type, field, limit, fields
) -> None:
    """Topic entries naming no partition were not counted: one OffsetFetch of 900,000 of them
    (1.8 MB) held the coordinator's event loop 1.6 s (every group's heartbeats, and its own to
    the controller), answering each with an empty entry."""
    limit = limits.request_partitions_max if limit is None else limit
    call = getattr(servicer_of(OwnsNothing()), method)
    with pytest.raises(Aborted) as refused:
        asyncio.run(call(_empty_entries(request_type, field, limit + 1, **fields), Context()))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(limit) in str(refused.value)
