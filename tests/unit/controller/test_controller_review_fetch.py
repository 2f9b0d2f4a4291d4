"""Goal: a follower of the metadata log that is ahead of the controller it asks (a lagging Raft
follower, or one asked right after a failover) is never sent that controller's older snapshot,
which would move its image back; one ahead of what the active controller can have committed
(its log diverged) still gets the snapshot.

Method: the servicer's FetchMetadata over a real `ControllerDriver` (no quorum: its image,
history and activity are set by hand) and a servicer holding only what FetchMetadata reads.
"""

from __future__ import annotations

import asyncio

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import servicer
from samsa.services.controller.driver import ControllerDriver
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


def _registration(broker_id: int) -> m.MetadataRecord:
    return m.MetadataRecord(
        register_broker=m.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id="i", endpoint=f"h:{broker_id}"
        )
    )


def fetch(*, active: bool, controller_records: int, caller_offset: int) -> c.FetchMetadataResponse:
    """FetchMetadata(end_offset=caller_offset) on a controller that applied `controller_records`
    one-record batches."""

    async def run() -> c.FetchMetadataResponse:
        driver = ControllerDriver(node_id=1, raft_address_to_node={})
        image = MetadataImage.empty()
        for broker_id in range(controller_records):
            batch = make_batch(image, [_registration(broker_id)], 1)
            image = replay(image, batch)
            driver.on_batch_applied(batch, image)
        driver.active = active
        service = object.__new__(servicer.ControllerServicer)
        service.driver = driver
        service.controller_endpoints = {1: "h:1"}
        service.cluster_id = "cluster"
        request = c.FetchMetadataRequest(end_offset=caller_offset, max_wait_ms=10)
        return await service.FetchMetadata(request, None)

    return asyncio.run(run())


def test_a_caller_ahead_of_a_lagging_controller_gets_no_older_snapshot() -> None:
    response = fetch(active=False, controller_records=3, caller_offset=5)
    assert not response.HasField("snapshot_id")
    assert list(response.batches) == []
    assert response.committed_end_offset == 3


def test_a_caller_ahead_of_everything_the_active_controller_committed_gets_the_snapshot() -> None:
    response = fetch(active=True, controller_records=3, caller_offset=5)
    assert response.HasField("snapshot_id") and response.snapshot_id.end_offset == 3
