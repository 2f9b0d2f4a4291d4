"""Goal: changing a topic's min.insync.replicas at runtime takes effect on its leaders at once.
The leader re-checked the rule only on appends, follower fetches and ISR changes, not on the
config change itself. Lowered, the high watermark, frozen while the ISR was below the old value,
stayed frozen on an idle partition though every ISR member held the records; raised above the
ISR, an acks=all produce already waiting was never woken to see it could no longer succeed, so
it sat out its request timeout (REQUEST_TIMED_OUT) instead of answering
NOT_ENOUGH_REPLICAS_AFTER_APPEND.

Method: broker 1's PartitionHost over a real log, following images the controller's own
decisions build (test_maximal_isr.py's Leader); the config is changed with the controller's
IncrementalAlterConfigs and applied as the broker applies any image.
"""

from __future__ import annotations

import random
from pathlib import Path

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.metadata.image import MetadataImage
from samsa.services.broker.requests.produce import produce
from samsa.services.broker.requests.produce_wait import settled
from samsa.services.controller import control_plane as cp
from samsa.v1 import broker_pb2
from samsa.v1 import controller_pb2 as c
from tests.unit.broker.replication_cluster import cluster_with_topic, commit
from tests.unit.broker.test_maximal_isr import ADDED, IN_SYNC, LEADER, TOPIC, Leader, state_of
from tests.unit.controller.test_control_plane import alter_config


def with_min_isr(image: MetadataImage, value: str) -> MetadataImage:
    image, result = alter_config(
        image, TOPIC, ("min.insync.replicas", c.ALTER_CONFIG_OP_SET, value)
    )
    assert result.error_code == 0, result
    return image


def test_lowering_min_insync_replicas_releases_the_frozen_high_watermark(tmp_path: Path) -> None:
    image = cluster_with_topic({"min.insync.replicas": "3"}, random.Random(1))
    assert state_of(image).replicas == (LEADER, IN_SYNC, ADDED)
    leader = Leader(tmp_path)
    leader.apply(image)
    leader.produce(4)
    leader.fetched_by(IN_SYNC, 4)
    leader.fetched_by(ADDED, 4)
    assert leader.hosted.high_watermark == 4
    image = commit(image, cp.fence_brokers(image, [ADDED]))  # ISR (1, 2) < 3: frozen
    leader.apply(image)
    leader.produce(2)  # acks=1
    leader.fetched_by(IN_SYNC, 6)
    assert leader.hosted.high_watermark == 4
    waiting = leader.hosted.data_arrived
    leader.apply(with_min_isr(image, "2"))
    # Both ISR members hold offset 6, and nothing else will happen on this idle partition (the
    # follower is caught up: its fetch session no longer names it).
    assert leader.hosted.high_watermark == 6
    assert waiting.is_set(), "consumers' long-polls learn of it"


def test_raising_min_insync_replicas_answers_the_waiting_acks_all_produce(tmp_path: Path) -> None:
    image = cluster_with_topic({"min.insync.replicas": "2"}, random.Random(1))
    image = commit(image, cp.fence_brokers(image, [ADDED]))  # ISR (1, 2)
    leader = Leader(tmp_path)
    leader.apply(image)
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30_000)
    request.topics.add(name=TOPIC).partitions.add(partition=0, records=build_batch([b"x"]))
    response, waits = produce(leader.host, request, 1_000, internal_write_refusal=None)
    assert response.topics[0].partitions[0].error_code == 0 and len(waits) == 1
    waiting = leader.hosted.data_arrived  # what await_replication is parked on
    leader.apply(with_min_isr(image, "3"))
    assert waiting.is_set(), "the waiter is woken, or it times out after 30 s"
    assert settled(waits[0])
    assert waits[0].result.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
