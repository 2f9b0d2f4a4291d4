"""The broker's log cleaner: compacting every cleanup.policy=compact partition, off the event loop.

Theory of operation (Kafka's LogCleaner thread). Every `log.cleaner.backoff.ms` the task walks the
hosted partitions and compacts, one at a time, the compacted ones that are due: those where
`min.cleanable.dirty.ratio` of the cleanable bytes was written since the last pass, or where
something that pass kept for `delete.retention.ms` may go now (`Log.compaction_due`), so a
compacted partition with nothing new costs a size sum. For each, the event loop plans
the pass (`Log.plan_compaction`: which closed segments, with duplicated file descriptors), a worker
thread runs it (reading those segments and writing their `.cleaned` files: the slow part, seconds
for a large partition, during which the loop keeps answering produce and fetch requests), and the
loop swaps the result in (`Log.finish_compaction`), unless retention, DeleteRecords, truncation or
a scrubber repair changed those segments meanwhile, or the partition went away: then the pass is
discarded and the next interval starts over (cleaner.py).

A partition the metadata stops hosting while another one's pass runs (its topic deleted, or
re-created under the same name) is passed over: its log is closed, and the walk's list was taken
before the pass.

The worker holds the GIL while it decodes, so the loop gets it back every switch interval (5 ms):
a pass slows the broker's answers a little instead of stopping them. On stop the running pass is
cancelled between two batches and discarded; the task returns once the worker has.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from samsa.common.errors import SamsaError
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.log.cleaner import CleaningCancelled, CompactionResult
from samsa.services.broker.partition_host import PartitionHost

log = logging.getLogger(__name__)

COMPACTION_INTERVAL_S = 15.0  # Kafka's log.cleaner.backoff.ms


async def run_log_cleaner(
    host: PartitionHost, stop: asyncio.Event, *, interval_s: float = COMPACTION_INTERVAL_S
) -> None:
    """Loop until `stop` is set."""
    cancel = threading.Event()
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            try:
                await asyncio.wait_for(asyncio.shield(stopped), interval_s)
                return
            except TimeoutError:
                pass
            for hosted in list(host.partitions.values()):
                if stop.is_set():
                    return
                if host.get(hosted.topic, hosted.partition) is not hosted:
                    continue  # stopped (deleted, or re-created) while a pass awaited its worker
                if hosted.config.compact and hosted.log.compaction_due(
                    now_ms=int(time.time() * 1000), high_watermark=hosted.high_watermark
                ):
                    await clean_partition(hosted, stopped, cancel)
    finally:
        stopped.cancel()


async def clean_partition(
    hosted: HostedPartition, stopped: asyncio.Future[object], cancel: threading.Event
) -> CompactionResult | None:
    """One compaction pass of one partition, its reading and writing on a worker thread; None
    when there was nothing to clean, the pass failed, or `stopped` cancelled it."""
    job = hosted.log.plan_compaction(
        now_ms=int(time.time() * 1000), high_watermark=hosted.high_watermark
    )
    if job is None:
        return None
    work = asyncio.ensure_future(asyncio.to_thread(job.run, cancel))
    await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if not work.done():
        cancel.set()  # stopping: the worker gives up at its next batch
    try:
        cleaned = await work
    except CleaningCancelled:
        job.discard()
        return None
    except (OSError, SamsaError) as error:  # a segment cut or deleted under the worker
        job.discard()
        log.info(
            "compaction pass abandoned; the next one starts over",
            extra={"partition": f"{hosted.topic}-{hosted.partition}", "reason": str(error)},
        )
        return None
    result = hosted.log.finish_compaction(job, cleaned)
    if result.records_removed or result.markers_removed:
        log.debug(
            "compacted",
            extra={"partition": f"{hosted.topic}-{hosted.partition}", **result._asdict()},
        )
    return result
