"""Goal: a coordinator owns a partition of a coordinator topic (__consumer_offsets,
__transaction_state) only under the registration it holds now (id, epoch, unfenced), each topic
answered on its own, and a changed writer identity means drop-and-reload; the servicer's image
helpers find live leaders only and hide internal topics from subscriptions.

Method: images built directly from the metadata dataclasses; the pure functions are called on
them and their answers compared with what the rules say.
"""

from __future__ import annotations

from dataclasses import replace

from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.metadata.image import (
    BrokerRegistration,
    CoordinatorAssignment,
    CoordinatorRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.services.coordinator.ownership import (
    leader_endpoint,
    owned_partitions,
    ownership_changes,
    subscribable_topics,
)


def assignment(
    partition: int,
    owner: int,
    owner_epoch: int,
    epoch: int = 0,
    topic: str = CONSUMER_OFFSETS_TOPIC,
) -> CoordinatorAssignment:
    producer_id = 100 + partition + (50 if topic == TRANSACTION_STATE_TOPIC else 0)
    return CoordinatorAssignment(topic, partition, owner, owner_epoch, epoch, producer_id)


def image_with(
    assignments: list[CoordinatorAssignment], coordinators: dict[int, tuple[int, bool]]
) -> MetadataImage:
    return replace(
        MetadataImage.empty(),
        coordinators={
            cid: CoordinatorRegistration(cid, "inc", f"h:{cid}", epoch, fenced)
            for cid, (epoch, fenced) in coordinators.items()
        },
        coordinator_assignments={(a.topic, a.partition): a for a in assignments},
    )


def test_only_assignments_under_this_processes_live_epoch_are_owned() -> None:
    image = image_with(
        [assignment(0, 1, 10), assignment(1, 1, 7), assignment(2, 2, 20), assignment(3, -1, -1)],
        {1: (10, False), 2: (20, False)},
    )
    offsets = CONSUMER_OFFSETS_TOPIC
    assert sorted(owned_partitions(image, offsets, 1, 10)) == [0]  # 1 names an old epoch
    assert sorted(owned_partitions(image, offsets, 2, 20)) == [2]
    assert owned_partitions(image, offsets, 1, 7) == {}  # the old incarnation owns nothing
    assert owned_partitions(image, offsets, 1, -1) == {}  # not registered yet
    fenced = image_with([assignment(0, 1, 10)], {1: (10, True)})
    assert owned_partitions(fenced, offsets, 1, 10) == {}


def test_each_coordinator_topic_is_owned_on_its_own() -> None:
    txn = TRANSACTION_STATE_TOPIC
    image = image_with(
        [
            assignment(0, 1, 10),
            assignment(1, 2, 20),
            assignment(0, 2, 20, topic=txn),
            assignment(1, 1, 10, topic=txn),
            assignment(2, 1, 9, topic=txn),  # an old epoch of coordinator 1
        ],
        {1: (10, False), 2: (20, False)},
    )
    assert sorted(owned_partitions(image, CONSUMER_OFFSETS_TOPIC, 1, 10)) == [0]
    owned = owned_partitions(image, txn, 1, 10)
    assert sorted(owned) == [1]
    assert owned[1].topic == txn and owned[1].producer_id == 151
    assert sorted(owned_partitions(image, txn, 2, 20)) == [0]


def test_changes_load_new_partitions_drop_lost_ones_and_reload_a_new_writer_identity() -> None:
    before = {0: assignment(0, 1, 10), 1: assignment(1, 1, 10), 2: assignment(2, 1, 10)}
    after = {
        0: assignment(0, 1, 10),  # unchanged: kept
        2: assignment(2, 1, 10, epoch=1),  # new assignment epoch: reload
        5: assignment(5, 1, 10),  # new: load
    }
    changes = ownership_changes(before, after)
    assert changes.drop == [1, 2]
    assert [a.partition for a in changes.load] == [2, 5]
    assert ownership_changes(after, after).load == [] and ownership_changes(after, after).drop == []


def test_leader_endpoint_needs_a_live_leader_and_internal_topics_are_not_subscribable() -> None:
    partitions = {
        0: PartitionState(0, (1, 2), (1, 2), 1, 0, 0),
        1: PartitionState(1, (1, 2), (2,), 2, 0, 0),
        2: PartitionState(2, (1, 2), (), -1, 0, 0),
    }
    image = replace(
        MetadataImage.empty(),
        brokers={
            1: BrokerRegistration(1, "a", "h:1", "", 5, fenced=False),
            2: BrokerRegistration(2, "b", "h:2", "", 6, fenced=True),
        },
        topics={
            "orders": TopicImage("orders", b"o" * 16, partitions),
            CONSUMER_OFFSETS_TOPIC: TopicImage(CONSUMER_OFFSETS_TOPIC, b"c" * 16, partitions),
        },
    )
    assert leader_endpoint(image, "orders", 0) == "h:1"
    assert leader_endpoint(image, "orders", 1) is None  # its leader is fenced
    assert leader_endpoint(image, "orders", 2) is None  # no leader
    assert leader_endpoint(image, "orders", 9) is None
    assert leader_endpoint(image, "missing", 0) is None
    assert subscribable_topics(image) == {"orders": 3}
