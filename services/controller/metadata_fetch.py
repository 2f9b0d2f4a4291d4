"""What a controller answers the followers of its metadata log (brokers and coordinators).

- FetchMetadata(end_offset, hash): the committed batches from `end_offset` on, long-polled when
  there are none yet; when the caller is too far behind (its offset left the history) or its log
  differs from ours, the id of a snapshot to start over from (`SnapshotId`), never the snapshot
  itself, which grows with the image past any message bound;
- FetchSnapshot(snapshot_id, position): a bounded chunk of that snapshot's bytes, served from
  the driver's `SnapshotCache` (metadata/snapshot_transfer.py says how long one is held).

The servicer (servicer.py) decodes, calls these, and `fetch_response` encodes the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from samsa.common import limits
from samsa.metadata.image import INITIAL_HASH
from samsa.metadata.snapshot_transfer import ServedSnapshot
from samsa.services.controller.driver import ControllerDriver
from samsa.v1 import controller_pb2, metadata_pb2

Answer = list[metadata_pb2.MetadataRecordBatch] | controller_pb2.SnapshotId


def fetch_response(
    answer: Answer,
    status: controller_pb2.ControllerStatus,
    cluster_id: str,
    controllers: Mapping[int, str],
) -> controller_pb2.FetchMetadataResponse:
    """The FetchMetadata answer carrying `answer`; the committed end offset is the status's
    (the image's end offset when it was made)."""
    response = controller_pb2.FetchMetadataResponse(
        status=status, committed_end_offset=status.metadata_offset, cluster_id=cluster_id
    )
    # Brokers answer DescribeCluster with the quorum they learn here (metadata_servicer.py).
    for node_id, endpoint in sorted(controllers.items()):
        response.controllers.add(node_id=node_id, endpoint=endpoint)
    if isinstance(answer, controller_pb2.SnapshotId):
        response.snapshot_id.CopyFrom(answer)
    else:
        response.batches.extend(answer)
    return response


async def answer_fetch(
    driver: ControllerDriver, request: controller_pb2.FetchMetadataRequest
) -> Answer:
    """The batches a FetchMetadata caller lacks, or the id of the snapshot it must load."""
    wait_s = min(request.max_wait_ms, limits.metadata_long_poll_ms_max) / 1000
    # A follower with nothing sends no hash; the log's hash before offset 0 is all zeros.
    known_hash = request.hash or (INITIAL_HASH if request.end_offset == 0 else b"")
    if request.end_offset > driver.image.end_offset:
        batches = await _fetch_ahead(driver, request.end_offset, known_hash, wait_s)
    else:
        batches = driver.history.batches_since(
            request.end_offset, known_hash, limits.metadata_fetch_bytes_max
        )
        if batches == [] and wait_s > 0:
            await driver.wait_for_change(wait_s)
            batches = driver.history.batches_since(
                request.end_offset, known_hash, limits.metadata_fetch_bytes_max
            )
    if batches is None:
        return await _snapshot_for(driver, request.end_offset)
    return batches


async def _snapshot_for(driver: ControllerDriver, end_offset_min: int) -> controller_pb2.SnapshotId:
    """The id of the snapshot a follower at `end_offset_min` loads: the cached one, else one
    built now. Built on a worker thread, one at a time (followers asking together share it): at
    100,000 partitions building took ~0.4 s, which on the event loop stalled every heartbeat,
    long-poll and write of this controller; on a thread the loop gets the GIL at each switch
    interval (5 ms) meanwhile."""
    async with driver.snapshot_build_lock:
        cached = driver.snapshots.cached_for(driver.image, driver.history, end_offset_min)
        if cached is not None:
            return cached
        served = await asyncio.to_thread(ServedSnapshot.of, driver.image)
        return driver.snapshots.add(served)


async def _fetch_ahead(
    driver: ControllerDriver, end_offset: int, known_hash: bytes, wait_s: float
) -> list[metadata_pb2.MetadataRecordBatch] | None:
    """Batches for a caller whose log is ahead of this controller's: it fetched from a
    controller further on (this one lags, or was just deposed). This one's snapshot would
    move the caller's image back, so it waits to catch up and otherwise answers nothing
    (the caller asks again). Only a caller beyond what the active controller can have
    committed has a log that differs from the quorum's: it gets the snapshot (None)."""
    await driver.wait_for_offset(end_offset, wait_s)
    if end_offset <= driver.image.end_offset:
        return driver.history.batches_since(end_offset, known_hash, limits.metadata_fetch_bytes_max)
    bound = driver.metadata_offset_bound()
    return None if bound is not None and end_offset > bound else []


class SnapshotNotFoundError(LookupError):
    """This controller no longer holds the snapshot named: ask FetchMetadata again."""


def snapshot_chunk(driver: ControllerDriver, request: controller_pb2.FetchSnapshotRequest) -> bytes:
    """The chunk of the named snapshot a FetchSnapshot asks for. SnapshotNotFoundError when this
    controller no longer holds that snapshot; ValueError for a position outside it."""
    served = driver.snapshots.find(request.snapshot_id)
    if served is None:
        raise SnapshotNotFoundError(
            f"this controller holds no snapshot at offset {request.snapshot_id.end_offset} "
            "with that hash and size (its log moved past it): ask FetchMetadata again"
        )
    if not 0 <= request.position <= len(served.data) or request.max_bytes < 0:
        raise ValueError(
            f"position must lie within the snapshot's {len(served.data)} bytes and max_bytes "
            "must be >= 0"
        )
    return served.chunk(request.position, request.max_bytes)
