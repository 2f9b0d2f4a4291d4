"""Goal: a leader names a preferred read replica (KIP-392) for a consumer in another rack only
when that in-sync follower holds the consumer's fetch offset, by its last reported log start
and end (Kafka's findPreferredReadReplica). A follower whose log starts above the offset would
answer OFFSET_OUT_OF_RANGE, the consumer goes back to the leader for it, and the leader must not
send it to that follower again; a follower that has not fetched since this broker became leader
is not named either.

Method: the leader's PartitionHost over a real log (test_replication_review.Leader), with racks
given to the brokers in its metadata image; followers are only their fetches; consumer fetches
carry a rack id.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from test_replication_review import Leader

from samsa.common.fetch_session_client import FetchParts, FetchPosition, fetch_request
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_cluster import KEY


def racked(leader: Leader) -> str:
    """Every broker in its own rack; returns the rack of the first follower."""
    brokers = {b: replace(r, rack=f"rack-{b}") for b, r in leader.image.brokers.items()}
    leader.image = leader.apply(replace(leader.image, brokers=brokers))
    return f"rack-{leader.followers[0]}"


def consumer_fetch(
    leader: Leader, offset: int, rack: str
) -> broker_pb2.FetchResponse.PartitionResponse:
    parts = FetchParts(0, -1, True, {KEY: FetchPosition(offset, -1, -1, 1 << 20)}, ())
    request = fetch_request(parts, max_wait_ms=0, min_bytes=1)
    request.rack_id = rack
    reader = PartitionReader(leader.host, request, 0)
    answer = broker_pb2.FetchResponse.PartitionResponse(partition=0)
    for topic in request.topics:
        for wanted in topic.partitions:
            reader.read(topic.name, wanted, answer)
    return answer


def preferred(answer: broker_pb2.FetchResponse.PartitionResponse) -> int | None:
    return answer.preferred_read_replica if answer.HasField("preferred_read_replica") else None


def test_a_follower_in_the_consumers_rack_is_named_only_when_it_holds_the_offset(tmp_path: Path):
    leader = Leader(tmp_path)
    rack = racked(leader)
    near, far = leader.followers
    assert preferred(consumer_fetch(leader, 0, rack)) is None, "no fetch from it yet"

    leader.produce(10, now_ms=0)
    epoch = leader.hosted.leader_epoch
    for follower in (near, far):  # each reports its log: 0 to 10
        reported = FetchPosition(10, epoch, -1, 1 << 20, log_start_offset=0)
        assert leader.fetch(follower, {KEY: reported}, now_ms=10).error_code == 0
    assert preferred(consumer_fetch(leader, 4, rack)) == near
    assert preferred(consumer_fetch(leader, 10, rack)) == near, "waiting at its log end"

    # The near follower reports a log start of 6 (its retention moved it): offset 4 is gone
    # there, so the consumer must read it from the leader.
    position = FetchPosition(10, epoch, -1, 1 << 20, log_start_offset=6)
    assert leader.fetch(near, {KEY: position}, now_ms=20).error_code == 0
    answer = consumer_fetch(leader, 4, rack)
    assert preferred(answer) is None and answer.error_code == 0
    assert preferred(consumer_fetch(leader, 6, rack)) == near
