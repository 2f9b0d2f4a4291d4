"""Goal: Admin.describe_log_dirs' pure half asks the brokers meant (every registered one, or
those named, refusing an unregistered id with a message naming it and the registered ones before
anything is sent), asks for the topics meant (none named: no replica, not every replica), and
merges a broker's pages into Kafka's shape without losing or repeating a replica.

Method: `brokers_to_ask`, `log_dirs_request` and `merge_page` on hand-built registrations and
DescribeLogDirs pages; no channel, no broker.
"""

from __future__ import annotations

import pytest

from samsa.client.errors import KafkaError
from samsa.client.log_dirs import (
    LogDirDescription,
    ReplicaInfo,
    brokers_to_ask,
    log_dirs_request,
    merge_page,
)
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2 as b

REGISTERED = {2: "h:2", 1: "h:1", 3: "h:3"}


def test_every_registered_broker_is_asked_by_default_and_named_ones_once_each() -> None:
    assert brokers_to_ask(None, REGISTERED) == {1: "h:1", 2: "h:2", 3: "h:3"}
    assert brokers_to_ask([3, 1, 3], REGISTERED) == {3: "h:3", 1: "h:1"}


def test_an_unregistered_broker_id_is_refused_naming_it_and_the_registered_ones() -> None:
    with pytest.raises(KafkaError) as refused:
        brokers_to_ask([1, 9, 7], REGISTERED)
    assert refused.value.code == ErrorCode.BROKER_NOT_AVAILABLE
    assert str(refused.value) == "broker(s) 9,7 are not registered (registered brokers: 1,2,3)"


def test_the_request_names_the_topics_once_each_and_none_asks_for_no_replica() -> None:
    assert list(log_dirs_request(None).topics) == []  # every replica
    named = log_dirs_request(["a", "b", "a"], partition_limit=5)
    assert [(t.name, list(t.partitions)) for t in named.topics] == [("a", []), ("b", [])]
    assert named.partition_limit == 5
    # No topic at all: a name no topic can have, so that the broker answers only its figures.
    assert [t.name for t in log_dirs_request([]).topics] == [""]


def _page(figures: tuple[int, int], *replicas: tuple[str, int, int]) -> b.DescribeLogDirsResponse:
    page = b.DescribeLogDirsResponse()
    log_dir = page.log_dirs.add(path="/d", total_bytes=figures[0], usable_bytes=figures[1])
    for topic, partition, size in replicas:
        if not log_dir.topics or log_dir.topics[-1].name != topic:
            log_dir.topics.add(name=topic)
        log_dir.topics[-1].partitions.add(partition=partition, size_bytes=size)
    return page


def test_pages_merge_into_one_description_per_directory() -> None:
    described: dict[str, LogDirDescription] = {}
    merge_page(described, _page((100, 60), ("a", 0, 10), ("a", 1, 11)))
    merge_page(described, _page((100, 50), ("a", 2, 12), ("b", 0, 20)))
    (only,) = described.values()
    assert (only.error, only.total_bytes, only.usable_bytes) == (None, 100, 50)  # the last page's
    assert only.replicas == {
        ("a", 0): ReplicaInfo(10, 0, False),
        ("a", 1): ReplicaInfo(11, 0, False),
        ("a", 2): ReplicaInfo(12, 0, False),
        ("b", 0): ReplicaInfo(20, 0, False),
    }


def test_a_directorys_error_becomes_its_kafka_error() -> None:
    page = _page((-1, -1))
    page.log_dirs[0].error_code = ErrorCode.KAFKA_STORAGE_ERROR  # type: ignore[assignment]
    page.log_dirs[0].error_message = "cannot read the disk space of /d: EIO"
    described: dict[str, LogDirDescription] = {}
    merge_page(described, page)
    error = described["/d"].error
    assert error is not None and error.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert str(error) == "cannot read the disk space of /d: EIO"
