"""Goal: one AlterPartition carries many partitions; each is checked and answered on its own, in
request order, and the accepted ones become one metadata batch (one Raft commit), not one each.
A partition named twice is refused the second time, a stale broker epoch refuses every
partition, and a request beyond `limits.alter_partition_items_max` is refused whole.

Method: the pure `alter_partition` over images built with the real control plane and replay
(a cluster of three brokers, a topic each of them leads partitions of); the limit through the
servicer's AlterPartition with the membership proof and the write stubbed out and a fake gRPC
context whose `abort` raises.
"""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import control_plane as cp
from samsa.services.controller import servicer
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c

DEFAULTS = cp.ClusterDefaults(num_partitions=1, default_replication_factor=1)


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:
    if not result.records:
        return image
    return replay(image, make_batch(image, result.records, 1))


def join(image: MetadataImage, broker_id: int, incarnation: str = "a") -> MetadataImage:
    """Register `broker_id` and heartbeat it unfenced."""
    image = commit(
        image,
        cp.register_broker(
            image,
            c.RegisterBrokerRequest(
                broker_id=broker_id, incarnation_id=incarnation, endpoint=f"h:{broker_id}"
            ),
            liveness=BrokerLiveness(),
            now_ms=0,
            session_timeout_ms=1000,
        ),
    )
    heartbeat = c.BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=image.brokers[broker_id].broker_epoch,
        metadata_offset=image.end_offset,
    )
    return commit(image, cp.broker_heartbeat(image, heartbeat))


def topic(brokers: int, partitions: int, factor: int) -> MetadataImage:
    image = MetadataImage.empty()
    for broker_id in range(1, brokers + 1):
        image = join(image, broker_id)
    request = c.CreateTopicsRequest(
        topics=[
            c.CreateTopicsRequest.Topic(
                name="t", num_partitions=partitions, replication_factor=factor
            )
        ]
    )
    result = cp.create_topics(
        image, request, rng=random.Random(7), defaults=DEFAULTS, new_topic_id=lambda: b"t" * 16
    )
    return commit(image, result)


def proposal(
    state: PartitionState, isr: list[int], image: MetadataImage | None = None, **fields
) -> c.AlterPartitionRequest.PartitionIsr:
    """`image`: name each member's broker epoch in it, as a leader that saw them fetch under
    their current registrations does (KIP-903: an expansion needs them)."""
    return c.AlterPartitionRequest.PartitionIsr(
        topic=fields.pop("topic", "t"),
        partition=state.partition,
        leader_epoch=fields.pop("leader_epoch", state.leader_epoch),
        partition_epoch=fields.pop("partition_epoch", state.partition_epoch),
        new_isr=isr,
        new_isr_with_epochs=[
            c.AlterPartitionRequest.BrokerState(broker_id=r, broker_epoch=b.broker_epoch)
            for r in isr
            if image is not None and (b := image.brokers.get(r)) is not None
        ],
    )


def led_by(image: MetadataImage, broker_id: int) -> list[PartitionState]:
    return [s for _, s in sorted(image.topics["t"].partitions.items()) if s.leader == broker_id]


def test_a_mixed_batch_answers_each_partition_and_commits_the_accepted_ones_together():
    image = topic(brokers=3, partitions=18, factor=3)
    leader = 1
    mine = led_by(image, leader)
    assert len(mine) == 6, "the round-robin placement gives each broker six leaderships"
    foreign = led_by(image, 2)[0]
    shrink, shrink_too, fenced_epoch, old_version, no_leader, unchanged = mine[:6]
    request = c.AlterPartitionRequest(
        broker_id=leader, broker_epoch=image.brokers[leader].broker_epoch
    )
    request.partitions.extend(
        [
            proposal(shrink, [leader]),
            proposal(foreign, [2]),
            proposal(shrink, [leader, shrink.replicas[1]]),  # named twice
            proposal(fenced_epoch, [leader], leader_epoch=fenced_epoch.leader_epoch + 1),
            proposal(old_version, [leader], partition_epoch=old_version.partition_epoch + 5),
            proposal(no_leader, [r for r in no_leader.isr if r != leader]),
            proposal(unchanged, list(unchanged.isr)),
            proposal(shrink, [leader], topic="nope"),
            proposal(shrink_too, [leader]),
        ]
    )

    result = cp.alter_partition(image, request)

    answers = result.response.partitions
    assert [(a.topic, a.partition) for a in answers] == [
        (p.topic, p.partition) for p in request.partitions
    ], "one answer per proposal, in request order"
    assert [a.error_code for a in answers] == [
        ErrorCode.NONE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.INELIGIBLE_REPLICA,
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NONE,
    ]
    assert all(a.error_message for a in answers if a.error_code != ErrorCode.NONE)
    assert len(result.records) == 2, "one record per accepted change, none for a no-op"
    after = commit(image, result)
    assert after.end_offset == image.end_offset + 2
    partitions = after.topics["t"].partitions
    for changed in (shrink, shrink_too):
        assert partitions[changed.partition].isr == (leader,)
        assert partitions[changed.partition].partition_epoch == changed.partition_epoch + 1
    assert (answers[0].partition_epoch, list(answers[0].isr)) == (shrink.partition_epoch + 1, [1])
    for refused in (foreign, fenced_epoch, old_version, no_leader, unchanged):
        assert partitions[refused.partition] == refused, "untouched"
    # A refused item tells the leader the committed state its next proposal starts from.
    assert answers[4].partition_epoch == old_version.partition_epoch
    assert list(answers[4].isr) == list(old_version.isr)


