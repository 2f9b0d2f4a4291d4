"""Goal: a follower told that its log diverges from the leader's truncates to where both still
agree, one epoch at a time (KIP-279), never keeping batches of an epoch the leader does not
hold and never asking the same question forever.

Method: the pure `truncation_offset` over the cases Kafka's fetcher distinguishes, with the
epochs written out as (epoch, start) lists and ends from the log's own leader-epoch cache.
"""

from __future__ import annotations

from samsa.common.record.codec import build_batch
from samsa.services.broker.log.leader_epoch import LeaderEpochCache
from samsa.services.broker.replica.follower_apply import (
    straddled_start,
    truncation_offset,
)


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
