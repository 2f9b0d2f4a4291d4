"""Goal: the controller's other paths stay correct while a partition is being reassigned
(KIP-455): eligible leader replicas (KIP-966) never name a replica that leaves the partition,
fencing elects from the ISR in replica order (the target's first), an unclean election prefers
a replica that held the log over one still being added, CreatePartitions places new partitions
with the target's length, and deleting the topic removes it whole.

Method: as test_reassignment_control.py: the pure control plane with the real replay, t-0
placed by hand, the leader's ISR proposals standing for followers catching up.
"""

from __future__ import annotations

import random

from reassignment_helpers import join, listed, placed, reassign_ok, state
from test_control_plane import alter, commit

from samsa.common.errors import ErrorCode
from samsa.metadata.image import NO_LEADER, MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.services.controller.reassignment_control import topics_reassigning
from samsa.v1 import controller_pb2 as c


def test_completing_takes_removed_replicas_out_of_the_eligible_leaders() -> None:
    image = placed([1, 2, 3], **{"min.insync.replicas": "3"})
    image = reassign_ok(image, [1, 2, 4])
    image = commit(image, cp.fence_brokers(image, [2, 3]))
    assert (state(image).isr, state(image).elr) == ((1,), (2, 3))
    image = join(image, 4)
    done = state(image)
    assert (done.replicas, done.isr, done.elr, done.removing) == ((1, 2, 4), (1, 4), (2,), ())
    assert (done.leader, done.leader_epoch) == (1, 1)


def test_a_cancel_takes_dropped_replicas_out_of_the_eligible_leaders() -> None:
    image = placed([1, 2, 3], **{"min.insync.replicas": "3"})
    image = reassign_ok(image, [1, 2, 4, 5])
    image, answer = alter(image, 1, [1, 2, 3, 4])
    assert answer.error_code == ErrorCode.NONE
    image = commit(image, cp.fence_brokers(image, [2, 3]))
    image = commit(image, cp.fence_brokers(image, [4]))
    assert (state(image).isr, state(image).elr) == ((1,), (2, 4, 3)), "in replica order"
    image = reassign_ok(image, None)
    now = state(image)
    assert (now.replicas, now.isr, now.elr, now.leader) == ((1, 2, 3), (1,), (2, 3), 1)


def test_fencing_the_leader_elects_the_first_live_isr_member_in_target_order() -> None:
    image = reassign_ok(placed([1, 2, 3]), [3, 2, 4])
    assert state(image).replicas == (3, 2, 4, 1)
    image = commit(image, cp.fence_brokers(image, [1]))
    assert (state(image).leader, state(image).isr) == (3, (2, 3))


def test_an_unclean_election_prefers_a_replica_that_held_the_log() -> None:
    image = placed([1, 2], **{"unclean.leader.election.enable": "true"})
    image, _ = alter(image, 1, [1])  # 2 fell behind
    image = reassign_ok(image, [3, 1, 2])
    assert (state(image).replicas, state(image).adding) == ((3, 1, 2), (3,))
    image = commit(image, cp.fence_brokers(image, [1]))
    assert (state(image).leader, state(image).isr) == (2, (2,)), "2 before 3, which has nothing"


def test_an_unclean_election_takes_an_adding_replica_only_when_nothing_else_is_live() -> None:
    image = placed([1], **{"unclean.leader.election.enable": "true"})
    image = reassign_ok(image, [2])
    image = commit(image, cp.fence_brokers(image, [1]))
    assert (state(image).leader, state(image).isr) == (2, (2,))


def test_without_unclean_election_an_adding_replica_never_leads_out_of_sync() -> None:
    image = reassign_ok(placed([1]), [2])
    image = commit(image, cp.fence_brokers(image, [1]))
    assert (state(image).leader, state(image).isr) == (NO_LEADER, (1,))
    assert listed(image) == [("t", 0, (2, 1), (2,), (1,))]


def test_create_partitions_uses_the_targets_replication_factor() -> None:
    image = reassign_ok(placed([1]), [2, 3])
    request = c.CreatePartitionsRequest(topics=[c.CreatePartitionsRequest.Topic(name="t", count=2)])
    result = cp.create_partitions(image, request, rng=random.Random(0))
    assert result.response.topics[0].error_code == ErrorCode.NONE
    image = commit(image, result)
    assert len(image.topics["t"].partitions[1].replicas) == 2, "not 3: 1 is leaving"


def test_deleting_a_topic_mid_reassignment_removes_it_whole() -> None:
    image = join(reassign_ok(placed([1]), [2, 3]), 2)
    image = commit(image, cp.delete_topics(image, c.DeleteTopicsRequest(names=["t"])))
    assert "t" not in image.topics and listed(image) == []


def test_the_completion_loop_tracks_moving_topics_from_what_each_commit_changed() -> None:
    # The loop looks only into topics a commit changed and those it knows are moving
    # (topics_reassigning); along begin, catch-up, completion, cancel and deletion its set must
    # equal a scan of every partition, or a move would never be completed.
    def scanned(image: MetadataImage) -> frozenset[str]:
        return frozenset(
            name
            for name, topic in image.topics.items()
            if any(p.is_reassigning for p in topic.partitions.values())
        )

    steps = [placed([1])]
    steps.append(reassign_ok(steps[-1], [2, 3]))
    steps.append(join(steps[-1], 2))  # 3 still catching up: in progress
    steps.append(join(steps[-1], 3))  # completes
    steps.append(reassign_ok(steps[-1], [4]))
    steps.append(reassign_ok(steps[-1], None))  # cancelled
    steps.append(reassign_ok(steps[-1], [5]))
    steps.append(commit(steps[-1], cp.delete_topics(steps[-1], c.DeleteTopicsRequest(names=["t"]))))
    known: frozenset[str] = frozenset()
    seen = MetadataImage.empty()
    tracked = []
    for image in steps:
        known = topics_reassigning(seen, image, known)
        seen = image
        assert known == scanned(image)
        tracked.append(bool(known))
    assert tracked == [False, True, True, False, True, False, True, False]
    # A topic no commit touched is never scanned again: its image is the very same object.
    moving = steps[1]
    assert topics_reassigning(moving, moving, frozenset()) == frozenset()
