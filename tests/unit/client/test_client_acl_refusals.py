"""Goal: a client the cluster's ACLs refuse fails at once with AuthorizationError (Kafka's
Topic/Group/Cluster/TransactionalIdAuthorizationException), carrying the code and resource the
server put in the trailing metadata (`samsa-error-code`, `samsa-resource`), instead of retrying
the refused call until its deadline: a metadata read (60 s, then NoBrokersAvailable, before), a
group request, a heartbeat (the next poll() raises), a fetch (poll() raises), a produce (the
refused topic's batches fail with ProduceError TOPIC_AUTHORIZATION_FAILED; the others go on),
and a transactional producer's refusal ends its transaction (abortable) or the producer (fatal:
a transactional id or the cluster refused), as Kafka's TransactionManager does.

Method: in-process fakes that refuse as the authorizer does (PERMISSION_DENIED + the trailing
metadata, fake_produce_cluster.acl_refusal); each path must give up after one call (the fakes
count them), not after a deadline; no network, no timing asserts.
"""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest
from fake_produce_cluster import FakeCluster, acl_refusal

from samsa.client import AuthorizationError, ProduceError, Producer
from samsa.client.channels import AioChannels, Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.controller_calls import ControllerCalls
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver, now_ms
from samsa.client.group_member import MemberState, Subscription
from samsa.client.rebalance import member_error
from samsa.client.refusals import authorization_error
from samsa.client.transaction_client import TransactionClient
from samsa.client.transaction_manager import TransactionManager, TxnState
from samsa.common.errors import ErrorCode
from samsa.common.fetch_link import FetchFailed
from samsa.common.request_stream import StreamBrokenError

GROUP_CONFIG = ConsumerConfig.from_dict({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
T0 = ("t", 0)


def test_the_trailing_metadata_names_the_code_and_the_resource() -> None:
    refused = authorization_error(acl_refusal("30", "group:g"))
    assert isinstance(refused, AuthorizationError)
    assert (refused.code, refused.resource, refused.retriable) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        "group:g",
        False,
    )
    assert "User:bob may not WRITE group:g" in str(refused)
    assert authorization_error(acl_refusal("29", "topic:orders")).topic == "orders"  # type: ignore[union-attr]
    # A server that says nothing more (an older one): the cluster refused.
    bare = grpc.aio.AioRpcError(
        grpc.StatusCode.PERMISSION_DENIED, grpc.aio.Metadata(), grpc.aio.Metadata(), "no"
    )
    assert authorization_error(bare).code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # type: ignore[union-attr]
    unavailable = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down"
    )
    assert authorization_error(unavailable) is None


class RefusingStub:
    """Refuses every call with the authorizer's answer; counts them."""

    def __init__(self, code: str, resource: str) -> None:
        self.calls = 0
        self.refusal = acl_refusal(code, resource)

    def __getattr__(self, method: str):
        def call(request: object, timeout: float = 0, **_: object) -> object:
            self.calls += 1
            raise self.refusal

        return call


def test_a_refused_metadata_read_raises_at_once() -> None:
    stub = RefusingStub("29", "topic:orders")
    metadata = ClusterMetadata(["a:1", "b:2"], Channels())
    metadata.stub = lambda endpoint: stub  # type: ignore[method-assign,assignment,return-value]
    with pytest.raises(AuthorizationError) as raised:
        metadata.describe_topics(["orders"], 0, timeout_s=30)
    assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert raised.value.resource == "topic:orders"
    assert stub.calls == 1, "asked again, or of the other server: it would be refused again"


class AsyncRefusingStub(RefusingStub):
    def __getattr__(self, method: str):
        async def call(request: object, timeout: float = 0, **_: object) -> object:
            self.calls += 1
            raise self.refusal

        return call


def group_driver(stub: RefusingStub) -> GroupDriver:
    driver = GroupDriver(
        GROUP_CONFIG,
        threading.Lock(),
        FetchState(GROUP_CONFIG),
        ["127.0.0.1:1"],
        AioChannels(),
        lambda: None,
    )
    driver._coordinator._endpoint = "coordinator"
    driver._coordinator.stub = lambda endpoint: stub  # type: ignore[method-assign,assignment,return-value]
    return driver


def test_a_refused_group_request_raises_at_once() -> None:
    stub = AsyncRefusingStub("30", "group:g")
    driver = group_driver(stub)
    with pytest.raises(AuthorizationError) as raised:
        asyncio.run(driver.commit({T0: OffsetAndMetadata(5)}))
    assert raised.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert stub.calls == 1


