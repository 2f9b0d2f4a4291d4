"""Review findings in the controller's decisions: each test failed before its fix."""

from __future__ import annotations

import random

from samsa.common.errors import ErrorCode
from samsa.metadata.image import NO_LEADER
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from tests.unit.controller.test_control_plane import (
    alter,
    alter_config,
    cluster,
    commit,
    create,
    heartbeat,
)

UNCLEAN = ("unclean.leader.election.enable", c.ALTER_CONFIG_OP_SET, "true")


def _offline_with_out_of_sync_follower_fenced():
    """t-0 on brokers 1 and 2, led by 1 with ISR [1]; 2 fenced first, then 1: offline."""
    image, _ = create(cluster(2), "t", partitions=1, factor=2)
    leader = image.topics["t"].partitions[0].leader
    follower = 3 - leader
    image, _ = alter(image, leader, [leader])  # the follower fell out of sync
    image = commit(image, cp.fence_brokers(image, [follower]))
    image = commit(image, cp.fence_brokers(image, [leader]))
    state = image.topics["t"].partitions[0]
    assert state.leader == NO_LEADER and state.isr == (leader,)
    return image, leader, follower


def test_an_out_of_sync_replica_that_returns_leads_an_offline_partition_when_unclean_is_allowed():
    image, _, follower = _offline_with_out_of_sync_follower_fenced()
    image, _ = alter_config(image, "t", UNCLEAN)
    image, _ = heartbeat(image, follower)
    state = image.topics["t"].partitions[0]
    assert (state.leader, state.isr) == (follower, (follower,))


def test_an_out_of_sync_replica_that_returns_does_not_lead_when_unclean_is_not_allowed():
    image, leader, follower = _offline_with_out_of_sync_follower_fenced()
    image, _ = heartbeat(image, follower)
    state = image.topics["t"].partitions[0]
    assert (state.leader, state.isr) == (NO_LEADER, (leader,))


def test_allowing_unclean_election_elects_a_live_replica_of_an_offline_partition():
    image, _, follower = _offline_with_out_of_sync_follower_fenced()
    image, _ = heartbeat(image, follower)  # back, but not allowed to lead yet
    assert image.topics["t"].partitions[0].leader == NO_LEADER
    image, _ = alter_config(image, "t", UNCLEAN)
    state = image.topics["t"].partitions[0]
    assert (state.leader, state.isr) == (follower, (follower,))


def test_create_partitions_naming_a_topic_twice_refuses_it_instead_of_an_uncommittable_batch():
    """Both counts were placed from partition 1 on, so the batch repeated t-1 and replay refused
    it whole: the driver answered NOT_CONTROLLER, and every retry failed the same way."""
    image, _ = create(cluster(3), "t", partitions=1)
    request = c.CreatePartitionsRequest(
        topics=[
            c.CreatePartitionsRequest.Topic(name="t", count=2),
            c.CreatePartitionsRequest.Topic(name="t", count=3),
        ]
    )
    result = cp.create_partitions(image, request, rng=random.Random(1))
    codes = [topic.error_code for topic in result.response.topics]
    assert codes == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
    assert result.records == []
