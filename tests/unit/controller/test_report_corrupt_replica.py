"""Goal: a replica that found its own log corrupt leaves the ISR (and the leadership) before it
truncates, and is never the one elected while a clean in-sync replica is live; a report that
would leave no live in-sync replica, or comes from a stale broker, changes nothing.

Method: build images with the real control plane and replay (test_control_plane's helpers),
call `report_corrupt_replica` against them, commit what it returns, and check the partition's
leader, leader epoch, ISR and partition epoch, and that a refusal commits no record.
"""

from __future__ import annotations

from test_control_plane import alter, commit, replicated

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c


def report(image: MetadataImage, broker_id: int, *, broker_epoch: int | None = None):
    state = image.topics["t"].partitions[0]
    request = c.ReportCorruptReplicaRequest(
        broker_id=broker_id,
        broker_epoch=image.brokers[broker_id].broker_epoch
        if broker_epoch is None
        else broker_epoch,
        topic="t",
        partition=0,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.partition_epoch,
        first_corrupt_offset=42,
    )
    result = cp.report_corrupt_replica(image, request)
    return commit(image, result), result


def test_a_corrupt_follower_leaves_the_isr_and_the_leader_stays():
    image, leader = replicated()
    before = image.topics["t"].partitions[0]
    follower = next(r for r in before.replicas if r != leader)
    image, result = report(image, follower)
    state = image.topics["t"].partitions[0]
    assert result.response.error_code == ErrorCode.NONE
    assert follower not in state.isr and len(state.isr) == 2
    assert (state.leader, state.leader_epoch) == (leader, before.leader_epoch)
    assert state.partition_epoch == before.partition_epoch + 1 == result.response.partition_epoch
    assert list(result.response.isr) == list(state.isr)


def test_a_corrupt_leader_hands_over_to_the_first_live_isr_replica_with_a_new_epoch():
    image, leader = replicated()
    before = image.topics["t"].partitions[0]
    image, result = report(image, leader)
    state = image.topics["t"].partitions[0]
    expected = next(r for r in before.replicas if r != leader)
    assert result.response.error_code == ErrorCode.NONE
    assert state.leader == expected == result.response.leader
    assert state.leader_epoch == before.leader_epoch + 1 == result.response.leader_epoch
    assert leader not in state.isr


def test_the_corrupt_replica_is_not_elected_when_the_new_leader_fails():
    image, leader = replicated()
    image, _ = report(image, leader)
    new_leader = image.topics["t"].partitions[0].leader
    image = commit(image, cp.fence_brokers(image, [new_leader]))
    state = image.topics["t"].partitions[0]
    assert state.leader not in (leader, new_leader), "the clean third replica leads"
    assert leader not in state.isr


def test_a_fenced_isr_member_is_no_successor():
    image, leader = replicated()
    others = [r for r in image.topics["t"].partitions[0].replicas if r != leader]
    image, _ = alter(image, leader, [leader, others[0]])
    image = commit(image, cp.fence_brokers(image, [others[0]]))
    assert image.topics["t"].partitions[0].isr == (leader,)
    after, result = report(image, leader)
    assert result.response.error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert after is image and not result.records


def test_the_only_in_sync_replica_is_refused_and_keeps_leading():
    image, leader = replicated()
    image, _ = alter(image, leader, [leader])  # the followers fell out of sync
    after, result = report(image, leader)
    response = result.response
    assert response.error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert "best copy" in response.error_message
    assert after is image and not result.records
    assert (response.leader, list(response.isr)) == (leader, [leader])


def test_a_stale_broker_epoch_is_refused():
    image, leader = replicated()
    after, result = report(image, leader, broker_epoch=999)
    assert result.response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert after is image and not result.records


def test_a_replica_already_out_of_the_isr_is_answered_without_a_change():
    image, leader = replicated()
    follower = next(r for r in image.topics["t"].partitions[0].replicas if r != leader)
    image, _ = report(image, follower)
    after, result = report(image, follower)
    assert result.response.error_code == ErrorCode.NONE and not result.records
    assert after is image


def test_unknown_partitions_and_non_replicas_are_refused():
    image, leader = replicated(brokers=4)
    outsider = next(b for b in image.brokers if b not in image.topics["t"].partitions[0].replicas)
    after, result = report(image, outsider)
    assert result.response.error_code == ErrorCode.INELIGIBLE_REPLICA and after is image
    request = c.ReportCorruptReplicaRequest(
        broker_id=leader, broker_epoch=image.brokers[leader].broker_epoch, topic="nope"
    )
    result = cp.report_corrupt_replica(image, request)
    assert result.response.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
