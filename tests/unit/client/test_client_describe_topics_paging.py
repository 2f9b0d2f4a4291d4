"""The SDK reads every page of DescribeTopics and merges them, so callers see whole answers.

Method: (1) the real `ControllerServicer` (its driver's image set by hand, no quorum) served by
grpc.aio on loopback, and the real `Admin` and `ClusterMetadata` against it: a topic with more
partitions than a page holds (the server's default limit) must come back whole, and the
servicer must have been asked more than once. (2) `merge_page` with the pure control plane as
the server and an image that changes between pages: a topic deleted or recreated mid-read must
not come back with partitions of two incarnations or a partial partition list.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest
from topic_creation import create_topics_decided

from samsa.cli.main import main
from samsa.client import Admin, TopicError
from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata, merge_page
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import control_plane as cp
from samsa.services.controller.driver import ControllerDriver
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.servicer import ControllerServicer
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc

BIG = limits.describe_topics_partitions_default + 500
DEFAULTS = cp.ClusterDefaults(num_partitions=1, default_replication_factor=1)


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:
    return replay(image, make_batch(image, result.records, 1)) if result.records else image


def one_broker() -> MetadataImage:
    image = MetadataImage.empty()
    registered = cp.register_broker(
        image,
        c.RegisterBrokerRequest(broker_id=1, incarnation_id="a", endpoint="h:1"),
        liveness=BrokerLiveness(),
        now_ms=0,
        session_timeout_ms=1000,
    )
    image = commit(image, registered)
    heartbeat = c.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=image.brokers[1].broker_epoch, metadata_offset=image.end_offset
    )
    return commit(image, cp.broker_heartbeat(image, heartbeat))


def with_topics(image: MetadataImage, sizes: dict[str, int], first_id: int = 1) -> MetadataImage:
    request = c.CreateTopicsRequest(
        topics=[
            c.CreateTopicsRequest.Topic(name=n, num_partitions=k, replication_factor=1)
            for n, k in sizes.items()
        ]
    )
    result = create_topics_decided(image, request, DEFAULTS, first_id=first_id)
    assert all(t.error_code == ErrorCode.NONE for t in result.response.topics)
    return commit(image, result)


def without(image: MetadataImage, name: str) -> MetadataImage:
    return commit(image, cp.delete_topics(image, c.DeleteTopicsRequest(names=[name])))


class RecordingServicer(ControllerServicer):
    """The real servicer, remembering each DescribeTopics request it answered."""

    def __init__(self, image: MetadataImage) -> None:
        driver = ControllerDriver(node_id=1, raft_address_to_node={})
        driver.image = image
        driver.active = True
        super().__init__(
            driver=driver,
            liveness=BrokerLiveness(),
            controller_endpoints={},
            defaults=DEFAULTS,
            cluster_id="test",
            member_key=bytes(32),
        )
        self.asked: list[c.DescribeTopicsRequest] = []

    async def DescribeTopics(self, request, context):  # type: ignore[no-untyped-def]
        self.asked.append(request)
        return await super().DescribeTopics(request, context)


@contextmanager
def loopback_controller(image: MetadataImage) -> Iterator[tuple[str, RecordingServicer]]:
    """A controller servicer on 127.0.0.1 in a thread of its own; stopped on the way out."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servicer = RecordingServicer(image)

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="module")
def controller() -> Iterator[tuple[str, RecordingServicer]]:
    image = with_topics(one_broker(), {"big": BIG, "a": 3, "z": 2})
    with loopback_controller(image) as running:
        yield running


def test_admin_describes_a_topic_larger_than_a_page_whole(controller):
    endpoint, servicer = controller
    servicer.asked.clear()
    with Admin({"bootstrap.servers": endpoint}) as admin:
        described = admin.describe_topics(["z", "big"])
    assert list(described) == ["z", "big"]
    assert [p.partition for p in described["big"].partitions] == list(range(BIG))
    assert [p.partition for p in described["z"].partitions] == [0, 1]
    assert all(p.leader == 1 and p.isr == (1,) for p in described["big"].partitions)
    assert len(servicer.asked) == 2, "one full page, then the rest from the cursor"
    assert servicer.asked[1].cursor == c.DescribeTopicsRequest.Cursor(
        topic="big", partition=limits.describe_topics_partitions_default - 2
    )


def test_admin_lists_and_describes_every_topic_across_pages(controller):
    endpoint, servicer = controller
    servicer.asked.clear()
    with Admin({"bootstrap.servers": endpoint}) as admin:
        described = admin.describe_topics()
        assert admin.list_topics() == ["a", "big", "z"]
        with pytest.raises(TopicError) as raised:
            admin.describe_topics(["big", "nope"])
    assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert {n: len(t.partitions) for n, t in described.items()} == {"a": 3, "big": BIG, "z": 2}
    assert len(servicer.asked) == 6, "each of the three reads took two pages"


def test_the_metadata_cache_counts_every_partition_of_a_paged_topic(controller):
    endpoint, _ = controller
    channels = Channels()
    try:
        metadata = ClusterMetadata([endpoint], channels)
        metadata.refresh(["big", "a"])
    finally:
        channels.close()
    assert metadata.partition_counts == {"big": BIG, "a": 3}
    assert len(metadata.leaders) == BIG + 3
    assert metadata.endpoints == {1: "h:1"}


