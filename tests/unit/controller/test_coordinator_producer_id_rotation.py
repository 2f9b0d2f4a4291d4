"""Goal: a coordinator partition survives any number of owner changes. Its assignment epoch is
the producer epoch its owner writes with (an int16 in Kafka), so when the next epoch would reach
PRODUCER_EPOCH_MAX the planner gives the partition a new producer id from next_producer_id at
epoch 0 and names the old one as `retired_producer_id` (for the new owner to fence, KIP-360's
answer to an exhausted epoch); later owner changes keep that retired id until the next rotation.

Method: a cluster planned by the real decisions and replay; one partition's assignment is moved
to epoch 32765 by a hand-made record (replay lets an epoch jump forward), then its owner restarts
(each restart moves its partitions: +1) and the records and images are checked, with the shared
invariants of coordinator_helpers.check_invariants after every step.
"""

from __future__ import annotations

from coordinator_helpers import (
    check_invariants,
    commit,
    create_coordinator_topics,
    register,
    with_brokers,
)

from samsa.common.limits import producer_epoch_max
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import control_plane as cp
from samsa.v1 import metadata_pb2 as m

OFFSETS_0 = (CONSUMER_OFFSETS_TOPIC, 0)


def one_owner_cluster() -> MetadataImage:
    """Both coordinator topics, every partition owned by coordinator 1 at epoch 0."""
    image, _ = register(with_brokers(2), 1)
    image, _ = create_coordinator_topics(image)
    return commit(image, cp.plan_coordinator_assignments(image))


def at_epoch(image: MetadataImage, key: tuple[str, int], epoch: int) -> MetadataImage:
    """`image` with partition `key` reassigned to its owner at assignment epoch `epoch`."""
    current = image.coordinator_assignments[key]
    record = m.CoordinatorAssignmentRecord(
        topic=key[0],
        partition=key[1],
        coordinator_id=current.coordinator_id,
        coordinator_epoch=current.coordinator_epoch,
        assignment_epoch=epoch,
        producer_id=current.producer_id,
    )
    if current.retired_producer_id >= 0:
        record.retired_producer_id = current.retired_producer_id
    batch = make_batch(image, [m.MetadataRecord(coordinator_assignment=record)], 1)
    return replay(image, batch)


def restarted(image: MetadataImage, incarnation: str) -> MetadataImage:
    after, _ = register(image, 1, incarnation, now_ms=10_000)
    check_invariants(image, after)
    return after


def test_the_last_epoch_below_the_limit_is_used_then_the_producer_id_rotates():
    image = at_epoch(one_owner_cluster(), OFFSETS_0, producer_epoch_max - 2)
    old = image.coordinator_assignments[OFFSETS_0]
    image = restarted(image, "b")
    last = image.coordinator_assignments[OFFSETS_0]
    assert (last.producer_id, last.assignment_epoch) == (old.producer_id, producer_epoch_max - 1)
    assert last.retired_producer_id == -1
    next_producer_id = image.next_producer_id

    image = restarted(image, "c")
    rotated = image.coordinator_assignments[OFFSETS_0]
    assert rotated.producer_id == next_producer_id, "a fresh id from next_producer_id"
    assert rotated.assignment_epoch == 0
    assert rotated.retired_producer_id == old.producer_id
    assert rotated.coordinator_id == 1
    assert image.next_producer_id == next_producer_id + 1, "no block may hand it out again"

    image = restarted(image, "d")
    kept = image.coordinator_assignments[OFFSETS_0]
    assert (kept.producer_id, kept.assignment_epoch) == (rotated.producer_id, 1)
    assert kept.retired_producer_id == old.producer_id, "kept until the next rotation"
    assert image.next_producer_id == next_producer_id + 1

    image = at_epoch(image, OFFSETS_0, producer_epoch_max - 1)
    image = restarted(image, "e")
    again = image.coordinator_assignments[OFFSETS_0]
    assert again.assignment_epoch == 0
    assert again.retired_producer_id == rotated.producer_id, "the next rotation replaces it"
    assert again.producer_id == next_producer_id + 1


def test_a_partition_beyond_the_limit_rotates_and_others_are_untouched():
    # A cluster whose partition ran past the limit before rotation existed gets a usable
    # identity at its next owner change; the other partitions keep theirs.
    image = one_owner_cluster()
    key = (TRANSACTION_STATE_TOPIC, 2)
    image = at_epoch(image, key, producer_epoch_max + 5)
    before = image.coordinator_assignments
    image = restarted(image, "b")
    for other, old in before.items():
        new = image.coordinator_assignments[other]
        if other == key:
            assert (new.assignment_epoch, new.retired_producer_id) == (0, old.producer_id)
        else:
            assert (new.producer_id, new.assignment_epoch) == (
                old.producer_id,
                old.assignment_epoch + 1,
            )
            assert new.retired_producer_id == -1


def test_a_rotation_with_no_live_coordinator_takes_the_id_with_the_orphaning_record():
    image = at_epoch(one_owner_cluster(), OFFSETS_0, producer_epoch_max - 1)
    old = image.coordinator_assignments[OFFSETS_0]
    orphaned = commit(image, cp.fence_coordinators(image, [1]))
    check_invariants(image, orphaned)
    nobody = orphaned.coordinator_assignments[OFFSETS_0]
    assert (nobody.coordinator_id, nobody.assignment_epoch) == (-1, 0)
    assert nobody.retired_producer_id == old.producer_id
    back, _ = register(orphaned, 2)
    check_invariants(orphaned, back)
    owned = back.coordinator_assignments[OFFSETS_0]
    assert (owned.coordinator_id, owned.producer_id) == (2, nobody.producer_id)
    assert (owned.assignment_epoch, owned.retired_producer_id) == (1, old.producer_id)
