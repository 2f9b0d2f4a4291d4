"""The metadata state machine applied directly: offsets, epochs, all-or-nothing batches, hashes."""

from __future__ import annotations

import pytest
from metadata_helpers import (
    apply,
    change,
    config,
    fence,
    partition,
    register,
    remove,
    topic,
    unfence,
)

from samsa.metadata.image import INITIAL_HASH, NO_LEADER, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import chain_hash, make_batch
from samsa.metadata.replay import (
    InvalidBatchError,
    MetadataDivergenceError,
    StaleBatchError,
    replay,
)

T1 = b"\x01" * 16
T2 = b"\x02" * 16


def cluster() -> MetadataImage:
    image = apply(MetadataImage.empty(), register(1), register(2), register(3))
    return apply(image, unfence(1, 0), unfence(2, 1), unfence(3, 2))


def test_every_record_advances_the_offset_and_the_broker_epoch_is_the_registration_offset() -> None:
    image = apply(MetadataImage.empty(), register(5))
    assert image.end_offset == 1
    assert image.brokers[5].broker_epoch == 0 and image.brokers[5].fenced
    image = apply(image, register(6), register(5, incarnation="again"))
    assert image.end_offset == 3
    assert image.brokers[6].broker_epoch == 1
    assert image.brokers[5].broker_epoch == 2, "a re-registration gets a new epoch"
    assert image.brokers[5].incarnation_id == "again"


def test_fence_and_unfence_apply_only_to_the_current_epoch() -> None:
    image = apply(MetadataImage.empty(), register(1))
    image = apply(image, unfence(1, 0))
    assert not image.brokers[1].fenced
    image = apply(image, register(1, incarnation="restart"))  # epoch 2, fenced again
    assert image.brokers[1].fenced
    image = apply(image, unfence(1, 0))  # stale: the old incarnation's epoch
    assert image.brokers[1].fenced and image.end_offset == 4, "stale record is a no-op"
    image = apply(image, unfence(1, 2))
    assert not image.brokers[1].fenced
    image = apply(image, fence(1, 2))
    assert image.brokers[1].fenced


def test_a_controlled_shutdown_fence_holds_until_the_broker_registers_again() -> None:
    # KIP-841. A FenceBrokerRecord without the mark (every one written before it existed) is
    # the plain fence it always was: a later unfence applies.
    image = apply(MetadataImage.empty(), register(1), unfence(1, 0), fence(1, 0))
    assert not image.brokers[1].in_controlled_shutdown
    assert not apply(image, unfence(1, 0)).brokers[1].fenced
    image = apply(image, fence(1, 0, shutdown=True))  # on a fenced broker too
    assert image.brokers[1].fenced and image.brokers[1].in_controlled_shutdown
    image = apply(image, unfence(1, 0), fence(1, 0))  # overtaken; a plain fence keeps the mark
    assert image.brokers[1].fenced and image.brokers[1].in_controlled_shutdown
    image = apply(image, register(1, incarnation="restart"), unfence(1, 6))  # epoch 6
    assert not image.brokers[1].fenced and not image.brokers[1].in_controlled_shutdown


def test_topic_partitions_and_changes_bump_the_right_epochs() -> None:
    image = apply(
        cluster(), topic("orders", T1), partition(T1, 0, [1, 2]), partition(T1, 1, [2, 3])
    )
    state = image.topics["orders"].partitions[0]
    assert (state.leader, state.leader_epoch, state.partition_epoch) == (1, 0, 0)
    assert image.topic_by_id(T1) is image.topics["orders"]

    image = apply(image, change(T1, 0, isr=[1]))
    state = image.topics["orders"].partitions[0]
    assert (state.isr, state.leader_epoch, state.partition_epoch) == ((1,), 0, 1)

    image = apply(image, change(T1, 0, leader=2, isr=[2]))
    state = image.topics["orders"].partitions[0]
    assert (state.leader, state.leader_epoch, state.partition_epoch) == (2, 1, 2)

    image = apply(image, change(T1, 0, leader=NO_LEADER))
    assert image.topics["orders"].partitions[0].is_offline
    assert image.topics["orders"].partitions[1].partition_epoch == 0, "others untouched"


