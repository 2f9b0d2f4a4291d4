"""Goal: every group RPC that names partitions refuses, before any work, a request naming more
than `limits.request_partitions_max` of them (RESOURCE_EXHAUSTED), as OffsetDelete and the
brokers' Produce and Fetch do. OffsetCommit and OffsetFetch took any number: one OffsetCommit of
200,000 copies of one partition (800 KB) cost 1.7 s of the coordinator's event loop and queued
200,000 records; one of gRPC's 80 MiB held every group of the coordinator (and its heartbeats to
the controller) for minutes and wrote 20 million records to __consumer_offsets.

Method: the servicer over a stand-in coordinator that owns nothing (so a request that gets past
the check answers NOT_COORDINATOR) and a context whose abort raises, as grpc's does.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.v1 import coordinator_pb2 as c


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
