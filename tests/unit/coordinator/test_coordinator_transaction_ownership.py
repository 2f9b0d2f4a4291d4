"""Goal: the coordinator process works out, on every image and epoch change, which partitions of
__transaction_state it owns and starts loading them (`owned_transaction_partitions`), drops the
ones it lost, leaves the groups' partitions alone, and owns none once it is stopping.

Method: a real Coordinator (not run: its partitions start loading but find no leader in the
hand-made images, so they stay loading), with its registration epoch set by hand and
`_reconcile` called on hand-made images in which this coordinator owns only partitions of
__transaction_state (so no group partition is loaded).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from standalone_coordinator import standalone_coordinator

from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.metadata.image import CoordinatorAssignment, CoordinatorRegistration, MetadataImage

TXN = TRANSACTION_STATE_TOPIC


def assignment(topic: str, partition: int, owner: int, owner_epoch: int) -> CoordinatorAssignment:
    return CoordinatorAssignment(topic, partition, owner, owner_epoch, 0, 100 + partition)


def image_with(*assignments: CoordinatorAssignment) -> MetadataImage:
    return replace(
        MetadataImage.empty(),
        coordinators={
            1: CoordinatorRegistration(1, "a", "h:1", 10),
            2: CoordinatorRegistration(2, "b", "h:2", 20),
        },
        coordinator_assignments={(a.topic, a.partition): a for a in assignments},
    )


def test_owned_transaction_partitions_follow_the_image_and_are_not_loaded() -> None:
    async def run() -> None:
        coordinator = standalone_coordinator()
        try:
            image = image_with(
                assignment(CONSUMER_OFFSETS_TOPIC, 0, 2, 20),
                assignment(TXN, 0, 1, 10),
                assignment(TXN, 1, 2, 20),
                assignment(TXN, 2, 1, 10),
            )
            coordinator._reconcile(image)
            assert coordinator.owned_transaction_partitions() == [], "not registered yet"
            coordinator.membership.coordinator_epoch = 10
            coordinator._reconcile(image)
            owned = coordinator.owned_transaction_partitions()
            assert [p.partition for p in owned] == [0, 2]
            assert all(p.assignment.topic == TXN for p in owned)
            assert all(p.assignment.coordinator_id == 1 for p in owned)
            assert not any(p.loaded for p in owned), "no leader to load from"
            assert coordinator.owned_partitions() == [], "no group partition is owned"
            dropped = owned[1]
            moved = replace(
                image,
                coordinator_assignments=dict(image.coordinator_assignments)
                | {(TXN, 2): replace(assignment(TXN, 2, 2, 20), assignment_epoch=1)},
            )
            coordinator._reconcile(moved)
            assert [p.partition for p in coordinator.owned_transaction_partitions()] == [0]
            await asyncio.sleep(0)
            assert dropped.ended, "the lost partition is given up"
            kept = coordinator.owned_transaction_partitions()[0]
            coordinator._stopping = True
            coordinator._reconcile(moved)
            assert coordinator.owned_transaction_partitions() == []
            await asyncio.sleep(0)
            assert kept.ended
        finally:
            await coordinator.offsets_log.close()
            await coordinator.channel.close()

    asyncio.run(run())
