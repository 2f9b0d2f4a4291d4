"""The broker's background work on its logs: retention, the flush policy, and the high-watermark
checkpoint (a restarted broker starts from it, never above its log end). Compaction is the log
cleaner's task (log_cleaner.py), which does its slow part off the event loop.

Runs on the event loop between requests, one partition at a time; each step is short (deleting
whole segments, an fsync through Log.maybe_flush).

An idle partition costs nothing. The frequent work (the flush policy every 0.5 s, the
high-watermark checkpoint every 5 s) looks only at the partitions the host reports changed
(`PartitionHost.changed`: every append, high-watermark move, leadership change and truncation
lands there): each pass takes that set and moves its partitions into `Pending` — the logs with
unflushed records (kept until flushed, since flush.ms must re-check them later) and the partitions
whose high watermark differs from the checkpoint file. The checkpoint file, one per data
directory, is rewritten only when that second set is not empty. Retention (every 30 s) still
walks every partition, amortised over its long interval; a log of one segment costs it a length
check, and retention deletes only below each partition's
high watermark (`retention_pass`). The retention pass also forgets idempotent producers
idle for `producer.id.expiration.ms` (their newest batch's timestamp, Kafka's rule). Every 2 s
the loop recomputes the broker's metric gauges (broker_metrics.py; nothing while metrics are off).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.services.broker.partition_host import PartitionHost

log = logging.getLogger(__name__)

RETENTION_CHECK_INTERVAL_S = 30.0  # Kafka's log.retention.check.interval.ms is 5 minutes
FLUSH_CHECK_INTERVAL_S = 0.5
HIGH_WATERMARK_CHECKPOINT_INTERVAL_S = 5.0  # Kafka's replica.high.watermark.checkpoint.interval.ms
# How often the metrics' gauges are recomputed (a no-op while metrics are off): a pass reads a
# few attributes per hosted partition, and scrapes come every 15 s or more.
METRICS_REFRESH_INTERVAL_S = 2.0
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms (1 day)


@dataclass
class Pending:
    """Partitions the frequent work must look at, gathered from the host's changes."""

    # Logs holding records the flush policy has not flushed yet.
    unflushed: set[tuple[str, int]] = field(default_factory=set)
    # Partitions whose high watermark differs from the checkpoint file's.
    high_watermarks: set[tuple[str, int]] = field(default_factory=set)


def take_changes(host: PartitionHost, pending: Pending) -> None:
    """Take the host's changed partitions (leaving it an empty set) and sort them into
    `pending`; a partition no longer hosted is dropped."""
    changed, host.changed = host.changed, set()
    for key in changed:
        hosted = host.partitions.get(key)
        if hosted is None:
            continue
        if hosted.log.has_unflushed_records:
            pending.unflushed.add(key)
        if hosted.high_watermark_unsaved:
            pending.high_watermarks.add(key)


def flush_pending(host: PartitionHost, pending: Pending, *, now_ms: int) -> None:
    """Apply the flush policy to the logs with unflushed records; forget the flushed ones."""
    for key in list(pending.unflushed):
        hosted = host.partitions.get(key)
        if hosted is not None:
            hosted.log.maybe_flush(now_ms=now_ms)
        if hosted is None or not hosted.log.has_unflushed_records:
            pending.unflushed.discard(key)


def retention_pass(host: PartitionHost, *, now_ms: int, producer_id_expiration_ms: int) -> None:
    """Forget expired idempotent producers, and delete the segments retention.ms /
    retention.bytes let go (below each partition's high watermark only), in every partition.
    On the coordinator topics a producer at the largest epoch never expires: it is the fence of
    a retired writer id (ProducerStateTable.expire)."""
    for (topic, _), hosted in list(host.partitions.items()):
        hosted.log.expire_producers(
            now_ms=now_ms,
            expiration_ms=producer_id_expiration_ms,
            keep_exhausted=topic in INTERNAL_TOPICS,
        )
        if hosted.config.delete:
            deleted = hosted.log.apply_retention(
                now_ms=now_ms, high_watermark=hosted.high_watermark
            )
            if deleted:
                # Fetch sessions answer only partitions that changed: this carries the new log
                # start to the followers (and consumers) of an idle partition, as DeleteRecords'.
                hosted.notify_appended()
                log.info(
                    "retention deleted segments",
                    extra={"partition": f"{hosted.topic}-{hosted.partition}", "n": deleted},
                )


def checkpoint_pending(host: PartitionHost, pending: Pending) -> bool:
    """Rewrite the high-watermark checkpoint once if a pending partition's high watermark still
    differs from it; True when written."""
    keys, pending.high_watermarks = pending.high_watermarks, set()
    unsaved = (host.partitions.get(key) for key in keys)
    if not any(hosted is not None and hosted.high_watermark_unsaved for hosted in unsaved):
        return False
    host.checkpoint_high_watermarks()
    return True


async def run_maintenance(
    host: PartitionHost,
    stop: asyncio.Event,
    *,
    retention_interval_s: float = RETENTION_CHECK_INTERVAL_S,
    flush_interval_s: float = FLUSH_CHECK_INTERVAL_S,
    checkpoint_interval_s: float = HIGH_WATERMARK_CHECKPOINT_INTERVAL_S,
    producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
) -> None:
    """Loop until `stop` is set."""
    pending = Pending()
    last_retention = last_checkpoint = last_metrics = time.monotonic()
    host.metrics.refresh(host.partitions.values())
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), flush_interval_s)
            return
        except TimeoutError:
            pass
        now_ms = int(time.time() * 1000)
        take_changes(host, pending)
        flush_pending(host, pending, now_ms=now_ms)
        if time.monotonic() - last_checkpoint >= checkpoint_interval_s:
            last_checkpoint = time.monotonic()
            checkpoint_pending(host, pending)
        if time.monotonic() - last_metrics >= METRICS_REFRESH_INTERVAL_S:
            last_metrics = time.monotonic()
            host.metrics.refresh(host.partitions.values())
        if time.monotonic() - last_retention >= retention_interval_s:
            last_retention = time.monotonic()
            retention_pass(host, now_ms=now_ms, producer_id_expiration_ms=producer_id_expiration_ms)
