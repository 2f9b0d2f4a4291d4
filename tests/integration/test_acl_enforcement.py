"""ACLs enforced end to end on a local cluster made with `samsa up --tls --authorizer`.

Goal: every process decides each call against the ACLs of its own metadata image, by the
principal of the caller's client certificate: alice, granted WRITE and DESCRIBE on `orders`,
produces to it and is refused reading it and producing to `other` (Produce and Fetch answer
those per partition, TOPIC_AUTHORIZATION_FAILED, as Kafka does); once the super user (the
CLI's certificate) grants her READ through Admin.create_acls, the grant reaches the brokers
through the metadata log and she reads; bob, with no ACL, is refused everything but
DescribeCluster (listing every topic shows him none, and naming one answers it
TOPIC_AUTHORIZATION_FAILED, as Kafka's Metadata does); a group consumer needs READ on its
group too (the coordinator decides), and a commit stores the topics it may READ and refuses
the others per topic. The cluster's own traffic (replication, the coordinator's
__consumer_offsets, registration) keeps working with no ACL for the processes' certificates:
their membership proofs skip the ACLs.

Method: 1 controller, 2 brokers and 1 coordinator started by acl_cluster.py (TLS and the
authorizer on, real processes stopped by PID also on failure); alice's and bob's certificates
issued from the cluster's CA; the SDK for what is allowed; raw gRPC stubs with the same
certificates for refusals, to read the status and message as they are sent (the SDK's
AuthorizationError is test_acl_client_errors.py's). A new ACL is waited for, never slept on.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from acl_cluster import acl_cluster, allow, as_client, channel_as, grant, principal, super_user
from cluster_helpers import wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, AuthorizationError, Consumer, Producer
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.metadata.acls import Operation, ResourceType
from samsa.v1 import (
    broker_pb2,
    broker_pb2_grpc,
    controller_pb2,
    controller_pb2_grpc,
    coordinator_pb2,
    coordinator_pb2_grpc,
    transactions_pb2,
    transactions_pb2_grpc,
)

pytestmark = pytest.mark.timeout(300)

ALICE = principal("alice")
RECORDS = 10
TOPICS = {"orders": (1, 2), "other": (1, 1), "events": (1, 1)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with acl_cluster(tmp_path_factory, "acl-cluster", 1, 2, 1, TOPICS) as running:
        yield running


def refusal(call) -> str:
    """The call's refusal, "<code>: <details>": the whole call's (gRPC's status), or for the
    calls answered per topic (Produce, Fetch: per partition; CreateTopics, DeleteTopics) the
    first refused one's "TOPIC_AUTHORIZATION_FAILED: <message>"; "OK" when it was answered
    without either."""
    try:
        answer = call()
    except grpc.RpcError as error:
        return f"{error.code().name}: {error.details()}"  # type: ignore[attr-defined]
    for topic in getattr(answer, "topics", ()):
        for result in [topic, *getattr(topic, "partitions", ())]:
            if getattr(result, "error_code", 0) == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                return f"TOPIC_AUTHORIZATION_FAILED: {result.error_message}"
    return "OK"


def broker_stub(cluster: LocalCluster, name: str, leader_of: str = "orders"):
    """A stub to the leader of `leader_of`'s partition 0, as `name`."""
    with Admin(super_user(cluster)) as admin:
        leader = admin.describe_topics([leader_of])[leader_of].partitions[0].leader
    endpoint = next(b.endpoint for b in cluster.spec.brokers if b.broker_id == leader)
    return broker_pb2_grpc.BrokerServiceStub(channel_as(cluster, endpoint, name))


def fetch_request(topic: str) -> broker_pb2.FetchRequest:
    return broker_pb2.FetchRequest(
        replica_id=-1,
        max_bytes=1 << 20,
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name=topic,
                partitions=[
                    broker_pb2.FetchRequest.PartitionData(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )


def produce_request(topic: str) -> broker_pb2.ProduceRequest:
    partition = broker_pb2.ProduceRequest.PartitionData(partition=0, records=build_batch([b"x"]))
    data = broker_pb2.ProduceRequest.TopicData(name=topic, partitions=[partition])
    return broker_pb2.ProduceRequest(acks=1, timeout_ms=5000, topics=[data])


def test_alice_produces_where_granted_and_reads_once_granted(cluster: LocalCluster) -> None:
    grant(
        cluster,
        allow(ALICE, Operation.WRITE, ResourceType.TOPIC, "orders"),
        allow(ALICE, Operation.DESCRIBE, ResourceType.TOPIC, "orders"),
    )
    alice = as_client(cluster, "alice")

    def produced() -> bool:
        try:
            with Producer({**alice, "acks": "all", "max.block.ms": 5000}) as producer:
                futures = [producer.send("orders", b"o%d" % n) for n in range(RECORDS)]
                producer.flush(30)
            return [f.result(timeout=0).offset for f in futures] == list(range(RECORDS))
        except Exception:  # the grant not yet applied where the producer asked
            return False

    # Idempotent (the SDK's default): InitProducerId allowed by WRITE on some topic (KIP-679).
    wait_until("alice's grant applied and her records written", produced, timeout_s=60)
    stub = broker_stub(cluster, "alice")
    refused = refusal(lambda: stub.Fetch(fetch_request("orders"), timeout=10))
    assert refused == (  # answered per partition, as Kafka's Fetch
        f"TOPIC_AUTHORIZATION_FAILED: {ALICE} may not READ topic orders (no ALLOW ACL, or a DENY "
        "one; "
        f"samsa acls --add --allow-principal {ALICE} --operation Read --topic orders)"
    )
    other = broker_stub(cluster, "alice", leader_of="other")
    refused = refusal(lambda: other.Produce(produce_request("other"), timeout=10))
    assert refused.startswith(f"TOPIC_AUTHORIZATION_FAILED: {ALICE} may not WRITE topic other (")

    grant(cluster, allow(ALICE, Operation.READ, ResourceType.TOPIC, "orders"))
    # The grant travels through the metadata log to the leader: wait for it there.
    wait_until(
        "alice's READ applied on the leader",
        lambda: refusal(lambda: stub.Fetch(fetch_request("orders"), timeout=10)) == "OK",
    )
    with Consumer({**alice, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([("orders", 0)])
        values: list[bytes] = []

        def read_all() -> bool:
            values.extend(record.value for record in consumer.poll(1.0))
            return len(values) >= RECORDS

        wait_until("alice reads orders", read_all)
    assert values[:RECORDS] == [b"o%d" % n for n in range(RECORDS)]


def test_bob_is_refused_everything_but_describe_cluster(cluster: LocalCluster) -> None:
    controller = channel_as(cluster, cluster.spec.controllers[0].endpoint, "bob")
    stub = controller_pb2_grpc.ControllerServiceStub(controller)
    described = stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=10)
    assert len(described.brokers) == 2
    bob = principal("bob")
    # Every topic: filtered, not refused (test_acl_listing.py); bob may describe none. Named:
    # answered, TOPIC_AUTHORIZATION_FAILED for the topic (Kafka's Metadata).
    assert not stub.DescribeTopics(controller_pb2.DescribeTopicsRequest(), timeout=10).topics
    named = controller_pb2.DescribeTopicsRequest(names=["orders"])
    (orders,) = stub.DescribeTopics(named, timeout=10).topics
    assert orders.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, orders
    assert orders.error_message.startswith(f"{bob} may not DESCRIBE topic orders ("), orders
    assert not orders.partitions and not orders.topic_id
    calls = {
        "CREATE topic bobs": lambda: stub.CreateTopics(
            controller_pb2.CreateTopicsRequest(
                topics=[controller_pb2.CreateTopicsRequest.Topic(name="bobs", num_partitions=1)]
            ),
            timeout=10,
        ),
        "DELETE topic orders": lambda: stub.DeleteTopics(
            controller_pb2.DeleteTopicsRequest(names=["orders"]), timeout=10
        ),
        "ALTER cluster": lambda: stub.CreateAcls(controller_pb2.CreateAclsRequest(), timeout=10),
    }
    broker = broker_stub(cluster, "bob")
    calls |= {
        "WRITE topic orders": lambda: broker.Produce(produce_request("orders"), timeout=10),
        "READ topic orders": lambda: broker.Fetch(fetch_request("orders"), timeout=10),
        "IDEMPOTENT_WRITE cluster": lambda: broker.InitProducerId(
            broker_pb2.InitProducerIdRequest(), timeout=10
        ),
    }
    # Answered per topic (Produce and Fetch per partition), as Kafka does.
    per_partition = {"WRITE topic orders", "READ topic orders", "CREATE topic bobs"}
    per_partition.add("DELETE topic orders")
    for what, call in calls.items():
        answer = refusal(call)
        code = "TOPIC_AUTHORIZATION_FAILED" if what in per_partition else "PERMISSION_DENIED"
        assert answer.startswith(f"{code}: {bob} may not {what}"), (what, answer)
    # A member-only call is refused without the cluster's proof, whatever the ACLs.
    answer = refusal(lambda: stub.FetchMetadata(controller_pb2.FetchMetadataRequest(), timeout=10))
    assert answer.startswith(f"PERMISSION_DENIED: {bob} may not call FetchMetadata")


def test_a_group_consumer_needs_read_on_its_group(cluster: LocalCluster) -> None:
    with Producer({**super_user(cluster), "acks": "all"}) as producer:
        for n in range(RECORDS):
            producer.send("events", b"e%d" % n)
        producer.flush(30)
    grant(
        cluster,
        allow(principal("carol"), Operation.READ, ResourceType.TOPIC, "events"),
    )
    carol = as_client(cluster, "carol")
    coordinator = channel_as(cluster, cluster.spec.coordinators[0].endpoint, "carol")
    groups = coordinator_pb2_grpc.GroupCoordinatorServiceStub(coordinator)
    heartbeat = coordinator_pb2.ConsumerGroupHeartbeatRequest(
        group_id="carols", member_epoch=0, rebalance_timeout_ms=30000,
        subscription=coordinator_pb2.ConsumerGroupSubscription(topic_names=["events"]),
    )  # fmt: skip
    answer = refusal(lambda: groups.ConsumerGroupHeartbeat(heartbeat, timeout=10))
    assert answer.startswith(
        "PERMISSION_DENIED: User:CN=carol,O=samsa may not READ group carols ("
    ), answer
    grant(cluster, allow(principal("carol"), Operation.READ, ResourceType.GROUP, "carols"))
    wait_until(
        "carol's group grant applied on the coordinator",
        lambda: refusal(lambda: groups.ConsumerGroupHeartbeat(heartbeat, timeout=10)) == "OK",
    )
    config = {**carol, "group.id": "carols-readers", "auto.offset.reset": "earliest"}
    grant(
        cluster,
        allow(principal("carol"), Operation.READ, ResourceType.GROUP, "carols-readers"),
    )
    with Consumer(config) as consumer:
        consumer.subscribe(["events"])
        values: list[bytes] = []

        def read_all() -> bool:
            values.extend(record.value for record in consumer.poll(1.0))
            return len(values) >= RECORDS

        wait_until("carol reads events in her group", read_all, timeout_s=60)
        consumer.commit()  # OffsetCommit: READ on the group and on the topic
    assert sorted(values) == sorted(b"e%d" % n for n in range(RECORDS))


def test_a_commit_stores_the_topics_granted_and_refuses_the_others(
    cluster: LocalCluster,
) -> None:
    """Kafka's OffsetCommit answers per topic: hana, with READ on her group and on `events` but
    not on `orders`, commits both; `events` is stored, `orders` is refused naming it."""
    grant(
        cluster,
        allow(principal("hana"), Operation.READ, ResourceType.TOPIC, "events"),
        allow(principal("hana"), Operation.READ, ResourceType.GROUP, "hanas"),
    )
    offsets = {("events", 0): 3, ("orders", 0): 1}
    with Admin(as_client(cluster, "hana")) as admin:

        def refused_orders_only() -> AuthorizationError | None:
            try:
                admin.alter_consumer_group_offsets("hanas", offsets)
            except AuthorizationError as error:
                return error if error.topic == "orders" else None
            return None

        error = wait_until("hana's grants applied on the coordinator", refused_orders_only)
    assert list(error.errors) == [("orders", 0)], error.errors
    assert "User:CN=hana,O=samsa may not READ topic orders" in str(error), error
    with Admin(super_user(cluster)) as admin:
        stored = admin.list_consumer_group_offsets("hanas")
    assert {tp: value.offset for tp, value in stored.items()} == {("events", 0): 3}
    with Admin(as_client(cluster, "hana")) as admin, pytest.raises(AuthorizationError) as raised:
        admin.alter_consumer_group_offsets("not-hanas", {("events", 0): 1})
    assert raised.value.resource == "group:not-hanas", raised.value


def test_a_transactional_producer_needs_write_on_its_id(cluster: LocalCluster) -> None:
    """Its id and its topic granted, dave commits a transaction: the coordinator decides his
    calls, while the cluster's own steps (the broker's check with the coordinator, markers,
    the transaction log) pass on their membership proofs; read_committed sees it all."""
    dave = principal("dave")
    with Admin(super_user(cluster)) as admin:
        admin.create_topic("ledger", 1, 1)
    grant(
        cluster,
        allow(dave, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, "dave-tx"),
        allow(dave, Operation.WRITE, ResourceType.TOPIC, "ledger"),
        allow(dave, Operation.DESCRIBE, ResourceType.TOPIC, "ledger"),
    )
    config = {**as_client(cluster, "dave"), "transactional.id": "dave-tx"}

    def committed() -> bool:
        try:
            with Producer(config) as producer:
                producer.init_transactions(10)
                producer.begin_transaction()
                for n in range(RECORDS):
                    producer.send("ledger", b"l%d" % n)
                producer.commit_transaction(30)
            return True
        except Exception:  # the grants not yet applied where the producer asked
            return False

    wait_until("dave's transaction committed", committed, timeout_s=60)
    reader = {**super_user(cluster), "isolation.level": "read_committed"}
    with Consumer({**reader, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([("ledger", 0)])
        values: list[bytes] = []

        def read_all() -> bool:
            values.extend(record.value for record in consumer.poll(1.0))
            return len(values) >= RECORDS

        wait_until("the committed transaction read", read_all)
    assert values[:RECORDS] == [b"l%d" % n for n in range(RECORDS)]
    coordinator = channel_as(cluster, cluster.spec.coordinators[0].endpoint, "bob")
    transactions = transactions_pb2_grpc.TransactionCoordinatorServiceStub(coordinator)
    answer = refusal(
        lambda: transactions.InitTransactions(
            transactions_pb2.InitTransactionsRequest(
                transactional_id="dave-tx", transaction_timeout_ms=10000
            ),
            timeout=10,
        )
    )
    assert answer.startswith(
        "PERMISSION_DENIED: User:CN=bob,O=samsa may not WRITE transactional id dave-tx ("
    ), answer


def test_a_broker_decides_the_admin_calls_it_forwards(cluster: LocalCluster) -> None:
    """KIP-590: the broker, which sees the client's certificate, decides; its forwarded call to
    the controller carries its membership proof, so the broker's own principal (which has no
    ACL) is never checked there."""
    broker = cluster.spec.brokers[0].endpoint
    config = {"bootstrap.servers": broker, **cluster.spec.client_security(cluster.data_dir)}
    with Admin(config) as admin:  # the super user, through a broker only
        admin.create_topic("forwarded", 1, 1)
        assert "forwarded" in admin.list_topics()
    stub = controller_pb2_grpc.ControllerServiceStub(channel_as(cluster, broker, "bob"))
    answer = refusal(
        lambda: stub.DeleteTopics(
            controller_pb2.DeleteTopicsRequest(names=["forwarded"]), timeout=10
        )
    )
    assert answer.startswith(  # answered per topic by the broker, nothing forwarded for it
        "TOPIC_AUTHORIZATION_FAILED: User:CN=bob,O=samsa may not DELETE topic forwarded"
    )
    with Admin(config) as admin:
        assert "forwarded" in admin.list_topics()
