"""Goal: a client's metadata describes the topics it uses, not every topic it was ever asked about
(Kafka's Metadata.retainTopic). Before, ClusterMetadata's set of topics only grew: every refresh
described every topic the client had ever named, deleted ones and ones a consumer no longer had
(the 50th refresh of 50 one-off lookups asked for 50 topics), for the client's whole life. Now a
consumer's refresh describes its assignment plus what a call names while it runs, a producer's
the topics it used within metadata.max.idle.ms (marked per drain), and a topic forgotten is gone
from the view too, so used again it is simply described again.

Method: the pure core (metadata_topics.py) with numbers for time; ClusterMetadata, a Consumer and
a Producer over a fake DescribeTopics `read` (no server is called) or the in-memory brokers
(fake_produce_cluster.py).
"""

from __future__ import annotations

import threading
import time

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import Consumer, Producer
from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.metadata_topics import METADATA_MAX_IDLE_MS, MetadataTopics
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

IDLE_MS = 60_000


# --- the core -------------------------------------------------------------------------------------


def test_a_topic_asked_once_is_forgotten_at_the_next_refresh_without_idle_time() -> None:
    topics = MetadataTopics()
    assert topics.to_describe(["a"], (), now_ms=0) == ["a"]
    assert topics.to_describe(["b"], (), now_ms=0) == ["b"]
    assert topics.to_describe((), (), now_ms=1) == []


def test_a_used_topic_stays_until_idle_for_idle_ms() -> None:
    topics = MetadataTopics(IDLE_MS)
    topics.to_describe(["a"], (), now_ms=0)
    topics.use(["b"], now_ms=10)
    assert topics.to_describe((), (), now_ms=IDLE_MS - 1) == ["a", "b"]
    assert topics.to_describe((), (), now_ms=IDLE_MS) == ["b"], "idle for idle_ms: forgotten"
    topics.use(["b"], now_ms=5)  # an older use never takes it back in time
    assert topics.to_describe((), (), now_ms=IDLE_MS + 10) == []
    assert topics.used == frozenset()


def test_kept_and_held_topics_are_described_while_so() -> None:
    topics = MetadataTopics()
    topics.hold(["h", "h2"])
    topics.hold(["h"])
    assert topics.to_describe((), ["k"], now_ms=0) == ["h", "h2", "k"]
    topics.release(["h", "h2"])
    assert topics.to_describe((), (), now_ms=1) == ["h"], "held by one call still"
    topics.release(["h"])
    assert topics.to_describe((), (), now_ms=2) == []
    with pytest.raises(AssertionError):
        topics.release(["h"])


# --- ClusterMetadata ------------------------------------------------------------------------------


def answering(metadata: ClusterMetadata, asked: list[list[str]]) -> ClusterMetadata:
    """Every topic asked exists with one partition led by broker 1; `asked` records the names."""

    def read(method: str, request: c.DescribeTopicsRequest, timeout_s: float = 5.0) -> object:
        asked.append(list(request.names))
        response = c.DescribeTopicsResponse()
        response.broker_endpoints[1] = "host-1:9092"
        for name in request.names:
            topic = response.topics.add(name=name, topic_id=name.encode().ljust(16, b"-"))
            topic.partitions.add(partition=0, leader=1, leader_epoch=0)
        return response

    metadata.read = read  # type: ignore[method-assign,assignment]
    return metadata


def test_refreshes_ask_what_is_used_not_all_ever_asked() -> None:
    """The reviewer's case: one-off lookups of 50 topics."""
    asked: list[list[str]] = []
    metadata = answering(ClusterMetadata(["localhost:9092"], Channels()), asked)
    for n in range(50):
        metadata.refresh([f"session-{n}"])
    assert asked[-1] == ["session-49"]
    assert set(metadata.partition_counts) == {"session-49"}, "the view holds what was described"


def test_a_producer_forgets_a_topic_idle_for_metadata_max_idle_ms_and_describes_it_again() -> None:
    asked: list[list[str]] = []
    metadata = answering(ClusterMetadata(["localhost:9092"], Channels(), IDLE_MS), asked)
    assert metadata.partition_count("old", timeout_s=1) == 1
    metadata.refresh(["new"])
    assert asked[-1] == ["new", "old"], "used within metadata.max.idle.ms: still described"
    now_ms = time.monotonic_ns() // 1_000_000
    metadata.use(["new"], now_ms)  # the drain's mark; "old" was last used IDLE_MS ago:
    metadata._topics._used_ms["old"] = now_ms - IDLE_MS
    metadata.refresh()
    assert asked[-1] == ["new"]
    assert "old" not in metadata.partition_counts and ("old", 0) not in metadata.leaders
    assert metadata.partition_count("old", timeout_s=1) == 1, "used again: described again"
    assert asked[-1] == ["new", "old"]


