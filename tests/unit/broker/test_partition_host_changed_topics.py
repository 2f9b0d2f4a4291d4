"""Goal: `PartitionHost.apply` refreshes (ISR, partition epoch, high watermark) only the hosted
partitions of topics that changed, with the same outcome as refreshing every hosted partition,
and `repair_corrupt` looks only at partitions marked corrupt.

Method: a reference host whose refresh walks every hosted partition (the loop apply had before)
and the real host, each over real logs in tmp_path, follow the same seeded random metadata
batches (metadata_batches.py) and the same traffic — appends on the partitions they lead and
follower fetches, through the same calls the produce and fetch paths make — and must agree on
every hosted partition's state after every step. Two direct tests pin the cheap paths.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

from metadata_batches import random_batch, start_image

from samsa.common.record.codec import build_batch
from samsa.metadata.image import BrokerRegistration, MetadataImage, PartitionState, TopicImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.log.scrub import CorruptBatch
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost

ME = 1


class FullWalkHost(PartitionHost):
    """The reference: refreshes every hosted partition after each metadata change."""

    def _refresh_states(
        self,
        topics: Iterable[str],
        previous: MetadataImage,
        named: Iterable[tuple[str, int]] = (),
    ) -> None:
        for key, hosted in self.partitions.items():
            hosted.replica.state_changed(self._state_of(key))
            hosted.advance_high_watermark()


def observed(host: PartitionHost) -> dict[tuple[str, int], tuple[object, ...]]:
    """What the refresh may change, per hosted partition."""
    return {
        key: (
            hosted.state,
            hosted.is_leader,
            hosted.leader_id,
            hosted.leader_epoch,
            hosted.high_watermark,
            hosted.log.log_end_offset,
            None
            if hosted.replica.leading is None
            else sorted(
                (replica, progress.log_end_offset)
                for replica, progress in hosted.replica.leading.followers.items()
            ),
        )
        for key, hosted in sorted(host.partitions.items())
    }


def traffic(rng: random.Random, hosts: list[PartitionHost]) -> None:
    """The same appends and follower fetches on every host, each followed by the high-watermark
    step the produce and fetch paths take."""
    for key in sorted(hosts[0].partitions):
        roll = rng.random()
        follower = rng.choice((2, 3, 4))
        for host in hosts:
            hosted = host.partitions[key]
            leading = hosted.replica.leading
            if leading is None:
                continue
            if roll < 0.5:
                hosted.log.append_as_leader(
                    build_batch([b"x"]), leader_epoch=hosted.leader_epoch, now_ms=0
                )
            elif follower in leading.followers:
                end = hosted.log.log_end_offset
                hosted.replica.follower_fetched(follower, end, end, now_ms=0)
            hosted.advance_high_watermark()


def test_refreshing_changed_topics_only_matches_refreshing_every_partition(tmp_path: Path) -> None:
    for seed in range(12):
        rng = random.Random(seed)
        hosts = [
            PartitionHost(tmp_path / f"{seed}-real", ME),
            FullWalkHost(tmp_path / f"{seed}-reference", ME),
        ]
        image = start_image()
        for _ in range(10):
            records = random_batch(rng, image)
            if not records:
                continue
            image = replay(image, make_batch(image, records, 0))
            for host in hosts:
                host.apply(image, partition_changes(host.image, image, ME), now_ms=0)
            traffic(rng, hosts)
            assert observed(hosts[0]) == observed(hosts[1]), f"seed {seed}"
        for host in hosts:
            host.close_all()


def two_topics(isr_a: tuple[int, ...], partition_epoch: int, b: TopicImage) -> MetadataImage:
    state = PartitionState(0, (1, 2, 3), isr_a, ME, 0, partition_epoch)
    return MetadataImage(
        end_offset=10 + partition_epoch,
        hash=b"\x00" * 16,
        timestamp_ms=0,
        brokers={n: BrokerRegistration(n, "i", f"h:{n}", "", 0, False) for n in (1, 2, 3)},
        topics={"a": TopicImage("a", b"\x0a" * 16, {0: state}), "b": b},
        topic_names={b"\x0a" * 16: "a", b"\x0b" * 16: "b"},
        configs={},
    )


def step(host: PartitionHost, image: MetadataImage) -> None:
    host.apply(image, partition_changes(host.image, image, ME), now_ms=0)


def hosted(host: PartitionHost, topic: str) -> HostedPartition:
    found = host.get(topic, 0)
    assert found is not None
    return found


def test_an_isr_change_refreshes_its_topic_and_leaves_unchanged_topics_alone(
    tmp_path: Path,
) -> None:
    b = TopicImage("b", b"\x0b" * 16, {0: PartitionState(0, (1, 2), (1, 2), ME, 0, 0)})
    host = PartitionHost(tmp_path, ME)
    step(host, two_topics((1, 2, 3), 0, b))
    a = hosted(host, "a")
    for n in range(4):
        a.log.append_as_leader(build_batch([b"%d" % n]), leader_epoch=0, now_ms=0)
    a.replica.follower_fetched(2, 4, 4, now_ms=0)
    assert not a.advance_high_watermark(), "follower 3 holds the high watermark back"
    marker = PartitionState(0, (9,), (9,), 9, 9, 9)
    hosted(host, "b").replica.state = marker  # what a refresh of topic b would overwrite
    step(host, two_topics((1, 2), 1, b))  # 3 left the ISR of a; b is the same object
    assert a.state is not None and a.state.isr == (1, 2) and a.state.partition_epoch == 1
    assert a.high_watermark == 4, "the smaller ISR lets the high watermark move"
    assert hosted(host, "b").state is marker, "an unchanged topic is not walked"
    host.close_all()


def test_repair_looks_only_at_marked_partitions_and_forgets_stopped_ones(tmp_path: Path) -> None:
    b = TopicImage("b", b"\x0b" * 16, {0: PartitionState(0, (1, 2), (1, 2), ME, 0, 0)})
    host = PartitionHost(tmp_path, ME)
    step(host, two_topics((1, 2, 3), 0, b))
    assert host.mark_corrupt(hosted(host, "a"), CorruptBatch(0, 0, 0, 0))
    assert host.corrupt_partitions == {("a", 0)}
    assert host.repair_corrupt() == [], "still leading and in the ISR: nothing to truncate"
    assert host.corrupt_partitions == {("a", 0)}, "kept until it can be repaired"
    without_a = two_topics((1, 2, 3), 0, b)
    without_a = MetadataImage(
        end_offset=20,
        hash=without_a.hash,
        timestamp_ms=0,
        brokers=without_a.brokers,
        topics={"b": b},
        topic_names={b"\x0b" * 16: "b"},
        configs={},
    )
    step(host, without_a)  # topic a deleted: its replica is stopped
    assert host.get("a", 0) is None
    assert host.corrupt_partitions == set(), "a stopped partition is forgotten"
    assert host.partitions_by_topic == {"b": {0}}
    host.close_all()
