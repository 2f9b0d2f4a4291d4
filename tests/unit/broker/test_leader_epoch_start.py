"""Goal: a broker that becomes a partition's leader records its leader epoch as starting at its
log end before any append, so it can tell a follower holding batches of an epoch it never had
where their logs part (KIP-101), instead of answering "undefined" and sending the follower back
to its high watermark (log-level behaviour: test_log_truncation_epochs.py).

Method: a PartitionHost over a real log in tmp_path, following images from the controller's
own decisions (replication_sim's builders): it follows at epoch 0, holds two records of that
epoch, and takes over at epoch 1 when the leader is fenced.
"""

from __future__ import annotations

import random
from pathlib import Path

from samsa.common.record.codec import build_batch
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.controller import control_plane as cp
from tests.unit.broker.replication_cluster import KEY, TOPIC, cluster_with_topic, commit


def test_a_new_leader_records_where_its_epoch_starts(tmp_path: Path) -> None:
    image = cluster_with_topic({}, random.Random(1))
    state = image.topics[TOPIC].partitions[0]
    successor = next(r for r in state.replicas if r != state.leader)  # first in replica order
    host = PartitionHost(tmp_path, successor)
    host.apply(image, partition_changes(host.image, image, successor), now_ms=0)
    hosted = host.get(*KEY)
    assert hosted is not None and not hosted.is_leader
    hosted.log.append_as_follower(
        build_batch([b"a", b"b"], partition_leader_epoch=state.leader_epoch), now_ms=0
    )

    image = commit(image, cp.fence_brokers(image, [state.leader]))
    host.apply(image, partition_changes(host.image, image, successor), now_ms=0)
    taken_over = image.topics[TOPIC].partitions[0]
    assert hosted.is_leader and taken_over.leader_epoch == state.leader_epoch + 1
    assert hosted.log.leader_epoch_entries() == [(0, 0), (taken_over.leader_epoch, 2)]
    host.close_all()
