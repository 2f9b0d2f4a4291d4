"""Goal: DescribeTopics answers per topic (Kafka's Metadata): a topic the caller may not DESCRIBE
comes back with TOPIC_AUTHORIZATION_FAILED while the others are answered, and the SDK acts on
it per topic. A refresh asked for a refused topic (a producer's first send to it, a consumer's
assign(), an Admin or offsets call), or keeping one (a consumer's assignment), raises its
AuthorizationError after one DescribeTopics, not after retrying until a deadline; the other
topics' metadata is taken all the same. Admin.describe_topics raises AuthorizationError naming
the topic. Producer.send and send_many answer futures that fail with an error that is both
AuthorizationError (naming the topic) and ProduceError; send_many does not raise for it (a bad
record still does).

Method: ClusterMetadata over a stub answering DescribeTopics as the server does (counting the
calls); the Producer over fake_produce_cluster's in-process fakes, its metadata's
partition_count refusing as ClusterMetadata's does. No network, no timing asserts.
"""

from __future__ import annotations

import pytest
from fake_produce_cluster import FakeCluster

from samsa.client import AuthorizationError, ProduceError, Producer
from samsa.client.channels import Channels
from samsa.client.cluster_admin import raise_first
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.common.errors import ErrorCode, InvalidRecordError
from samsa.v1 import controller_pb2 as c

REFUSAL = "User:CN=bob,O=samsa may not DESCRIBE topic {} (no ALLOW ACL, or a DENY one; ...)"


def refused_topic(name: str) -> c.DescribeTopicsResponse.Topic:
    return c.DescribeTopicsResponse.Topic(
        name=name,
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,  # type: ignore[arg-type]
        error_message=REFUSAL.format(name),
    )


class DescribingStub:
    """Answers DescribeTopics as a server enforcing ACLs does: `allowed` topics (one partition,
    led by broker 1), every other name refused; counts the calls and the names asked."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = set(allowed)
        self.asked: list[list[str]] = []

    def DescribeTopics(self, request: c.DescribeTopicsRequest, timeout: float = 0) -> object:
        self.asked.append(list(request.names))
        answer = c.DescribeTopicsResponse(broker_endpoints={1: "broker-1:1"})
        for name in request.names:
            if name in self.allowed:
                topic = answer.topics.add(name=name, topic_id=name.encode().ljust(16, b"-"))
                topic.partitions.add(partition=0, leader=1, leader_epoch=0)
            else:
                answer.topics.append(refused_topic(name))
        return answer


def metadata_over(stub: DescribingStub, topic_idle_ms: int = 0) -> ClusterMetadata:
    metadata = ClusterMetadata(["a:1"], Channels(), topic_idle_ms)
    metadata.stub = lambda endpoint: stub  # type: ignore[method-assign,assignment,return-value]
    return metadata


def test_a_refresh_asked_for_a_refused_topic_raises_at_once_with_the_others_taken() -> None:
    stub = DescribingStub("a")
    metadata = metadata_over(stub)
    with pytest.raises(AuthorizationError) as raised:
        metadata.refresh(["a", "b"], timeout_s=30)
    assert (raised.value.code, raised.value.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b")
    assert "may not DESCRIBE topic b" in str(raised.value)
    assert stub.asked == [["a", "b"]], "asked once: asked again it would be refused again"
    assert metadata.leaders == {("a", 0): 1} and metadata.partition_counts == {"a": 1}
    assert set(metadata.refused) == {"b"}


def test_a_refused_topic_not_asked_for_does_not_fail_a_refresh() -> None:
    """A producer's topics stay described for metadata.max.idle.ms: a refused one among them
    does not fail the refresh another topic's send() asks."""
    stub = DescribingStub("a")
    metadata = metadata_over(stub, topic_idle_ms=300_000)
    with pytest.raises(AuthorizationError):
        metadata.refresh(["b"])
    metadata.refresh(["a"])  # b is still described (used), and still refused: no raise
    assert stub.asked == [["b"], ["a", "b"]]
    assert metadata.partition_counts == {"a": 1} and set(metadata.refused) == {"b"}
    assert metadata.partition_count("a", 5) == 1


