"""Goal: a partition reassignment (KIP-455) begins at once, waits for every added replica to
join the ISR, then removes the replicas the target leaves out with a new leader epoch (a removed
leader hands over to the target's first ISR member); a new target replaces the one in progress
from the original replicas; a cancel drops what was being added; bad targets are refused with a
message saying what to fix; List shows what is in progress.

Method: the pure control plane with the real replay (test_control_plane's helpers). t-0 is placed
by hand (reassignment_helpers.py); the leader's ISR proposals stand for followers catching up,
and the completion check runs after each, as the active controller runs it after every commit.
"""

from __future__ import annotations

import pytest
from reassignment_helpers import complete, join, listed, placed, reassign, reassign_ok, state
from test_control_plane import commit

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c


def test_a_reassignment_adds_then_waits_for_every_added_replica_then_removes() -> None:
    image = reassign_ok(placed([1]), [2, 3])
    now = state(image)
    assert (now.replicas, now.adding, now.removing, now.isr) == ((2, 3, 1), (2, 3), (1,), (1,))
    assert (now.leader, now.leader_epoch) == (1, 0), "nothing moves while replicas catch up"
    assert listed(image) == [("t", 0, (2, 3, 1), (2, 3), (1,))]
    image = join(image, 2)
    assert state(image).is_reassigning, "3 has not caught up yet"
    assert state(image).isr == (1, 2)
    image = join(image, 3)
    done = state(image)
    assert (done.replicas, done.isr, done.adding, done.removing) == ((2, 3), (2, 3), (), ())
    assert (done.leader, done.leader_epoch) == (2, 1), "the first target replica in the ISR leads"
    assert listed(image) == []


def test_a_kept_leader_stays_with_a_new_leader_epoch_that_fences_the_removed_followers() -> None:
    image = join(reassign_ok(placed([1, 2, 3]), [1, 2, 4]), 4)
    done = state(image)
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == ((1, 2, 4), (1, 2, 4), 1, 1)


def test_a_target_that_adds_nothing_completes_at_once_in_one_record() -> None:
    image, answers, records = reassign(placed([1, 2, 3]), ("t", 0, [2, 1]))
    assert answers == [(ErrorCode.NONE, "")] and records == 1
    done = state(image)
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == ((2, 1), (1, 2), 1, 1)
    assert not done.is_reassigning


def test_it_waits_while_only_removed_replicas_are_in_sync() -> None:
    image = placed([1, 2, 3])
    image = commit(image, cp.fence_brokers(image, [1, 2]))
    assert (state(image).leader, state(image).isr) == (3, (3,))
    image = reassign_ok(image, [1, 2])
    now = state(image)
    assert (now.replicas, now.adding, now.removing, now.leader) == ((1, 2, 3), (), (3,), 3)
    assert complete(image) == image, "the ISR has no target replica: nothing to hand over to"
    image = _unfence(image, 1)
    image = join(image, 1)
    done = state(image)
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == ((1, 2), (1,), 1, 2)


def test_naming_the_current_replicas_writes_nothing() -> None:
    image = placed([1, 2])
    after, answers, records = reassign(image, ("t", 0, [1, 2]))
    assert answers == [(ErrorCode.NONE, "")] and records == 0 and after == image


def test_a_new_target_replaces_the_one_in_progress_from_the_original_replicas() -> None:
    image = join(reassign_ok(placed([1]), [2, 3]), 2)
    image = reassign_ok(image, [2, 4])
    now = state(image)
    assert (now.replicas, now.adding, now.removing) == ((2, 4, 1), (2, 4), (1,))
    assert (now.isr, now.leader, now.leader_epoch) == ((1, 2), 1, 1), "3 dropped: epoch bumped"
    image = reassign_ok(image, [2])
    done = state(image)
    assert (done.replicas, done.isr, done.leader, done.is_reassigning) == ((2,), (2,), 2, False), (
        "2 is in sync already: the replacement completes at once"
    )


def test_a_cancel_drops_the_adding_replicas_and_keeps_the_removing_ones() -> None:
    image = join(reassign_ok(placed([1]), [2, 3]), 2)
    image = reassign_ok(image, None)
    now = state(image)
    assert (now.replicas, now.isr, now.adding, now.removing) == ((1,), (1,), (), ())
    assert (now.leader, now.leader_epoch) == (1, 1), "2 leaves the ISR: fenced by a new epoch"
    _, answers, records = reassign(image, ("t", 0, None))
    assert records == 0 and answers[0][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert "no reassignment in progress" in answers[0][1]


def test_a_cancel_moves_leadership_off_an_adding_replica() -> None:
    image = join(reassign_ok(placed([1, 2]), [3, 4]), 3)
    image = commit(image, cp.preferred_leader_elections(image))
    assert (state(image).leader, state(image).replicas[0]) == (3, 3), "the target's first leads"
    image = reassign_ok(image, None)
    now = state(image)
    assert (now.replicas, now.isr, now.leader, now.leader_epoch) == ((1, 2), (1, 2), 1, 2)


def test_a_cancel_that_would_drop_every_in_sync_replica_is_refused() -> None:
    image = join(reassign_ok(placed([1]), [2, 3]), 2)
    image = commit(image, cp.fence_brokers(image, [1]))
    assert (state(image).leader, state(image).isr) == (2, (2,))
    after, answers, records = reassign(image, ("t", 0, None))
    assert records == 0 and after == image
    assert answers[0][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "all replicas this would drop" in answers[0][1]


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ([], "is empty"),
        ([2, 2], "names a broker twice"),
        ([2, 9], "unregistered brokers [9]"),
        (list(range(1, limits.replication_factor_max + 2)), "limits.replication_factor_max"),
    ],
)
def test_bad_targets_are_refused_with_what_to_fix(target: list[int], words: str) -> None:
    image = placed([1])
    after, answers, records = reassign(image, ("t", 0, target))
    assert records == 0 and after == image
    assert answers[0][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT and words in answers[0][1]


def test_unknown_partitions_and_repeats_are_refused_per_item() -> None:
    image, answers, records = reassign(
        placed([1]), ("t", 0, [2]), ("t", 7, [2]), ("nope", 0, [2]), ("t", 0, [3])
    )
    codes = [code for code, _ in answers]
    assert codes == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
    ]
    assert "named more than once" in answers[3][1]
    assert records == 1 and state(image).adding == (2,), "the first item alone applied"


def test_list_filters_by_topic_and_partition() -> None:
    image = reassign_ok(placed([1]), [2])
    assert len(listed(image)) == 1
    assert len(listed(image, t=[])) == 1, "no partitions: all of the topic's"
    assert listed(image, t=[0]) == listed(image)
    assert listed(image, t=[3]) == [] and listed(image, nope=[0]) == []


def _heartbeat(image: MetadataImage, broker_id: int) -> c.BrokerHeartbeatRequest:
    broker = image.brokers[broker_id]
    return c.BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=broker.broker_epoch, metadata_offset=image.end_offset
    )


def _unfence(image: MetadataImage, broker_id: int) -> MetadataImage:
    return commit(image, cp.broker_heartbeat(image, _heartbeat(image, broker_id)))
