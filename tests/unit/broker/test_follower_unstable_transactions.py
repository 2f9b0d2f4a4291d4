"""Goal: a follower forgets the transactions it replicated once the high watermark passes their
markers, as Kafka's does (UnifiedLog.updateHighWatermark -> ProducerStateManager
.onHighWatermarkUpdated): the list of ended-but-unreplicated transactions
(transaction_index.UnstableTransactions) stays bounded by what is above the high watermark.

Method: a follower's real log (a PartitionHost in tmp_path) fed leader answers with
`apply_leader_answer`, each holding one committed transaction and a high watermark past it, and
no read_committed consumer (before the fix, only `Log.last_stable_offset` pruned the list, and a
pure follower never calls it). Then the leader says the logs diverge: the truncation replays the
transactions left, which the high watermark (kept within the log) has passed, and the follower
tells its log so at once. The list's size is read with `Log.unstable_transaction_count`.
"""

from __future__ import annotations

import random
from pathlib import Path

from samsa.common.record.codec import CONTROL_TYPE_COMMIT, build_batch, build_control_batch
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.follower_apply import apply_leader_answer
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_cluster import KEY, TOPIC, cluster_with_topic

TRANSACTIONS = 200
PID = 7


def transaction(base_offset: int, epoch: int) -> bytes:
    """One committed transaction as the leader stored it: a data batch, then its marker."""
    data = build_batch(
        [b"v"],
        base_offset=base_offset,
        partition_leader_epoch=0,
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )
    marker = build_control_batch(
        CONTROL_TYPE_COMMIT,
        producer_id=PID,
        producer_epoch=epoch + 1,
        coordinator_epoch=0,
        timestamp=0,
        base_offset=base_offset + 1,
        partition_leader_epoch=0,
    )
    return data + marker


def test_a_follower_forgets_transactions_the_high_watermark_passed(tmp_path: Path) -> None:
    image = cluster_with_topic({}, random.Random(1))
    follower = image.topics[TOPIC].partitions[0].replicas[1]
    host = PartitionHost(tmp_path, follower)
    host.apply(image, partition_changes(host.image, image, follower), now_ms=0)
    hosted = host.get(*KEY)
    assert hosted is not None and not hosted.is_leader
    for n in range(TRANSACTIONS):
        answer = broker_pb2.FetchResponse.PartitionResponse(
            partition=0, high_watermark=2 * n + 2, records=transaction(2 * n, n)
        )
        assert apply_leader_answer(hosted, answer, now_ms=0)
    assert hosted.high_watermark == hosted.log.log_end_offset == 2 * TRANSACTIONS
    unstable = hosted.log.unstable_transaction_count()
    # Every marker is below the high watermark: none of these transactions is unstable (before
    # the fix the follower kept one entry per transaction it ever replicated: unbounded memory,
    # and an O(n) walk at its first LSO as leader and at every truncation).
    assert unstable == 0, f"{unstable} decided transactions still held as unstable"

    kept = 2 * (TRANSACTIONS - 50)
    answer = broker_pb2.FetchResponse.PartitionResponse(partition=0, high_watermark=kept)
    answer.diverging_epoch.leader_epoch = 0
    answer.diverging_epoch.end_offset = kept
    assert apply_leader_answer(hosted, answer, now_ms=0)
    assert hosted.high_watermark == hosted.log.log_end_offset == kept
    # No producer snapshot below the cut (one segment): the replay went over every transaction
    # left, all of them below the high watermark.
    assert hosted.log.unstable_transaction_count() == 0
    assert hosted.log.last_stable_offset(hosted.high_watermark) == kept
    host.close_all()
