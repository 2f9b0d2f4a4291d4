"""Goal: a coordinator whose metadata stops flowing stops, instead of answering from a frozen
image. When applying a new image failed (a bug in working out ownership, say), the metadata task
ended with the exception unseen (gathered only at shutdown) while the membership task kept
heartbeating: the controller kept this coordinator's partitions assigned to it, it never saw them
move, and once its image was older than the session timeout it answered NOT_COORDINATOR for
every group it owned, for as long as it ran, clients being sent back to it each time. It must
log the failure, give its partitions up, ask the controller to fence it (so they move at once)
and exit 3, as a broker does (services/broker/broker.py).

Method: a real Coordinator serving on an ephemeral port, its controller channel replaced by a
fake (registration, heartbeats, one FetchMetadata answer with a batch), and its image listener
made to raise.
"""

from __future__ import annotations

import asyncio
from typing import Any

from standalone_coordinator import standalone_coordinator

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.services.coordinator import coordinator as coordinator_module
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


class FakeControllers:
    committed_offset_seen = 0

    def __init__(self) -> None:
        self.heartbeats: list[bool] = []  # want_shutdown of each heartbeat
        record = m.MetadataRecord(
            register_broker=m.RegisterBrokerRecord(
                broker_id=1, incarnation_id="i", endpoint="127.0.0.1:9"
            )
        )
        self.batch = make_batch(MetadataImage.empty(), [record], 1000)

    async def write(self, method: str, request: Any, timeout_s: float = 5.0) -> Any:
        if method == "RegisterCoordinator":
            return c.RegisterCoordinatorResponse(coordinator_epoch=7)
        self.heartbeats.append(request.want_shutdown)
        return c.CoordinatorHeartbeatResponse(should_shut_down=request.want_shutdown)

    async def read(self, method: str, request: Any, timeout_s: float) -> Any:
        response = c.FetchMetadataResponse(committed_end_offset=1)
        if request.end_offset == 0:
            response.batches.append(self.batch)
        else:
            await asyncio.sleep(request.max_wait_ms / 1000)
        return response

    def move_reads(self) -> None:
        pass

    async def close(self) -> None:
        pass


def test_a_failure_to_apply_the_metadata_stops_the_coordinator() -> None:
    async def scenario() -> None:
        coordinator = standalone_coordinator(listen="127.0.0.1:0", heartbeat_interval_ms=10)
        controllers = FakeControllers()
        coordinator.channel = controllers  # type: ignore[assignment]
        coordinator.metadata.controllers = controllers  # type: ignore[assignment]
        coordinator.membership.controllers = controllers  # type: ignore[assignment]

        async def on_image(old: MetadataImage, new: MetadataImage) -> None:
            raise RuntimeError("a bug applying the image")

        coordinator.metadata.on_change = on_image
        stop = asyncio.Event()
        code = await asyncio.wait_for(coordinator.run(stop), 10)
        assert code == coordinator_module.EXIT_METADATA_FAILED
        assert controllers.heartbeats[-1] is True, "it asked the controller to fence it"

    asyncio.run(scenario())
