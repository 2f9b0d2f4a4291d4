"""Goal: a follower of a leader whose retention took every segment, the active one too (log
start == log end, a74ea3e), ends where the leader is: behind it, it starts over empty at the
leader's log start with its high watermark there and no epoch to check, then takes the new
epoch's records; caught up, it moves its log start and keeps its records' producer state until
its own retention takes them, keeping its log end. One that starts over at a batch straddling
the leader's log start keeps its high watermark within its log.

Method: `apply_leader_answer` on a follower's real log (a PartitionHost in tmp_path), with the
leader's answers written out as a leader with an emptied log gives them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.follower_apply import apply_leader_answer, follower_position
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_cluster import KEY, TOPIC, cluster_with_topic

HOUR_MS = 3_600_000
Answer = broker_pb2.FetchResponse.PartitionResponse


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[HostedPartition]:
    image = cluster_with_topic({"retention.ms": str(HOUR_MS)}, random.Random(1))
    broker_id = image.topics[TOPIC].partitions[0].replicas[1]
    host = PartitionHost(tmp_path, broker_id)
    host.apply(image, partition_changes(host.image, image, broker_id), now_ms=0)
    hosted = host.get(*KEY)
    assert hosted is not None and not hosted.is_leader
    yield hosted
    host.close_all()


def records(base_offset: int, count: int, epoch: int, sequence: int = 0) -> bytes:
    return build_batch(
        [b"x"] * count,
        timestamps=1_000,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        producer_id=7,
        producer_epoch=0,
        base_sequence=sequence,
    )


def test_a_follower_behind_an_emptied_leader_starts_over_at_its_log_start(
    follower: HostedPartition,
) -> None:
    follower.log.append_as_follower(records(0, 2, epoch=3), now_ms=0)
    answer = Answer(partition=0, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    answer.high_watermark, answer.log_start_offset = 4, 4
    assert apply_leader_answer(follower, answer, now_ms=0)
    assert (follower.log.log_start_offset, follower.log.log_end_offset) == (4, 4)
    assert follower.high_watermark == 4
    position = follower_position(follower)
    assert (position.fetch_offset, position.last_fetched_epoch, position.log_start_offset) == (
        4,
        -1,
        4,
    )
    news = Answer(partition=0, high_watermark=4, log_start_offset=4, records=records(4, 1, 5, 4))
    assert apply_leader_answer(follower, news, now_ms=0)
    assert follower.log.log_end_offset == 5
    assert follower.log.leader_epoch_entries() == [(5, 4)]


def test_a_caught_up_follower_follows_the_log_start_then_retains_its_own_way(
    follower: HostedPartition,
) -> None:
    follower.log.append_as_follower(records(0, 4, epoch=3), now_ms=0)
    answer = Answer(partition=0, high_watermark=4, log_start_offset=4)
    assert apply_leader_answer(follower, answer, now_ms=0)
    assert (follower.log.log_start_offset, follower.log.log_end_offset) == (4, 4)
    assert follower.high_watermark == 4
    assert follower_position(follower).log_start_offset == 4
    assert follower.log.apply_retention(now_ms=1_001 + HOUR_MS, high_watermark=4) == 1
    assert [(s.base_offset, s.size_bytes) for s in follower.log.segments()] == [(4, 0)]
    assert [
        (e.producer_id, e.batches[-1].last_sequence) for e in follower.log.producer_entries()
    ] == [(7, 3)]
    assert follower.log.leader_epoch_entries() == [(3, 4)]
    follow_on = Answer(
        partition=0, high_watermark=5, log_start_offset=4, records=records(4, 1, 3, 4)
    )
    assert apply_leader_answer(follower, follow_on, now_ms=0)
    assert (follower.log.log_end_offset, follower.high_watermark) == (5, 5)


def test_a_follower_restarted_at_a_straddling_batch_keeps_its_high_watermark_in_its_log(
    follower: HostedPartition,
) -> None:
    """DeleteRecords(5) put the leader's log start inside its batch 3..7; a follower that started
    over at 5 must start at 3 to take that batch. If the append then fails (the batch is damaged
    on the leader's disk), the high watermark it had at 5 must not stay above its log end (3):
    it did, as nothing kept it within the log after that restart."""
    behind = Answer(partition=0, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    behind.high_watermark, behind.log_start_offset = 6, 5
    assert apply_leader_answer(follower, behind, now_ms=0)
    assert (follower.log.log_end_offset, follower.high_watermark) == (5, 5)
    damaged = bytearray(records(3, 5, epoch=2))
    damaged[-1] ^= 0xFF  # fails the CRC check
    answer = Answer(partition=0, high_watermark=6, log_start_offset=5, records=bytes(damaged))
    assert not apply_leader_answer(follower, answer, now_ms=0)
    assert (follower.log.log_start_offset, follower.log.log_end_offset) == (3, 3)
    assert follower.high_watermark == 3
    answer.records = records(3, 5, epoch=2)  # sent again, sound
    assert apply_leader_answer(follower, answer, now_ms=0)
    assert (follower.log.log_start_offset, follower.log.log_end_offset) == (5, 8)
    assert follower.high_watermark == 6
