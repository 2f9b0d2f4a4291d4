"""Goal: a broker that asked to shut down stays out until it registers again (Kafka's KIP-841).
Its routine heartbeat H1 (want_shutdown=False) may still be retried across controllers when
shutdown() sends H2 (want_shutdown=True); H2 fences it and moves its leaderships, then H1 lands
with the same broker epoch. It unfenced the broker: offline partitions were handed back to it,
and leaders could add it to ISRs while it drained, so acks=all writes then waited for a stopped
broker. The registration is now marked in controlled shutdown, in the metadata log with the
fence (so a controller after failover, or one loaded from a snapshot, knows it too): no heartbeat
of that epoch unfences it, no election picks it, no AlterPartition adds it to an ISR; a new
registration clears the mark.

Method: the pure control plane with the real replay and snapshots, as test_control_plane.py; H1
is a heartbeat without want_shutdown decided after H2 committed.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode
from samsa.metadata.image import NO_LEADER, MetadataImage
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.services.controller import control_plane as cp
from tests.unit.controller.test_control_plane import (
    alter,
    cluster,
    commit,
    create,
    heartbeat,
    register,
)


def stopping_follower() -> tuple[MetadataImage, int, int]:
    """t-0 at RF 3 and a follower of it that sent want_shutdown: (image, leader, follower)."""
    image, _ = create(cluster(3), "t", partitions=1, factor=3)
    state = image.topics["t"].partitions[0]
    leaving = next(r for r in state.replicas if r != state.leader)
    image, answer = heartbeat(image, leaving, want_shutdown=True)
    assert answer.should_shut_down and image.brokers[leaving].fenced
    assert image.brokers[leaving].in_controlled_shutdown
    assert leaving not in image.topics["t"].partitions[0].isr
    return image, state.leader, leaving


@pytest.mark.parametrize("fenced_before", [False, True], ids=["live", "session-expired"])
def test_a_heartbeat_overtaken_by_want_shutdown_does_not_unfence(fenced_before: bool) -> None:
    image, _ = create(cluster(3), "t", partitions=1, factor=3)
    if fenced_before:  # its session expired first: the shutdown still marks it
        image = commit(image, cp.fence_brokers(image, [2]))
    image, _ = heartbeat(image, 2, want_shutdown=True)
    image, answer = heartbeat(image, 2)  # H1, sent before, landing after
    assert image.brokers[2].fenced, "a broker shutting down was unfenced again"
    assert answer.is_fenced and answer.should_shut_down
    again, answer = heartbeat(image, 2, want_shutdown=True)
    assert again is image and answer.should_shut_down, "marked already: nothing to commit"


def test_no_leader_can_put_the_stopping_broker_back_in_the_isr() -> None:
    image, leader, leaving = stopping_follower()
    image, _ = heartbeat(image, leaving)  # the overtaken routine heartbeat
    isr = [*image.topics["t"].partitions[0].isr, leaving]
    after, answer = alter(image, leader, isr)  # it still fetches while it drains
    assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA, (
        "KIP-841: a broker in controlled shutdown joined the ISR; once it stops, acks=all "
        "writes wait for it until the lag timeout or its session expires"
    )
    assert "controlled shutdown" in answer.error_message and after is image


def test_no_election_hands_an_offline_partition_back_to_the_stopping_broker() -> None:
    image, _ = create(cluster(3), "solo", partitions=1, factor=1)
    owner = image.topics["solo"].partitions[0].leader
    image, _ = heartbeat(image, owner, want_shutdown=True)
    assert image.topics["solo"].partitions[0].leader == NO_LEADER
    image, _ = heartbeat(image, owner)  # the overtaken routine heartbeat
    assert image.topics["solo"].partitions[0].leader == NO_LEADER, "elected while stopping"


def test_the_mark_survives_a_snapshot_as_a_new_controller_loads_it() -> None:
    image, _, leaving = stopping_follower()
    restored = from_snapshot(to_snapshot(image))
    assert restored == image and restored.brokers[leaving].in_controlled_shutdown
    restored, _ = heartbeat(restored, leaving)
    assert restored.brokers[leaving].fenced


def test_a_new_registration_clears_the_mark() -> None:
    image, _, leaving = stopping_follower()
    image, _ = register(image, leaving, incarnation="restarted")
    assert not image.brokers[leaving].in_controlled_shutdown
    image, answer = heartbeat(image, leaving)
    assert not image.brokers[leaving].fenced and not answer.should_shut_down