def read_all(images: list[MetadataImage], names: list[str], limit: int) -> c.DescribeTopicsResponse:
    """The SDK's paging loop (`merge_page`) over the pure control plane, serving page k from
    `images[k]` (the last one for the pages after) with `limit` partitions per page."""
    request = c.DescribeTopicsRequest(names=names, partition_limit=limit)
    merged = c.DescribeTopicsResponse()
    for page_number in range(100):
        page = cp.describe_topics(images[min(page_number, len(images) - 1)], request)
        asked = request.cursor if request.HasField("cursor") else None
        cursor = merge_page(merged, page, asked)
        if cursor is None:
            return merged
        request.cursor.CopyFrom(cursor)
    raise AssertionError("paging never ended")


def partitions_by_topic(answer: c.DescribeTopicsResponse) -> dict[str, list[int]]:
    return {t.name: [p.partition for p in t.partitions] for t in answer.topics}


@pytest.mark.parametrize("names", [[], ["a", "b", "c"]])
def test_merged_pages_equal_one_unpaged_answer(names):
    image = with_topics(one_broker(), {"b": 7, "a": 3, "c": 2})
    whole = cp.describe_topics(image, c.DescribeTopicsRequest(names=names))
    for limit in (1, 2, 4, 5):
        merged = read_all([image], names, limit)
        assert list(merged.topics) == list(whole.topics), f"limit {limit}"


@pytest.mark.parametrize("names", [[], ["a", "b", "c"]])
def test_a_topic_deleted_between_pages_is_not_answered_in_part(names):
    before = with_topics(one_broker(), {"b": 7, "a": 3, "c": 2})
    merged = read_all([before, without(before, "b")], names, 5)
    assert [(t.name, t.error_code) for t in merged.topics] == [
        ("a", ErrorCode.NONE),
        ("b", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("c", ErrorCode.NONE),
    ]
    assert partitions_by_topic(merged) == {"a": [0, 1, 2], "b": [], "c": [0, 1]}


def test_a_topic_recreated_between_pages_is_read_again_from_its_first_partition():
    before = with_topics(one_broker(), {"b": 7, "a": 3})
    after = with_topics(without(before, "b"), {"b": 4}, first_id=100)
    merged = read_all([before, after], [], 5)
    assert partitions_by_topic(merged) == {"a": [0, 1, 2], "b": [0, 1, 2, 3]}
    assert merged.topics[1].topic_id == after.topics["b"].topic_id


def test_the_cli_shows_every_partition_of_a_paged_topic(controller, capsys):
    endpoint, servicer = controller
    servicer.asked.clear()
    assert main(["topics", "describe", "big", "--bootstrap-server", endpoint]) == 0
    described = capsys.readouterr().out.splitlines()
    assert main(["cluster", "--partitions", "--bootstrap-server", endpoint]) == 0
    cluster = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in described[2:]]  # after the topic line and the headers
    assert [int(row[0]) for row in rows] == list(range(BIG))
    summary, *partitions = [line.split() for line in cluster if line.startswith("big ")]
    assert summary[:2] == ["big", str(BIG)]  # the topic's line: name, partition count
    assert [int(row[1]) for row in partitions] == list(range(BIG))
    assert main(["cluster", "--bootstrap-server", endpoint]) == 0
    at_a_glance = capsys.readouterr().out.splitlines()
    # Every partition is led and in sync: one line for the topic, none per partition.
    assert [line.split()[:2] for line in at_a_glance if line.startswith("big ")] == [
        ["big", str(BIG)]
    ]
    assert len(servicer.asked) == 6, "each command read two pages"


def test_describing_no_topics_answers_none_and_asks_nothing(controller):
    """Kafka's describeTopics of an empty collection answers an empty map; only None means every
    topic. A caller's filtered list that came out empty must not describe the whole cluster."""
    endpoint, servicer = controller
    servicer.asked.clear()
    with Admin({"bootstrap.servers": endpoint}) as admin:
        assert admin.describe_topics([]) == {}
        assert admin.describe_topics(name for name in ["a"] if name == "b") == {}
    assert servicer.asked == []


def test_more_topics_than_one_request_may_name_are_described_in_several(controller):
    """A server refuses DescribeTopics naming more than admin_request_items_max topics
    (RESOURCE_EXHAUSTED); a producer or consumer using more topics than that must still refresh
    its metadata, and Admin describe them, as Kafka's clients do for any number of topics."""
    endpoint, servicer = controller
    servicer.asked.clear()
    names = ["a", *(f"absent-{n:05}" for n in range(limits.admin_request_items_max)), "z"]
    channels = Channels()
    try:
        metadata = ClusterMetadata([endpoint], channels)
        metadata.refresh(names, timeout_s=2.0)
    finally:
        channels.close()
    assert metadata.partition_counts == {"a": 3, "z": 2}
    assert all(len(asked.names) <= limits.admin_request_items_max for asked in servicer.asked)
    with Admin({"bootstrap.servers": endpoint, "request.timeout.ms": 2000}) as admin:
        assert admin.list_topics() == ["a", "big", "z"]
        with pytest.raises(TopicError) as raised:
            admin.describe_topics(names)
    assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
