"""Goal: a member process acts only on a metadata image that has caught up with the log, never
on an old prefix of it (services/runtime/metadata_log.py). A controller answers FetchMetadata
from offset 0 with the log's first batches only (up to limits.metadata_fetch_bytes_max), so a
broker that starts, or that re-reads the log after a divergence, gets the log in pieces. Handed
to the broker piece by piece, an old prefix makes it lead at old leader epochs, and, for a
topic deleted and re-created under the same name, open the old topic's partition on the
directory of the new one, which wipes the new topic's log (PartitionHost._open) — acknowledged
records lost. Kafka's metadata loader likewise publishes nothing until it has caught up.

Method: MetadataLogFollower over a fake controller channel that answers one batch per fetch
(as the byte bound does for a large log), with `on_change` recording what it was handed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from metadata_helpers import partition, register, remove, topic

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.metadata.metadata_diff import (
    BecomeLeader,
    StopReplica,
    partition_changes,
)
from samsa.services.runtime.metadata_log import MetadataLogFollower
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

OLD_ID, NEW_ID, OTHER_ID = b"o" * 16, b"n" * 16, b"x" * 16


def build_log(
    *batches: list[m.MetadataRecord],
) -> tuple[list[m.MetadataRecordBatch], MetadataImage]:
    image, log = MetadataImage.empty(), []
    for records in batches:
        batch = make_batch(image, records, 1000)
        log.append(batch)
        image = replay(image, batch)
    return log, image


# Broker 1 led "t" of an old topic id, which was deleted and re-created (a new id).
LOG, END = build_log(
    [register(1)],
    [topic("t", OLD_ID), partition(OLD_ID, 0, [1])],
    [remove(OLD_ID)],
    [topic("t", NEW_ID), partition(NEW_ID, 0, [1])],
)


class OneBatchPerAnswer:
    """A controller whose log is `log`: each FetchMetadata gets the next batch only; once the
    caller has it all, `stop` is set."""

    committed_offset_seen = 0  # no writes here

    def __init__(self, log: list[m.MetadataRecordBatch], stop: asyncio.Event) -> None:
        self.log = log
        self.stop = stop
        self.end_offset = log[-1].base_offset + len(log[-1].records)

    async def read(self, method: str, request: Any, timeout_s: float) -> Any:
        response = c.FetchMetadataResponse(committed_end_offset=self.end_offset)
        for batch in self.log:
            if batch.base_offset == request.end_offset:
                response.batches.append(batch)
                return response
        self.stop.set()
        return response


def follow(image: MetadataImage, log: list[m.MetadataRecordBatch]) -> list[MetadataImage]:
    """The images `on_change` is handed while a follower at `image` follows `log`."""
    handed: list[MetadataImage] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        follower = MetadataLogFollower(OneBatchPerAnswer(log, stop), on_change)  # type: ignore[arg-type]
        follower.image = image
        await asyncio.wait_for(follower.run(stop), 5)

    async def on_change(old: MetadataImage, new: MetadataImage) -> None:
        handed.append(new)

    asyncio.run(scenario())
    return handed


def test_a_starting_member_is_handed_only_the_caught_up_image() -> None:
    handed = follow(MetadataImage.empty(), LOG)
    assert [image.end_offset for image in handed] == [END.end_offset]
    actions = partition_changes(MetadataImage.empty(), handed[0], 1)
    assert actions == [BecomeLeader("t", 0, NEW_ID, 0, {})]  # never the old topic's directory
    assert not any(isinstance(action, StopReplica) for action in actions)


def test_a_member_that_diverged_is_not_handed_an_older_prefix_while_it_re_reads() -> None:
    # This member applied a last batch the quorum never committed (other records at offset 4):
    # the next committed batch does not chain on it, and it re-reads the log from offset 0.
    _, diverged = build_log(
        [register(1)],
        [topic("t", OLD_ID), partition(OLD_ID, 0, [1])],
        [remove(OLD_ID)],
        [topic("t", OTHER_ID), partition(OTHER_ID, 0, [1])],
    )
    assert diverged.end_offset == END.end_offset and diverged.hash != END.hash
    next_batch = make_batch(END, [register(3)], 1000)
    handed = follow(diverged, [*LOG, next_batch])
    assert [image.end_offset for image in handed] == [END.end_offset + 1]
    assert handed[0].hash == replay(END, next_batch).hash
