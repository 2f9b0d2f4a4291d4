"""The broker's background work on its logs: retention, compaction, the flush policy, and the
high-watermark checkpoints (a restarted broker starts from them, never above its log end).

Runs on the event loop between requests, one partition at a time; each step is short (deleting
whole segments, an fsync through Log.maybe_flush). Compaction rewrites closed segments and is the
longest step; it runs on the loop too, because a Log is not thread-safe (moving it to a thread
needs the log to hand the cleaner a snapshot of closed segments first: a later issue).
"""

from __future__ import annotations

import asyncio
import logging
import time

from samsa.services.broker.partition_host import PartitionHost

log = logging.getLogger(__name__)

RETENTION_CHECK_INTERVAL_S = 30.0  # Kafka's log.retention.check.interval.ms is 5 minutes
FLUSH_CHECK_INTERVAL_S = 0.5
COMPACTION_INTERVAL_S = 15.0  # Kafka's log.cleaner.backoff.ms
HIGH_WATERMARK_CHECKPOINT_INTERVAL_S = 5.0  # Kafka's replica.high.watermark.checkpoint.interval.ms


async def run_maintenance(
    host: PartitionHost,
    stop: asyncio.Event,
    *,
    retention_interval_s: float = RETENTION_CHECK_INTERVAL_S,
    compaction_interval_s: float = COMPACTION_INTERVAL_S,
    flush_interval_s: float = FLUSH_CHECK_INTERVAL_S,
) -> None:
    """Loop until `stop` is set."""
    last_retention = last_compaction = last_checkpoint = time.monotonic()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), flush_interval_s)
            return
        except TimeoutError:
            pass
        now_ms = int(time.time() * 1000)
        for hosted in list(host.partitions.values()):
            hosted.log.maybe_flush(now_ms=now_ms)
        if time.monotonic() - last_checkpoint >= HIGH_WATERMARK_CHECKPOINT_INTERVAL_S:
            last_checkpoint = time.monotonic()
            for hosted in list(host.partitions.values()):
                hosted.checkpoint_high_watermark()
        if time.monotonic() - last_retention >= retention_interval_s:
            last_retention = time.monotonic()
            for hosted in list(host.partitions.values()):
                if hosted.config.delete:
                    deleted = hosted.log.apply_retention(now_ms=now_ms)
                    if deleted:
                        log.info(
                            "retention deleted segments",
                            extra={"partition": f"{hosted.topic}-{hosted.partition}", "n": deleted},
                        )
        if time.monotonic() - last_compaction >= compaction_interval_s:
            last_compaction = time.monotonic()
            for hosted in list(host.partitions.values()):
                if hosted.config.compact:
                    hosted.log.compact(now_ms=now_ms)
                    await asyncio.sleep(0)  # let requests in between partitions
