"""Goal: the controller gives producer id blocks that never overlap, only to a broker's current
registration, and records each block so that the next one (on any controller) starts after it.

Method: images built with the real control plane and replay (test_control_plane's helpers);
`allocate_producer_ids` is called against them, its records committed with the real replay, and
the answers and the image's `next_producer_id` checked. A refusal must commit no record.
"""

from __future__ import annotations

from dataclasses import replace

from test_control_plane import cluster, commit, register

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.services.controller import control_plane as cp
from samsa.services.controller.producer_id_control import NEXT_PRODUCER_ID_MAX
from samsa.v1 import controller_pb2 as c


def allocate(image: MetadataImage, broker_id: int, broker_epoch: int | None = None, **kw):
    epoch = image.brokers[broker_id].broker_epoch if broker_epoch is None else broker_epoch
    result = cp.allocate_producer_ids(
        image, c.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch), **kw
    )
    return commit(image, result), result


def test_blocks_advance_by_the_block_size_and_never_overlap() -> None:
    image = cluster(brokers=2)
    assert image.next_producer_id == 0
    blocks = []
    for broker_id in (1, 2, 1, 1, 2):
        before = image.next_producer_id
        image, result = allocate(image, broker_id)
        answer = result.response
        assert answer.status.error_code == ErrorCode.NONE
        assert answer.producer_id_start == before
        assert answer.producer_id_len == limits.producer_id_block_size == 1000
        assert image.next_producer_id == before + limits.producer_id_block_size
        record = result.records[0].producer_ids
        assert (record.broker_id, record.broker_epoch) == (
            broker_id,
            image.brokers[broker_id].broker_epoch,
        )
        blocks.append((answer.producer_id_start, answer.producer_id_start + answer.producer_id_len))
    assert blocks == [(n * 1000, (n + 1) * 1000) for n in range(5)]


def test_the_next_block_survives_a_snapshot() -> None:
    image, _ = allocate(cluster(brokers=1), 1, block_size=7)
    restored = from_snapshot(to_snapshot(image))
    _, result = allocate(restored, 1, block_size=7)
    assert result.response.producer_id_start == 7


def test_a_stale_or_unknown_broker_gets_nothing() -> None:
    image = cluster(brokers=2)
    old_epoch = image.brokers[2].broker_epoch
    image, _ = register(image, 2, incarnation="restarted")  # a new epoch for broker 2
    for broker_id, broker_epoch in ((2, old_epoch), (9, 0), (-1, 0)):
        request = c.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch)
        result = cp.allocate_producer_ids(image, request)
        after = commit(image, result)
        assert result.records == []
        assert result.response.status.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert f"broker {broker_id} epoch {broker_epoch} is not current" in (
            result.response.status.error_message
        )
        assert (result.response.producer_id_start, result.response.producer_id_len) == (-1, 0)
        assert after.next_producer_id == 0


def test_the_last_ids_are_never_handed_out_twice() -> None:
    image = replace(cluster(brokers=1), next_producer_id=NEXT_PRODUCER_ID_MAX - 10)
    image, result = allocate(image, 1, block_size=10)
    assert result.response.producer_id_start == NEXT_PRODUCER_ID_MAX - 10
    assert image.next_producer_id == NEXT_PRODUCER_ID_MAX
    image, result = allocate(image, 1, block_size=1)
    assert result.records == []
    assert result.response.status.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
