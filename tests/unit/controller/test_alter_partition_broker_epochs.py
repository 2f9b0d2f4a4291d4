"""Goal: the controller adds a replica to an ISR only on fetches its current registration made
(KIP-903). A follower outside the ISR that fetched up to the high watermark, lost power (its
unflushed tail with it) and registered again is unfenced as soon as it catches up on metadata;
a leader whose metadata still shows the old registration proposes it on the old incarnation's
progress. AlterPartition names each member's broker epoch as the leader saw it fetch, and the
controller refuses (INELIGIBLE_REPLICA, per partition, nothing committed) a joiner whose epoch
is missing or not its current one. Members already in the ISR are not checked, and fenced or
shutting-down joiners stay refused whatever epoch they carry.

Method: the pure `alter_partition` over images built with the real control plane and replay
(the helpers of test_control_plane.py: three brokers, topic "t" with one partition at RF=3).
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from tests.unit.controller.test_control_plane import (
    alter,
    cluster,
    commit,
    create,
    heartbeat,
    register,
    replicated,
)


def out_of_sync() -> tuple[MetadataImage, int, int, int]:
    """t-0 with ISR (leader, in_sync): `joiner` fell out and may come back. Returns the image,
    the leader, the in-sync follower and the joiner."""
    image, leader = replicated()
    in_sync, joiner = (r for r in image.topics["t"].partitions[0].replicas if r != leader)
    image, answer = alter(image, leader, [leader, in_sync])
    assert answer.error_code == ErrorCode.NONE
    return image, leader, in_sync, joiner


def restarted(image: MetadataImage, broker_id: int) -> MetadataImage:
    """`broker_id` registers again (a new incarnation: a new broker epoch) and is unfenced."""
    image, _ = register(image, broker_id, incarnation="after-power-loss")
    image, response = heartbeat(image, broker_id)
    assert not response.is_fenced
    return image


def test_a_joiner_seen_fetching_under_its_current_registration_is_added():
    image, leader, in_sync, joiner = out_of_sync()
    epochs = {r: image.brokers[r].broker_epoch for r in (leader, joiner)}
    after, answer = alter(image, leader, [leader, in_sync, joiner], epochs=epochs)
    assert answer.error_code == ErrorCode.NONE, "in_sync is already a member: not checked"
    assert set(after.topics["t"].partitions[0].isr) == {leader, in_sync, joiner}


def test_a_joiner_seen_fetching_under_its_previous_registration_is_refused():
    image, leader, in_sync, joiner = out_of_sync()
    old_epoch = image.brokers[joiner].broker_epoch
    image = restarted(image, joiner)
    assert image.brokers[joiner].broker_epoch != old_epoch
    state = image.topics["t"].partitions[0]

    after, answer = alter(image, leader, [leader, in_sync, joiner], epochs={joiner: old_epoch})

    assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA
    assert f"broker {joiner}" in answer.error_message and str(old_epoch) in answer.error_message
    assert after is image, "nothing committed"
    assert (answer.partition_epoch, tuple(answer.isr)) == (state.partition_epoch, state.isr)
    after, answer = alter(image, leader, [leader, in_sync, joiner])  # fetched since: current
    assert answer.error_code == ErrorCode.NONE and joiner in after.topics["t"].partitions[0].isr


def test_a_joiner_without_an_epoch_is_refused():
    """A leader that does not name a joiner's epoch (an unknown one, -1, or none at all, as a
    leader from before KIP-903 sends) cannot show it fetched under its current registration."""
    image, leader, in_sync, joiner = out_of_sync()
    for epochs in ({joiner: -1}, {leader: image.brokers[leader].broker_epoch}, {}):
        after, answer = alter(image, leader, [leader, in_sync, joiner], epochs=epochs)
        assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA, epochs
        assert after is image


def test_members_already_in_the_isr_are_not_checked():
    """A member's epoch changes nothing about who may be elected: it is one already. (A member
    that registers again leaves the ISR then, moving the partition epoch, so a leader naming its
    previous epoch is refused INVALID_UPDATE_VERSION anyway.)"""
    image, leader = replicated()
    in_sync, _ = (r for r in image.topics["t"].partitions[0].replicas if r != leader)
    for epochs in ({}, {in_sync: -1}, {in_sync: image.brokers[in_sync].broker_epoch + 7}):
        after, answer = alter(image, leader, [leader, in_sync], epochs=epochs)
        assert answer.error_code == ErrorCode.NONE, epochs
        assert after.topics["t"].partitions[0].isr == (leader, in_sync)
    old_epoch = image.brokers[in_sync].broker_epoch
    restarted_image = restarted(image, in_sync)
    assert in_sync not in restarted_image.topics["t"].partitions[0].isr
    after, answer = alter(
        restarted_image,
        leader,
        [leader, in_sync],
        epochs={in_sync: old_epoch},
        partition_epoch=image.topics["t"].partitions[0].partition_epoch,
    )
    assert answer.error_code == ErrorCode.INVALID_UPDATE_VERSION and after is restarted_image


def test_a_fenced_or_shutting_down_joiner_is_refused_with_its_current_epoch():
    image, leader, in_sync, joiner = out_of_sync()
    stopping, response = heartbeat(image, joiner, want_shutdown=True)
    assert response.should_shut_down and stopping.brokers[joiner].fenced
    fenced = commit(image, cp.fence_brokers(image, [joiner]))
    for before in (stopping, fenced):
        after, answer = alter(before, leader, [leader, in_sync, joiner])
        assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA and after is before


def test_the_refusal_is_per_partition():
    """One request, two partitions led by broker 1: the one adding broker 3 on its previous
    registration's fetches is refused, the one adding it on its current one's is committed."""
    image, _ = create(cluster(3), "t", partitions=6, factor=3)
    mine = [s for _, s in sorted(image.topics["t"].partitions.items()) if s.leader == 1][:2]
    assert len(mine) == 2
    image = commit(image, cp.alter_partition(image, request(image, mine, {}, shrink=3)))
    old_epoch = image.brokers[3].broker_epoch
    image = restarted(image, 3)
    mine = [image.topics["t"].partitions[s.partition] for s in mine]
    assert all(3 not in s.isr for s in mine)
    epochs = {mine[0].partition: old_epoch, mine[1].partition: image.brokers[3].broker_epoch}

    result = cp.alter_partition(image, request(image, mine, epochs))

    codes = [answer.error_code for answer in result.response.partitions]
    assert codes == [ErrorCode.INELIGIBLE_REPLICA, ErrorCode.NONE]
    after = commit(image, result)
    assert 3 not in after.topics["t"].partitions[mine[0].partition].isr
    assert 3 in after.topics["t"].partitions[mine[1].partition].isr


def request(
    image: MetadataImage,
    states: list[PartitionState],
    joiner_epochs: dict[int, int],
    shrink: int | None = None,
) -> c.AlterPartitionRequest:
    """Broker 1's proposal for `states`: drop `shrink`, or add broker 3 with the epoch named for
    each partition in `joiner_epochs`."""
    proposal = c.AlterPartitionRequest(broker_id=1, broker_epoch=image.brokers[1].broker_epoch)
    for state in states:
        item = proposal.partitions.add(
            topic="t",
            partition=state.partition,
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
        )
        if shrink is not None:
            item.new_isr.extend(r for r in state.isr if r != shrink)
            continue
        item.new_isr.extend([*state.isr, 3])
        item.new_isr_with_epochs.add(broker_id=3, broker_epoch=joiner_epochs[state.partition])
    return proposal
