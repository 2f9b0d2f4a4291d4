"""Goal: applying a metadata batch costs the partitions it changed, not every partition of the
topics it touched: a controlled shutdown moving 5,000 leaderships in many batches refreshed all
5,000 on each, and a broker took 7 s to stop (test_controller_quorum's teardown).

Method: a PartitionHost over real logs follows the controller's own images of a 40-partition
topic (two replicas each); a batch fencing broker 2 changes only the partitions it holds, and
broker 1 refreshes exactly the ones of those it holds too (counted on
HostedPartition.advance_high_watermark, which each refresh calls once).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from samsa.metadata.image import MetadataImage
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from tests.unit.broker.replication_cluster import (
    BROKERS,
    DEFAULTS,
    commit,
    heartbeat,
    registered,
)


def test_a_batch_refreshes_only_the_partitions_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = MetadataImage.empty()
    for broker_id in BROKERS:
        image = registered(image, broker_id, "i1", now_ms=0)
        image = heartbeat(image, broker_id, image.end_offset)
    topic = c.CreateTopicsRequest.Topic(name="wide", num_partitions=40, replication_factor=2)
    created = cp.create_topics(
        image,
        c.CreateTopicsRequest(topics=[topic]),
        rng=random.Random(3),
        defaults=DEFAULTS,
        new_topic_id=lambda: b"w" * 16,
    )
    image = commit(image, created)
    host = PartitionHost(tmp_path, 1)
    host.apply(image, partition_changes(host.image, image, 1), now_ms=0)

    image = commit(image, cp.fence_brokers(image, [2]))
    before, after = host.image.topics["wide"].partitions, image.topics["wide"].partitions
    hosted = {partition for _, partition in host.partitions}
    changed = {p for p, state in after.items() if state is not before[p]} & hosted
    assert 0 < len(changed) < len(hosted)  # those broker 1 shares with broker 2
    refreshed: list[int] = []
    original = HostedPartition.advance_high_watermark

    def counting(self: HostedPartition) -> bool:
        refreshed.append(self.partition)
        return original(self)

    monkeypatch.setattr(HostedPartition, "advance_high_watermark", counting)
    host.apply(image, partition_changes(host.image, image, 1), now_ms=0)
    assert sorted(refreshed) == sorted(changed)
    host.close_all()