def test_a_nothing_in_use_refresh_asks_nothing_and_empties_the_view() -> None:
    asked: list[list[str]] = []
    metadata = answering(ClusterMetadata(["localhost:9092"], Channels()), asked)
    metadata.refresh(["a"])
    metadata.mark_stale()
    metadata.refresh()
    assert asked == [["a"]] and metadata.partition_counts == {} and not metadata.needs_refresh()


def test_a_topic_a_call_works_with_survives_a_refresh_on_another_thread() -> None:
    asked: list[list[str]] = []
    metadata = answering(ClusterMetadata(["localhost:9092"], Channels()), asked)
    metadata.keep(lambda: ["assigned"])
    with metadata.transient(["looked-up"]):
        metadata.refresh(["looked-up"])
        other = threading.Thread(target=metadata.refresh)  # e.g. the consumer driver's
        other.start()
        other.join()
        assert asked[-1] == ["assigned", "looked-up"]
        assert metadata.partition_counts["looked-up"] == 1, "still in the view for the call"
    metadata.refresh()
    assert asked[-1] == ["assigned"]


# --- the clients ----------------------------------------------------------------------------------


def test_a_consumer_describes_its_assignment_only() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1"})
    asked: list[list[str]] = []
    answering(consumer._metadata, asked)
    try:
        consumer.assign([("a", 0)])
        consumer.assign([("b", 0)])
        consumer._metadata.refresh()  # as the driver's
        assert asked[-1] == ["b"]
        assert set(consumer._metadata.partition_counts) == {"b"}
    finally:
        consumer.close(0)


def test_a_consumer_assigning_a_missing_topic_is_refused() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1"})
    metadata = consumer._metadata

    def read(method: str, request: c.DescribeTopicsRequest, timeout_s: float = 5.0) -> object:
        response = c.DescribeTopicsResponse()
        for name in request.names:
            response.topics.add(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return response

    metadata.read = read  # type: ignore[method-assign,assignment]
    try:
        with pytest.raises(Exception, match="does not exist"):
            consumer.assign([("gone", 0)])
        assert consumer.assignment() == []
    finally:
        consumer.close(0)


def test_the_producer_takes_metadata_max_idle_ms() -> None:
    with Producer({"bootstrap.servers": "127.0.0.1:1"}) as default:
        assert default._metadata._topics.idle_ms == METADATA_MAX_IDLE_MS == 300_000
    with Producer({"bootstrap.servers": "127.0.0.1:1", "metadata.max.idle.ms": 5_000}) as set_:
        assert set_._metadata._topics.idle_ms == 5_000


def test_the_producer_marks_the_topics_it_drains_used(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster("events", partitions=1)
    cluster.install(monkeypatch)
    with Producer({"bootstrap.servers": "fake:9092", "linger.ms": 0}) as producer:
        before_ms = time.monotonic_ns() // 1_000_000
        producer.send("events", b"x").result(10)
        assert cluster.metadata is not None
        assert cluster.metadata.used["events"] >= before_ms


def test_the_producer_keeps_the_topics_of_its_unfinished_batches() -> None:
    """A batch drained (its topic marked used) and in flight for longer than
    metadata.max.idle.ms (request.timeout.ms above it): before, a refresh then forgot its topic,
    and the retry, once an answer named the new leader (KIP-951), went out without the topic's
    id (KIP-516). A topic with a batch queued or in flight is not idle."""
    producer = Producer(
        {"bootstrap.servers": "127.0.0.1:1", "metadata.max.idle.ms": 5_000, "linger.ms": 0}
    )
    metadata = producer._metadata
    answering(metadata, [])
    try:
        producer.send("t", b"x", partition=0)  # never delivered: host-1:9092 is not a broker
        with metadata._lock:  # as if drained 5 s ago, in flight since
            metadata._topics._used_ms["t"] = time.monotonic_ns() // 1_000_000 - 5_000
        metadata.refresh()
        assert "t" in metadata.topic_ids, "forgotten with a batch unfinished"
    finally:
        producer.close(0)
    metadata.refresh()  # the batch failed at the close: now idle, forgotten
    assert "t" not in metadata.topic_ids
