"""Goal: a follower told that its log diverges from the leader's truncates to where both still
agree, one epoch at a time (KIP-279), never keeping batches of an epoch the leader does not
hold and never asking the same question forever.

Method: the pure `truncation_offset` over the cases Kafka's fetcher distinguishes, with the
epochs written out as (epoch, start) lists and ends from the log's own leader-epoch cache; and
`apply_leader_answer` on a follower's real log (a PartitionHost in tmp_path) where its log start
or emptiness matters.
"""

from __future__ import annotations

import random
from pathlib import Path

from samsa.common.record.codec import build_batch
from samsa.services.broker.log.leader_epoch import LeaderEpochCache
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.follower_apply import (
    apply_leader_answer,
    follower_position,
    straddled_start,
    truncation_offset,
)
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_cluster import KEY, TOPIC, cluster_with_topic


def end_for(epochs: list[tuple[int, int]], log_end: int, epoch: int) -> tuple[int, int]:
    """A log's end_offset_for_epoch, for a list of (epoch, start)."""
    return LeaderEpochCache(epochs).end_offset_for_epoch(epoch, log_end)


def follower_truncates_to(
    leader: list[tuple[int, int]],
    leader_end: int,
    follower: list[tuple[int, int]],
    follower_end: int,
) -> int:
    """One divergence round: the follower asks about its last epoch, the leader answers."""
    leader_epoch, leader_end_offset = end_for(leader, leader_end, follower[-1][0])
    return truncation_offset(
        end_for(follower, follower_end, leader_epoch),
        leader_epoch,
        leader_end_offset,
        follower_end,
        high_watermark=0,
    )


def test_a_shared_epoch_ends_where_the_shorter_log_leaves_it():
    # Both hold epoch 1; the leader's ends at 30 (epoch 3 from there), the follower's goes on.
    assert follower_truncates_to([(0, 0), (1, 10), (3, 30)], 40, [(0, 0), (1, 10)], 35) == 30


def test_an_epoch_the_leader_never_had_is_cut_where_the_follower_started_it():
    # The follower wrote epoch 2 (as a leader nobody followed) from 58; the leader holds epoch 1
    # up to 63. Truncating to the leader's 63 would keep epoch-2 batches at 58..62 (follower
    # longer) or change nothing and loop (follower shorter, the simulation's seed 881).
    leader = [(0, 0), (1, 57), (3, 63)]
    assert follower_truncates_to(leader, 93, [(0, 0), (1, 57), (2, 58)], 62) == 58
    assert follower_truncates_to(leader, 93, [(0, 0), (1, 57), (2, 58)], 70) == 58


def test_a_follower_without_the_leaders_epoch_steps_back_one_epoch_at_a_time():
    # The leader answers epoch 2, which this follower never held (it has 1 then 4): it cuts to
    # the end of its epoch 1 and asks again from there.
    leader = [(0, 0), (2, 20), (5, 50)]
    follower = [(0, 0), (1, 10), (4, 25)]
    first = follower_truncates_to(leader, 60, follower, 40)
    assert first == 25
    # Next round: its last epoch is now 1, ending at 25 in its log; the leader's floor for 1
    # is epoch 0 ending at 20.
    assert follower_truncates_to(leader, 60, [(0, 0), (1, 10)], 25) == 10


def test_an_undefined_answer_falls_back_to_the_high_watermark():
    assert truncation_offset((-1, -1), -1, -1, 50, high_watermark=12) == 12
    assert truncation_offset((-1, -1), -1, -1, 8, high_watermark=12) == 8


def test_a_follower_with_no_epochs_takes_the_leaders_end():
    assert truncation_offset((-1, -1), 3, 30, 45, high_watermark=0) == 30


def test_an_empty_replica_starts_at_a_batch_that_straddles_its_log_start():
    """DeleteRecords put the leader's log start (23) inside a batch (20..25); a follower that
    started over at 23 is sent the whole batch and must start at 20 to take it (the
    simulation's DeleteRecords mode: seed 16 never converged without it)."""
    batch = build_batch([b"x"] * 6, base_offset=20)
    assert straddled_start(batch, 23, 23) == 20
    assert straddled_start(batch, 20, 20) is None, "starts at the batch: appended as it is"
    assert straddled_start(batch, 10, 23) is None, "a log holding records is not restarted"
    assert straddled_start(batch, 26, 26) is None, "a batch wholly below: refused as usual"


def test_a_follower_whose_log_start_is_above_the_diverging_point_starts_over_there(
    tmp_path: Path,
) -> None:
    """A follower's DeleteRecords moved its log start (12) past the epochs it must compare: its
    epoch cache keeps only epoch 2 from 12. The leader says epoch 1 ends at 7 in its log; the
    follower, which knows nothing of epoch 1 any more, answers as Kafka does (epoch 1 up to its
    first known start, 12), so both agree only up to 7: everything it holds goes (the batch
    5..9 straddles 7), its log starts over at 5 with its high watermark, and it asks the
    leader from there with no epoch to check."""
    image = cluster_with_topic({}, random.Random(1))
    follower = image.topics[TOPIC].partitions[0].replicas[1]
    host = PartitionHost(tmp_path, follower)
    host.apply(image, partition_changes(host.image, image, follower), now_ms=0)
    hosted = host.get(*KEY)
    assert hosted is not None and not hosted.is_leader
    for base_offset, epoch in ((0, 0), (5, 1), (10, 2)):
        batch = build_batch([b"x"] * 5, base_offset=base_offset, partition_leader_epoch=epoch)
        hosted.log.append_as_follower(batch, now_ms=0)
    hosted.replica.take_leader_high_watermark(12, 0, 15)
    hosted.log.delete_records(12)
    assert hosted.log.leader_epoch_entries() == [(2, 12)]

    answer = broker_pb2.FetchResponse.PartitionResponse(partition=0, high_watermark=7)
    answer.diverging_epoch.leader_epoch = 1
    answer.diverging_epoch.end_offset = 7
    assert apply_leader_answer(hosted, answer, now_ms=0)
    assert (hosted.log.log_start_offset, hosted.log.log_end_offset) == (5, 5)
    assert hosted.high_watermark == 5
    position = follower_position(hosted)
    assert (position.fetch_offset, position.last_fetched_epoch) == (5, -1)
    host.close_all()


def test_an_empty_follower_asks_from_its_log_start_with_no_epoch_to_check(tmp_path: Path) -> None:
    image = cluster_with_topic({}, random.Random(1))
    follower = image.topics[TOPIC].partitions[0].replicas[1]
    host = PartitionHost(tmp_path, follower)
    host.apply(image, partition_changes(host.image, image, follower), now_ms=0)
    hosted = host.get(*KEY)
    assert hosted is not None
    hosted.log.truncate_fully_and_start_at(40)
    position = follower_position(hosted)
    assert (position.fetch_offset, position.last_fetched_epoch, position.log_start_offset) == (
        40,
        -1,
        40,
    )
    host.close_all()