def test_a_partition_named_twice_is_refused_the_second_time_even_when_the_first_fails():
    image = topic(brokers=3, partitions=3, factor=3)
    state = led_by(image, 1)[0]
    request = c.AlterPartitionRequest(broker_id=1, broker_epoch=image.brokers[1].broker_epoch)
    request.partitions.extend(
        [
            proposal(state, [1], partition_epoch=state.partition_epoch + 1),
            proposal(state, [1]),
        ]
    )
    result = cp.alter_partition(image, request)
    assert [a.error_code for a in result.response.partitions] == [
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.INVALID_REQUEST,
    ]
    assert result.records == []


def test_a_stale_broker_epoch_refuses_every_partition():
    image = topic(brokers=3, partitions=6, factor=3)
    mine = led_by(image, 1)
    request = c.AlterPartitionRequest(broker_id=1, broker_epoch=image.brokers[1].broker_epoch - 1)
    request.partitions.extend(proposal(state, [1]) for state in mine)
    result = cp.alter_partition(image, request)
    codes = {a.error_code for a in result.response.partitions}
    assert codes == {ErrorCode.STALE_BROKER_EPOCH} and len(result.response.partitions) == 2
    assert result.records == []


def test_a_broker_that_took_every_leadership_expands_every_isr_in_one_batch():
    # Broker 2 was fenced (its ISR memberships went to broker 1) and came back: broker 1 proposes
    # a maximal request, and its one metadata batch still fits a Raft entry.
    image = topic(brokers=2, partitions=limits.alter_partition_items_max, factor=2)
    image = commit(image, cp.fence_brokers(image, [2]))
    image = join(image, 2, incarnation="back")
    states = led_by(image, 1)
    assert len(states) == limits.alter_partition_items_max
    assert all(state.isr == (1,) for state in states)
    request = c.AlterPartitionRequest(broker_id=1, broker_epoch=image.brokers[1].broker_epoch)
    request.partitions.extend(proposal(state, [1, 2], image) for state in states)

    result = cp.alter_partition(image, request)

    assert {a.error_code for a in result.response.partitions} == {ErrorCode.NONE}
    batch = make_batch(image, result.records, 1)
    assert len(batch.SerializeToString()) <= limits.metadata_batch_bytes_max
    after = replay(image, batch)
    assert all(set(s.isr) == {1, 2} for s in after.topics["t"].partitions.values())


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class FakeContext:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


def serve_alter_partition(count: int) -> list[str]:
    """The servicer's AlterPartition for `count` proposals; the writes it went on to make."""
    writes: list[str] = []

    async def run() -> None:
        service = object.__new__(servicer.ControllerServicer)

        async def require_member(context, method, broker_id) -> None:
            return None

        async def write(response_type, generate):
            writes.append(response_type.DESCRIPTOR.name)
            return response_type()

        service._require_member = require_member  # type: ignore[method-assign]
        service._write = write  # type: ignore[method-assign]
        request = c.AlterPartitionRequest(broker_id=1, broker_epoch=1)
        request.partitions.extend(
            c.AlterPartitionRequest.PartitionIsr(topic="t", partition=p, new_isr=[1])
            for p in range(count)
        )
        await service.AlterPartition(request, FakeContext())

    asyncio.run(run())
    return writes


def test_the_servicer_refuses_a_request_beyond_the_limit_before_any_write():
    assert serve_alter_partition(limits.alter_partition_items_max) == ["AlterPartitionResponse"]
    with pytest.raises(Aborted) as refused:
        serve_alter_partition(limits.alter_partition_items_max + 1)
    assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "alter_partition_items_max" in refused.value.details
