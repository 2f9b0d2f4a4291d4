"""Goal: a metadata change the broker applies a slice of actions at a time (broker.py,
APPLY_SLICE) ends as one applied whole would: every partition it leads with an ISR of itself
alone has its high watermark at its log end (Kafka's makeLeader moves it; nothing else does on
an idle partition), and a later slice refreshes only the partitions it names, not every hosted
partition of their topic again, nor compares every topic of the image with itself.

Method: a Broker's own `_on_change` (no server, no controller: the slices and the host only)
over real logs of 30 partitions, after a restart that lost the high-watermark checkpoint; and a
PartitionHost fed the slices of a 200-partition leadership move by hand, its refreshes counted
on HostedPartition.advance_high_watermark, and one over 100 one-partition topics, its topic
comparisons counted on metadata_diff._same_configs.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from broker_host import led_partitions, single_broker_image, standalone_broker, two_broker_image

from samsa.common.record.codec import build_batch
from samsa.metadata.image import MetadataImage, PartitionState, TopicImage
from samsa.services.broker.broker import APPLY_SLICE, Broker
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.metadata import metadata_diff
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.high_watermark_checkpoint import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
)


def test_a_sole_isr_leader_of_a_later_slice_starts_at_its_log_end(tmp_path: Path) -> None:
    """Before: the partitions past the first slice kept the checkpoint's high watermark (0
    here) until their next produce: their records were invisible to consumers and ListOffsets
    answered OFFSET_NOT_AVAILABLE for LATEST on every idle one."""
    partitions = APPLY_SLICE + 5
    image = single_broker_image({"t": (b"\x01" * 16, led_partitions(partitions))})
    host = PartitionHost(tmp_path, 1)
    host.apply(image, partition_changes(MetadataImage.empty(), image, 1), now_ms=0)
    for hosted in host.partitions.values():
        hosted.log.append_as_leader(build_batch([b"x"]), leader_epoch=0, now_ms=0)
        hosted.on_leader_append()
    host.close_all()
    (tmp_path / HIGH_WATERMARK_CHECKPOINT_FILE).unlink()  # lost: every partition starts at 0

    async def started_broker() -> Broker:  # its channels need a running loop
        broker = standalone_broker(tmp_path)
        await broker._on_change(MetadataImage.empty(), image)
        return broker

    broker = asyncio.run(started_broker())
    try:
        assert len(broker.host.partitions) == partitions
        behind = sorted(p for (_, p), h in broker.host.partitions.items() if h.high_watermark != 1)
        assert behind == []
        assert all(h.high_watermark_caught_up for h in broker.host.partitions.values())
    finally:
        broker.host.close_all()


def test_a_later_slice_refreshes_only_the_partitions_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a later slice refreshed none of its partitions (the high watermark above), yet
    looked up the state of every hosted partition of its actions' topic, so a change of n
    partitions of one topic cost n * n / APPLY_SLICE lookups (4,000 leaderships moved: 0.2 s,
    10,000: 1.4 s)."""
    partitions = 8 * APPLY_SLICE
    image = two_broker_image(b"\x01" * 16, partitions)
    host = PartitionHost(tmp_path, 1)
    host.apply(image, partition_changes(MetadataImage.empty(), image, 1), now_ms=0)
    moved = {p: PartitionState(p, (1, 2), (1, 2), 2, 1, 1) for p in range(partitions)}
    topic = image.topics["t"]
    new = replace(image, topics={"t": TopicImage("t", topic.topic_id, moved)})
    actions = partition_changes(image, new, 1)
    assert len(actions) == partitions
    refreshed: list[int] = []
    looked_up: list[tuple[str, int]] = []
    advance, state_of = HostedPartition.advance_high_watermark, PartitionHost._state_of

    def counting_advance(self: HostedPartition) -> bool:
        refreshed.append(self.partition)
        return advance(self)

    def counting_state_of(self: PartitionHost, key: tuple[str, int]) -> PartitionState | None:
        looked_up.append(key)
        return state_of(self, key)

    monkeypatch.setattr(HostedPartition, "advance_high_watermark", counting_advance)
    monkeypatch.setattr(PartitionHost, "_state_of", counting_state_of)
    host.apply(new, actions[:APPLY_SLICE], now_ms=0)
    assert sorted(refreshed) == list(range(partitions)), "the first: every changed partition"
    refreshed.clear()
    looked_up.clear()
    host.apply(new, actions[APPLY_SLICE : 2 * APPLY_SLICE], now_ms=0)
    assert sorted(refreshed) == list(range(APPLY_SLICE, 2 * APPLY_SLICE))
    assert len(looked_up) <= 2 * APPLY_SLICE, "its own partitions: a lookup to act, one to refresh"
    for number in range(2 * APPLY_SLICE):
        hosted = host.get("t", number)
        assert hosted is not None and not hosted.is_leader and hosted.leader_epoch == 1
    host.close_all()


def test_a_later_slice_does_not_walk_every_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: each slice compared every topic of the image with itself (changed_topics of the
    same image twice), so a change of n one-partition topics cost n * n / APPLY_SLICE topic
    comparisons (5,000 topics' leaderships moved: 0.25 s of 0.30 s; 10,000: about a second)."""
    topics = 4 * APPLY_SLICE

    def image(leader: int, epoch: int) -> MetadataImage:
        state = PartitionState(0, (1, 2), (1, 2), leader, epoch, epoch)
        base = two_broker_image(b"\x00" * 16, 1)
        named = {f"t{n}": TopicImage(f"t{n}", bytes([n]) * 16, {0: state}) for n in range(topics)}
        return replace(
            base, topics=named, topic_names={t.topic_id: name for name, t in named.items()}
        )

    led, moved = image(1, 0), image(2, 1)
    host = PartitionHost(tmp_path, 1)
    host.apply(led, partition_changes(MetadataImage.empty(), led, 1), now_ms=0)
    actions = partition_changes(led, moved, 1)
    assert len(actions) == topics
    compared: list[str] = []
    same_configs = metadata_diff._same_configs

    def counting(old: MetadataImage, new: MetadataImage, topic: str) -> bool:
        compared.append(topic)
        return same_configs(old, new, topic)

    monkeypatch.setattr(metadata_diff, "_same_configs", counting)
    host.apply(moved, actions[:APPLY_SLICE], now_ms=0)
    compared.clear()
    host.apply(moved, actions[APPLY_SLICE:], now_ms=0)
    assert compared == [], "a later slice of the same image compares no topic"
    assert all(not hosted.is_leader for hosted in host.partitions.values())
    host.close_all()
