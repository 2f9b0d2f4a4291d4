"""One broker's partitions on disk, hosted from a hand-made metadata image: the setup the broker's
request tests share (produce, fetch, transactions, bounds, internal-topic writes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from samsa.metadata.image import (
    TOPIC_RESOURCE,
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.services.broker.broker import Broker
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost

Partitions = dict[int, PartitionState]


def led_partitions(count: int, leader: int = 1, epoch: int = 0) -> Partitions:
    """Partitions 0..count-1, each with `leader` as its only replica, at `epoch`."""
    return {p: PartitionState(p, (leader,), (leader,), leader, epoch, epoch) for p in range(count)}


def single_broker_image(topics: Mapping[str, tuple[bytes, Partitions]]) -> MetadataImage:
    """Broker 1 and `topics` (name -> (topic id, partitions)), no configs."""
    return MetadataImage(
        end_offset=10,
        hash=b"\x00" * 16,
        timestamp_ms=0,
        brokers={1: BrokerRegistration(1, "i", "h:1", "", 0, False)},
        topics={
            name: TopicImage(name, topic_id, parts) for name, (topic_id, parts) in topics.items()
        },
        topic_names={topic_id: name for name, (topic_id, _) in topics.items()},
        configs={},
    )


def two_broker_image(
    topic_id: bytes,
    partitions: int,
    configs: Mapping[str, str] | None = None,
    topic: str = "t",
) -> MetadataImage:
    """Brokers 1 and 2, and `topic` (`topic_id`) whose `partitions` partitions both replicate,
    led by broker 1 at epoch 0; `configs` are the topic's. The fetch-session tests' leader and
    its follower."""
    states = {p: PartitionState(p, (1, 2), (1, 2), 1, 0, 0) for p in range(partitions)}
    return MetadataImage(
        end_offset=10,
        hash=b"\x00" * 16,
        timestamp_ms=0,
        brokers={b: BrokerRegistration(b, "i", f"h:{b}", "", 0, False) for b in (1, 2)},
        topics={topic: TopicImage(topic, topic_id, states)},
        topic_names={topic_id: topic},
        configs={(TOPIC_RESOURCE, topic): dict(configs)} if configs else {},
    )


@contextlib.contextmanager
def hosting(tmp_path: Path, image: MetadataImage, broker_id: int = 1) -> Iterator[PartitionHost]:
    """A PartitionHost in `tmp_path` with `image` applied; its logs are closed on the way out."""
    host = PartitionHost(tmp_path, broker_id=broker_id)
    host.apply(image, partition_changes(MetadataImage.empty(), image, broker_id), now_ms=0)
    try:
        yield host
    finally:
        host.close_all()


@pytest.fixture(name="host")
def two_partition_host(tmp_path: Path) -> Iterator[PartitionHost]:
    """The fixture `host`: topic "t" with partitions 0 and 1, both led by broker 1. A test module
    takes it by importing `two_partition_host`."""
    topic_id = b"\x09" * 16
    with hosting(tmp_path, single_broker_image({"t": (topic_id, led_partitions(2))})) as hosted:
        yield hosted


def hosted_partition(host: PartitionHost, number: int = 0) -> HostedPartition:
    """Partition `number` of topic "t", which `host` must hold."""
    found = host.get("t", number)
    assert found is not None
    return found


def standalone_broker(data_dir: Path) -> Broker:
    """Broker 1 on `data_dir`, its controller at a port nobody serves: for tests that drive its
    metadata handling or its stop by hand. Make it inside a running loop (it opens channels)."""
    return Broker(
        broker_id=1,
        listen="127.0.0.1:0",
        controllers=["127.0.0.1:1"],
        data_dir=data_dir,
        rack="",
        heartbeat_interval_ms=10,
        member_key=b"k" * 32,
    )
