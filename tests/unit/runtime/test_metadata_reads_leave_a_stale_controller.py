"""Goal: a member does not follow the metadata log from a controller cut off from the quorum.
Reads go to whichever controller answered last (controller_channel.py); a follower controller
that lost its peers but still answers the member answers every FetchMetadata "nothing new" from
its frozen log, while the member's heartbeats, answered by the active controller, keep its
session alive: the broker served and led from stale metadata for as long as the partition
lasted. The active controller's answers say how far the log is committed
(`status.metadata_offset`); a read that brought nothing from a controller behind that must move
the member's reads to another controller (KIP-595: observers fetch from the quorum's leader).

Method: MetadataLogFollower over a real ControllerChannel whose stubs are fakes: controller A is
cut off (its log ends at offset 1, it answers every fetch with nothing new), controller B is
active (its log ends at offset 2); the member heartbeats to B once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.metadata_log import MetadataLogFollower
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


def register(broker_id: int) -> m.MetadataRecord:
    return m.MetadataRecord(
        register_broker=m.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id="i", endpoint=f"127.0.0.1:{9000 + broker_id}"
        )
    )


FIRST = make_batch(MetadataImage.empty(), [register(1)], 1000)
SECOND = make_batch(replay(MetadataImage.empty(), FIRST), [register(2)], 1000)


class Controller:
    def __init__(self, log: list[m.MetadataRecordBatch]) -> None:
        self.log = log
        self.end_offset = log[-1].base_offset + len(log[-1].records)
        self.fetches = 0

    async def FetchMetadata(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self.fetches += 1
        response = c.FetchMetadataResponse(committed_end_offset=self.end_offset)
        response.status.metadata_offset = self.end_offset
        response.batches.extend(b for b in self.log if b.base_offset >= request.end_offset)
        if not response.batches:
            await asyncio.sleep(min(request.max_wait_ms / 1000, 0.01))
        return response

    async def BrokerHeartbeat(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        response = c.BrokerHeartbeatResponse()
        response.status.metadata_offset = self.end_offset
        return response


def test_reads_move_off_a_controller_behind_the_committed_log() -> None:
    async def scenario() -> None:
        channel = ControllerChannel(["127.0.0.1:1", "127.0.0.1:2"], MemberSigner(b"k" * 32, 1))
        cut_off, active = Controller([FIRST]), Controller([FIRST, SECOND])
        channel._stubs = {"127.0.0.1:1": cut_off, "127.0.0.1:2": active}  # type: ignore[dict-item]
        channel._active = "127.0.0.1:2"

        async def on_change(old: MetadataImage, new: MetadataImage) -> None:
            pass

        follower = MetadataLogFollower(channel, on_change)
        stop = asyncio.Event()
        following = asyncio.create_task(follower.run(stop))
        while follower.image.end_offset < 1:
            await asyncio.sleep(0.01)
        await channel.write("BrokerHeartbeat", c.BrokerHeartbeatRequest(broker_id=1))
        try:
            await asyncio.wait_for(_until(lambda: follower.image.end_offset == 2), 2)
        finally:
            stop.set()
            await following
            await channel.close()

    asyncio.run(scenario())


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.01)
