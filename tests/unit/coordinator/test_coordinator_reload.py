"""Goal: a partition that failed on its own is loaded again while this coordinator still owns
it, but not while it is out of touch with the controllers. A coordinator cut off from them keeps
its last image, so every partition it "owns" there failed at its first write once the new owner
had fenced it, was reloaded 0.5 s later (reading the whole partition from its leader), failed at
the fence, and so on for as long as the partition lasted: a zombie reading every partition it
once owned from the brokers, over and over, while it may answer nothing. The reload now waits
until the coordinator is in touch again (its image then says whether the partition is still its).

Method: a real Coordinator (not run), its registration epoch set by hand and `_reconcile`
called on a hand-made image in which it owns one partition of __transaction_state (no leader: it
stays loading); the partition is ended as a failed write would end it, with `in_touch` replaced.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from standalone_coordinator import standalone_coordinator

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import TRANSACTION_STATE_TOPIC
from samsa.metadata.image import CoordinatorAssignment, CoordinatorRegistration, MetadataImage
from samsa.services.coordinator import coordinator as coordinator_module

OWNED = CoordinatorAssignment(TRANSACTION_STATE_TOPIC, 0, 1, 10, 0, 100)


def test_a_failed_partition_is_reloaded_only_once_in_touch_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(coordinator_module, "RELOAD_DELAY_S", 0.01)

    async def run() -> None:
        coordinator = standalone_coordinator()
        in_touch = [False]
        coordinator.in_touch = lambda: in_touch[0]  # type: ignore[method-assign]
        try:
            image = replace(
                MetadataImage.empty(),
                coordinators={1: CoordinatorRegistration(1, "a", "h:1", 10)},
                coordinator_assignments={(OWNED.topic, OWNED.partition): OWNED},
            )
            coordinator.membership.coordinator_epoch = 10
            coordinator._reconcile(image)
            [failed] = coordinator.owned_transaction_partitions()
            failed._end(ErrorCode.NOT_COORDINATOR, "fenced by a newer owner")
            await failed.stop()
            await asyncio.sleep(0.1)
            assert coordinator.owned_transaction_partitions() == [], "out of touch: not reloaded"
            in_touch[0] = True
            for _ in range(500):  # until it reloads (at most 5 s)
                if coordinator.owned_transaction_partitions():
                    break
                await asyncio.sleep(0.01)
            [reloaded] = coordinator.owned_transaction_partitions()
            assert reloaded is not failed and reloaded.assignment == OWNED
            await reloaded.stop()
        finally:
            await coordinator.offsets_log.close()
            await coordinator.channel.close()

    asyncio.run(run())