def test_a_refused_heartbeat_fails_the_member_and_poll_raises_it() -> None:
    stub = AsyncRefusingStub("30", "group:g")
    driver = group_driver(stub)
    driver.join(Subscription(topics=frozenset({"t"})))

    async def one_heartbeat() -> None:
        driver._wake = asyncio.Event()
        request = driver.member.heartbeat_request(now_ms())
        assert request is not None
        await driver._heartbeat("coordinator", request)

    asyncio.run(one_heartbeat())
    assert stub.calls == 1
    assert driver.member.state is MemberState.FATAL, "not sent again: it would be refused again"
    error = member_error(driver.member)
    assert isinstance(error, AuthorizationError)
    assert error.code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_a_refused_fetch_is_raised_by_poll_not_fetched_again() -> None:
    calls: list[object] = []

    class Metadata:
        def __init__(self) -> None:
            self.leaders = {T0: 1}
            self.leader_epochs = {T0: 0}
            self.topic_ids: dict[str, bytes] = {}
            self.endpoints = {1: "broker-1"}

        def needs_refresh(self) -> bool:
            return False

        def mark_stale(self) -> None:
            pass

        def keep(self, topics: object) -> None:
            pass

    class Link:
        async def fetch(self, channel: object, request: object, timeout_s: float) -> object:
            calls.append(request)
            trailing = (("samsa-error-code", "29"), ("samsa-resource", "topic:t"))
            raise FetchFailed(grpc.StatusCode.PERMISSION_DENIED, "may not READ", False, trailing)

        def close(self) -> None:
            pass

    async def main() -> Exception | None:
        config = {"bootstrap.servers": "localhost:1", "auto.offset.reset": "earliest"}
        driver = ConsumerDriver(ConsumerConfig.from_dict(config), Metadata(), lambda: None)  # type: ignore[arg-type]
        driver._new_link = Link  # type: ignore[assignment]
        await driver.start()
        try:
            with driver.lock:
                driver.state.assign([T0])
                driver.state.seek(T0, 3)
            driver.wake()
            for _ in range(50):
                await asyncio.sleep(0)
            with driver.lock:
                return driver.state.pop_error()
        finally:
            await driver.stop()

    error = asyncio.run(main())
    assert isinstance(error, AuthorizationError), error
    assert (error.code, error.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "t")
    assert len(calls) == 1, "not fetched again until poll() raised the refusal"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster("events", partitions=1, brokers=1)
    fake.partition_counts["secret"] = 1
    fake.leaders[("secret", 0)] = 1
    fake.brokers[1].refused_topics.add("secret")
    fake.install(monkeypatch)
    return fake


def test_a_refused_topic_fails_its_records_at_once_and_others_go_on(cluster: FakeCluster) -> None:
    config = {"bootstrap.servers": "fake:9092", "linger.ms": 0, "delivery.timeout.ms": 120_000}
    with Producer(config) as producer:
        refused = producer.send("secret", b"x")
        with pytest.raises(ProduceError) as raised:
            refused.result(timeout=30)
        assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "may not WRITE topic:secret" in str(raised.value)
        assert producer.send("events", b"y").result(timeout=30).offset == 0
    assert cluster.brokers[1].refusals == 1, "the refused batch is not retried"


@pytest.mark.parametrize(
    ("code", "state"),
    [
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, TxnState.ABORTABLE_ERROR),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, TxnState.ABORTABLE_ERROR),
        (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TxnState.FATAL_ERROR),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, TxnState.FATAL_ERROR),
    ],
)
def test_a_transaction_refused_aborts_or_ends_the_producer(
    code: ErrorCode, state: TxnState
) -> None:
    txn = TransactionManager("tx-1")
    txn.on_initialized()
    txn.begin()
    error: KafkaError = AuthorizationError("refused", code)
    txn.on_error(error)
    assert txn.state is state


def test_a_topic_whose_metadata_is_refused_fails_the_future_not_send(
    cluster: FakeCluster,
) -> None:
    """Kafka's send() answers a failed future (TopicAuthorizationException) for a topic whose
    metadata the ACLs refuse; it does not raise, nor wait max.block.ms."""
    asked: list[str] = []

    def refused_count(topic: str, timeout_s: float) -> int:
        asked.append(topic)
        raise authorization_error(acl_refusal("29", f"topic:{topic}"))  # type: ignore[misc]

    with Producer({"bootstrap.servers": "fake:9092", "max.block.ms": 120_000}) as producer:
        assert cluster.metadata is not None
        cluster.metadata.partition_count = refused_count  # type: ignore[method-assign]
        future = producer.send("hidden", b"x")
        with pytest.raises(ProduceError) as raised:
            future.result(timeout=0)
    assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert asked == ["hidden"]


def test_a_refused_admin_write_raises_at_once() -> None:
    stub = RefusingStub("31", "cluster:kafka-cluster")
    metadata = ClusterMetadata(["a:1", "b:2"], Channels())
    metadata.stub = lambda endpoint: stub  # type: ignore[method-assign,assignment,return-value]
    calls = ControllerCalls(metadata, request_timeout_ms=30_000, api_timeout_ms=60_000)
    with pytest.raises(AuthorizationError) as raised:
        calls.write("CreateAcls", object())
    assert raised.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert stub.calls == 1


def test_a_refused_transaction_stream_message_raises_at_once() -> None:
    """The coordinator's refusal ends the TransactionStream: its trailing metadata reaches the
    caller through StreamBrokenError (request_stream.py), and the call is not asked again."""
    refusal = acl_refusal("53", "transactional-id:tx-1")
    sent: list[str] = []

    class Client(TransactionClient):
        async def _coordinator(self, key_type: int, key: str, deadline: float) -> str | None:
            return "coordinator"

        def _stream_to(self, endpoint: str):  # type: ignore[override]
            class Stream:
                async def send(self, request: object, timeout_s: float) -> object:
                    sent.append(endpoint)
                    raise StreamBrokenError("refused", refusal.code(), refusal)

            return Stream()

    client = Client(AioChannels(), lambda: ["a:1"], "tx-1", 60_000)
    client._streamed = True  # as without tracing

    async def main() -> None:
        deadline = asyncio.get_running_loop().time() + 60
        await client.end((7, 0), True, deadline)  # EndTxn: on the stream

    with pytest.raises(AuthorizationError) as raised:
        asyncio.run(main())
    assert raised.value.code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert sent == ["coordinator"]