def test_replay_never_mutates_the_image_it_was_given() -> None:
    before = apply(cluster(), topic("orders", T1), partition(T1, 0, [1]))
    snapshot_of_before = (dict(before.brokers), dict(before.topics), before.end_offset)
    apply(before, change(T1, 0, leader=NO_LEADER), remove(T1), register(9))
    assert (dict(before.brokers), dict(before.topics), before.end_offset) == snapshot_of_before
    assert before.topics["orders"].partitions[0].leader == 1


def test_remove_topic_drops_its_partitions_ids_and_configs() -> None:
    image = apply(
        cluster(),
        topic("orders", T1),
        partition(T1, 0, [1]),
        config(TOPIC_RESOURCE, "orders", "retention.ms", "1000"),
    )
    assert image.topic_configs("orders") == {"retention.ms": "1000"}
    image = apply(image, remove(T1))
    assert "orders" not in image.topics and T1 not in image.topic_names
    assert image.topic_configs("orders") == {}
    image = apply(image, topic("orders", T2), partition(T2, 0, [2]))
    assert image.topics["orders"].topic_id == T2, "re-created under the same name, a new id"


def test_config_set_and_delete() -> None:
    image = apply(
        cluster(), topic("t", T1), config(TOPIC_RESOURCE, "t", "cleanup.policy", "compact")
    )
    image = apply(image, config(TOPIC_RESOURCE, "t", "retention.ms", "5"))
    assert image.topic_configs("t") == {"cleanup.policy": "compact", "retention.ms": "5"}
    image = apply(image, config(TOPIC_RESOURCE, "t", "cleanup.policy", None))
    assert image.topic_configs("t") == {"retention.ms": "5"}


@pytest.mark.parametrize(
    "bad",
    [
        [partition(T2, 0, [1])],  # unknown topic
        [topic("orders", T2)],  # name exists
        [topic("other", T1)],  # id exists
        [partition(T1, 0, [1])],  # partition exists
        [partition(T1, 5, [1, 1])],  # duplicate replicas
        [partition(T1, 5, [1], leader=7)],  # leader not a replica
        [change(T1, 9, leader=1)],  # unknown partition
        [change(T1, 0)],  # changes nothing
        [change(T1, 0, isr=[4])],  # ISR outside the replicas
        [config(TOPIC_RESOURCE, "nope", "retention.ms", "1")],
        [register(1), partition(T2, 0, [1])],  # valid then invalid: all or nothing
    ],
)
def test_an_invalid_batch_is_refused_whole_and_changes_nothing(bad: list) -> None:
    image = apply(cluster(), topic("orders", T1), partition(T1, 0, [1]))
    with pytest.raises(InvalidBatchError):
        replay(image, make_batch(image, bad, 5))
    assert image.end_offset == 8 and image.brokers[1].broker_epoch == 0


def test_stale_and_diverged_batches_are_told_apart() -> None:
    image = cluster()
    old = make_batch(MetadataImage.empty(), [register(1)], 1)
    with pytest.raises(StaleBatchError):
        replay(image, old)
    ahead = make_batch(image, [register(9)], 1)
    ahead.base_offset += 1  # a gap: this replica lacks records the leader had (replay.py)
    with pytest.raises(MetadataDivergenceError):
        replay(image, ahead)
    forged = make_batch(image, [register(9)], 1)
    forged.previous_hash = b"\xff" * 16
    with pytest.raises(MetadataDivergenceError):
        replay(image, forged)


def test_the_running_hash_chains_every_record() -> None:
    first = apply(MetadataImage.empty(), register(1))
    assert first.hash == chain_hash(INITIAL_HASH, [register(1)])
    same = apply(MetadataImage.empty(), register(1))
    other = apply(MetadataImage.empty(), register(1, rack="r"))
    assert first.hash == same.hash != other.hash
    assert len(first.hash) == 16


def test_time_comes_from_the_batch_not_the_replica() -> None:
    image = apply(MetadataImage.empty(), register(1), now_ms=123456)
    assert image.timestamp_ms == 123456
