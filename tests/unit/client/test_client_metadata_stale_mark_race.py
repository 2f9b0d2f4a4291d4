"""Goal: a stale mark made while a metadata refresh is in flight survives that refresh. The
refresh's answer may predate what the mark reported (a produce answer saying
NOT_LEADER_OR_FOLLOWER after the server answered DescribeTopics), so clearing the mark left the
client on the old leader until metadata.max.age.ms (5 minutes) or the next refusal.

Method: `ClusterMetadata.refresh` over a fake `read` that marks the view stale, as another
thread would, before it answers (no server is called).
"""

from __future__ import annotations

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.v1 import controller_pb2 as c


def answer() -> c.DescribeTopicsResponse:
    response = c.DescribeTopicsResponse()
    response.broker_endpoints.update({1: "host-1:9092"})
    topic = response.topics.add(name="orders", topic_id=b"o" * 16)
    topic.partitions.add(partition=0, leader=1, leader_epoch=5, replicas=[1])
    return response


def metadata_marked_during_reads(marks_per_read: list[bool]) -> ClusterMetadata:
    metadata = ClusterMetadata(["localhost:9092"], Channels())
    metadata.keep(lambda: ["orders"])

    def read(method: str, request: object, timeout_s: float = 5.0) -> c.DescribeTopicsResponse:
        if marks_per_read.pop(0):
            metadata.mark_stale()  # another thread, while this answer is on its way
        return answer()

    metadata.read = read  # type: ignore[method-assign]
    return metadata


def test_a_mark_made_during_a_refresh_is_not_cleared_by_it() -> None:
    metadata = metadata_marked_during_reads([True, False])
    metadata.refresh()
    assert metadata.needs_refresh()
    metadata.refresh()  # the next refresh asked after the mark: it answers it
    assert not metadata.needs_refresh()


def test_a_mark_made_before_a_refresh_is_cleared_by_it() -> None:
    metadata = metadata_marked_during_reads([False])
    metadata.mark_stale()
    assert metadata.needs_refresh()
    metadata.refresh()
    assert not metadata.needs_refresh()


def test_a_refresh_with_nothing_to_describe_keeps_a_mark_made_meanwhile() -> None:
    metadata = ClusterMetadata(["localhost:9092"], Channels())
    metadata.keep(lambda: (metadata.mark_stale(), [])[1])  # marked while the refresh runs
    metadata.refresh()
    assert metadata.needs_refresh()
