"""Waiting for a partition the producer's metadata does not show yet (Kafka's waitOnMetadata).

A record sent to partition p of a topic whose cached partition count is p or less may name a
partition just added (create_partitions): the producer refreshes the topic's metadata, as
often as every 0.1 s, until it shows p or the call's max.block.ms has passed, instead of
refusing the record until the next periodic refresh (metadata.max.age.ms, 5 minutes). Blocking:
the sync facade calls it on the caller's thread, AsyncProducer in a worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.errors import KafkaError

log = logging.getLogger(__name__)

REFRESH_EVERY_S = 0.1


def partition_count_showing(
    metadata: ClusterMetadata, topic: str, partitions: Iterable[int], count: int, deadline: float
) -> int:
    """The topic's partition count once it is above every one of `partitions` (ints), or the
    count known at `deadline` (time.monotonic()); the caller refuses what is still beyond it."""
    wanted = max(partitions, default=-1)
    while wanted >= count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            metadata.refresh([topic], max(REFRESH_EVERY_S, remaining))
        except KafkaError as error:
            log.warning("metadata refresh for %r failed: %s", topic, error)
        count = metadata.partition_counts.get(topic, count)
        if wanted >= count:
            time.sleep(min(REFRESH_EVERY_S, max(0.0, deadline - time.monotonic())))
    return count