def test_a_kept_topic_refused_raises_from_every_refresh() -> None:
    """A consumer's assignment is kept: a refresh of it raises the refusal (poll() then does)."""
    metadata = metadata_over(DescribingStub("a"))
    metadata.keep(lambda: ["a", "b"])
    with pytest.raises(AuthorizationError) as raised:
        metadata.refresh()
    assert raised.value.topic == "b"


def test_partition_count_of_a_refused_topic_raises_after_one_read() -> None:
    stub = DescribingStub()
    metadata = metadata_over(stub)
    with pytest.raises(AuthorizationError) as raised:
        metadata.partition_count("b", timeout_s=60)
    assert raised.value.resource == "topic:b"
    assert len(stub.asked) == 1


def test_admin_raises_authorization_error_naming_the_topic_and_keeps_every_error() -> None:
    unknown = c.DescribeTopicsResponse.Topic(
        name="gone",
        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # type: ignore[arg-type]
        error_message="topic 'gone' does not exist",
    )
    ok = c.DescribeTopicsResponse.Topic(name="a")
    with pytest.raises(AuthorizationError) as raised:
        raise_first([ok, refused_topic("b"), unknown])
    assert (raised.value.code, raised.value.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b")
    assert set(raised.value.errors) == {"b", "gone"}
    assert raised.value.errors["gone"].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeCluster, list[str]]:
    """The fake cluster, whose metadata refuses every topic but `events` as a refresh does."""
    cluster = FakeCluster("events", partitions=1, brokers=1)
    cluster.install(monkeypatch)
    return cluster, []


def refuse_all_but_events(cluster: FakeCluster, asked: list[str]) -> None:
    assert cluster.metadata is not None
    counted = cluster.metadata.partition_count

    def partition_count(topic: str, timeout_s: float) -> int:
        asked.append(topic)
        if topic == "events":
            return counted(topic, timeout_s)
        raise AuthorizationError(
            REFUSAL.format(topic), ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"topic:{topic}"
        )

    cluster.metadata.partition_count = partition_count  # type: ignore[method-assign]


def test_send_fails_its_future_with_an_authorization_error_naming_the_topic(
    refusing: tuple[FakeCluster, list[str]],
) -> None:
    cluster, asked = refusing
    with Producer({"bootstrap.servers": "fake:9092", "max.block.ms": 120_000}) as producer:
        refuse_all_but_events(cluster, asked)
        error = producer.send("b", b"x").exception(timeout=0)
    assert isinstance(error, AuthorizationError) and isinstance(error, ProduceError)
    assert (error.code, error.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b")
    assert asked == ["b"]


def test_send_many_fails_every_record_of_a_refused_topic_and_does_not_raise(
    refusing: tuple[FakeCluster, list[str]],
) -> None:
    cluster, asked = refusing
    config = {"bootstrap.servers": "fake:9092", "max.block.ms": 120_000, "linger.ms": 0}
    with Producer(config) as producer:
        refuse_all_but_events(cluster, asked)
        refused = producer.send_many("b", [b"1", b"2", b"3"], partitions=[0, None, 0])
        assert refused.done() and refused.failed_count(timeout=0) == 3
        error = refused.exception(timeout=0)
        assert isinstance(error, AuthorizationError) and isinstance(error, ProduceError)
        assert error.topic == "b"
        with pytest.raises(AuthorizationError):
            refused.result(timeout=0)
        with pytest.raises(InvalidRecordError):  # a bad record still raises, refused or not
            producer.send_many("b", [b"1", "not bytes"])  # type: ignore[list-item]
        assert producer.send_many("events", [b"y"]).result(timeout=30) == 1
    assert asked == ["b", "b"]  # events: known already
