"""Goal: a leader throttles (KIP-73) only a throttled follower outside the ISR: its reads are
bounded by what the leader quota has left, then answered empty — not with an error, and with
the follower's progress still counted — while a follower in the ISR is answered in full; the
bytes sent are recorded once per answered partition.

Method: the leader's PartitionHost over a real log (test_replication_review.Leader), the throttle
configs put in its metadata image by hand, followers only their fetches at a given clock.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from test_replication_review import Leader

from samsa.common.fetch_session_client import FetchParts, FetchPosition, fetch_request
from samsa.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from samsa.metadata.replication_throttles import LEADER_RATE, LEADER_REPLICAS
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_cluster import KEY, TOPIC

RATE = 2000  # bytes per second


def throttled_leader(tmp_path: Path) -> tuple[Leader, int, int]:
    """A leader throttling TOPIC-0's followers at RATE, its ISR (leader, in_sync); returns it,
    the follower in the ISR and the one outside."""
    leader = Leader(tmp_path)
    in_sync, out = leader.followers
    leader.shrink_isr_to(in_sync)
    configs = dict(leader.image.configs)
    configs[(BROKER_RESOURCE, str(leader.state.leader))] = {LEADER_RATE: str(RATE)}
    own = dict(configs.get((TOPIC_RESOURCE, TOPIC), {}))
    configs[(TOPIC_RESOURCE, TOPIC)] = own | {LEADER_REPLICAS: "*"}
    leader.image = leader.apply(replace(leader.image, configs=configs))
    for batch in range(40):
        leader.produce(10, now_ms=batch)
    return leader, in_sync, out


def fetch(leader: Leader, replica: int, offset: int, now_ms: int) -> tuple[object, bytes]:
    """`replica`'s fetch of TOPIC-0 from `offset`: the partition's answer and its records (which
    the reader keeps beside the answer, for the stream to splice in)."""
    position = FetchPosition(offset, leader.hosted.leader_epoch, -1, 1 << 20)
    parts = FetchParts(0, -1, True, {KEY: position}, ())
    request = fetch_request(parts, replica_id=replica, max_wait_ms=0, min_bytes=1)
    reader = PartitionReader(leader.host, request, now_ms)
    answer = broker_pb2.FetchResponse.PartitionResponse(partition=0)
    reader.read(TOPIC, request.topics[0].partitions[0], answer)
    return answer, reader.records.get(KEY, b"")


def test_a_follower_outside_the_isr_is_bounded_then_answered_empty(tmp_path: Path) -> None:
    leader, _, out = throttled_leader(tmp_path)
    offset, sent, fetches = 0, 0, 0
    while True:  # fetches within the same second, until the quota is used up
        held, records = fetch(leader, out, offset, now_ms=1000 + fetches)
        assert held.error_code == 0
        if not records:
            break
        sent, offset, fetches = sent + len(records), held.next_fetch_offset, fetches + 1
    batch_bytes = len(leader.hosted.log.read(0, 1).records)  # the log returns one whole
    assert fetches >= 1 and sent <= RATE + batch_bytes  # the room, plus at most one batch
    assert offset < leader.hosted.log.log_end_offset
    assert leader.host.throttles.throttled_bytes["leader"] == sent
    assert held.next_fetch_offset == offset
    assert held.high_watermark == leader.hosted.high_watermark
    progress = leader.hosted.replica.leading.followers[out]
    assert progress.log_end_offset == offset  # its progress still counts
    # Seconds later the quota has room again.
    later, records = fetch(leader, out, offset, now_ms=4000)
    assert records and later.next_fetch_offset > offset


def test_a_follower_in_the_isr_is_never_throttled(tmp_path: Path) -> None:
    leader, in_sync, out = throttled_leader(tmp_path)
    fetch(leader, out, 0, now_ms=1000)  # uses the quota up
    answer, records = fetch(leader, in_sync, 0, now_ms=1010)
    assert answer.next_fetch_offset == leader.hosted.log.log_end_offset  # all of it at once
    assert len(records) > RATE
