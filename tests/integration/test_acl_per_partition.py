"""Produce, Fetch and CreateTopics answer an ACL refusal per partition (topic), as Kafka does.

Goal: alice may DESCRIBE, WRITE and READ topic `a`, and only DESCRIBE topic `b`. One producer
sending to both, interleaved over its one stream per broker: every record of `b` fails with the
error that is both AuthorizationError (TOPIC_AUTHORIZATION_FAILED naming `b`, "may not WRITE")
and ProduceError, not retried, while every record of `a` is written, and the producer goes on
writing `a` afterwards. One consumer assigned a-0, a-1 and b-0: poll() raises the
AuthorizationError naming `b` ("may not READ"), never about `a`, and every record of `a` (the
super user's and alice's) is still delivered by the polls around it (Kafka's consumer raises
TopicAuthorizationException from poll and goes on with the other partitions alike). Admin's
create_topics of a topic alice may CREATE and one she may not creates the first and raises the
AuthorizationError naming the second (its `errors` naming only it), which is not created; and
delete_records of a partition of `a` (DELETE granted) and one of `b` deletes a's records and
raises the AuthorizationError naming b-0, whose records stay.

Method: 1 controller and 1 broker started by acl_cluster.py (TLS and the authorizer on, real
processes stopped by PID also on failure); alice's certificate from the cluster's CA; the SDK
Producer and Consumer. The grant reaches the broker through the metadata log: the test waits
for alice's first write to `a` to succeed. Each body has a 60 s timeout; no timing asserts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from acl_cluster import acl_cluster, allow, as_client, grant, principal, super_user
from cluster_helpers import wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    AuthorizationError,
    Consumer,
    KafkaError,
    NewTopic,
    ProduceError,
    Producer,
)
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType

pytestmark = pytest.mark.timeout(240)
BODY_TIMEOUT = pytest.mark.timeout(60, func_only=True)

ALICE = principal("alice")
TOPICS = {"a": (2, 1), "b": (1, 1)}
SENT = 20  # records alice sends to each topic, interleaved


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with acl_cluster(tmp_path_factory, "acl-per-partition", 1, 1, 0, TOPICS) as running:
        with Producer({**super_user(running), "acks": "all"}) as producer:
            for topic, partition in (("a", 0), ("a", 1), ("b", 0)):
                producer.send(topic, b"first", partition=partition).result(timeout=30)
        grant(
            running,
            allow(ALICE, Operation.DESCRIBE, ResourceType.TOPIC, "a"),
            allow(ALICE, Operation.WRITE, ResourceType.TOPIC, "a"),
            allow(ALICE, Operation.READ, ResourceType.TOPIC, "a"),
            allow(ALICE, Operation.DESCRIBE, ResourceType.TOPIC, "b"),
            allow(ALICE, Operation.CREATE, ResourceType.TOPIC, "alices"),
            allow(ALICE, Operation.DELETE, ResourceType.TOPIC, "a"),
        )
        yield running


def written(producer: Producer) -> bool:
    try:
        producer.send("a", b"probe", partition=0).result(timeout=30)
    except KafkaError:  # the grant not yet replayed by the broker
        return False
    return True


@BODY_TIMEOUT
def test_a_producer_fails_the_refused_topic_only_and_goes_on(cluster: LocalCluster) -> None:
    config = {**as_client(cluster, "alice"), "acks": "all", "linger.ms": 5}
    with Producer(config) as producer:
        wait_until("alice's WRITE on a applied", lambda: written(producer))
        futures = [
            (topic, producer.send(topic, b"%d" % n, partition=0))
            for n in range(SENT)
            for topic in ("a", "b")
        ]
        for topic, future in futures:
            error = future.exception(timeout=30)
            if topic == "a":
                assert error is None, error
                continue
            assert isinstance(error, AuthorizationError) and isinstance(error, ProduceError)
            assert (error.code, error.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b")
            assert f"{ALICE} may not WRITE topic b (" in str(error)
        after = [producer.send("a", b"after", partition=1) for _ in range(5)]
        assert all(future.result(timeout=30).offset >= 0 for future in after)


@BODY_TIMEOUT
def test_a_consumer_raises_the_refused_topic_and_reads_the_others(cluster: LocalCluster) -> None:
    with Producer({**as_client(cluster, "alice"), "acks": "all"}) as producer:
        wait_until("alice's WRITE on a applied", lambda: written(producer))
        producer.send("a", b"alice", partition=1).result(timeout=30)
    wanted = {("a", 0, b"first"), ("a", 1, b"first"), ("a", 1, b"alice")}
    config = {**as_client(cluster, "alice"), "auto.offset.reset": "earliest"}
    seen: set[tuple[str, int, bytes]] = set()
    refusals: list[AuthorizationError] = []
    with Consumer(config) as consumer:
        consumer.assign([("a", 0), ("a", 1), ("b", 0)])

        def all_of_a_and_a_refusal() -> bool:
            try:
                for record in consumer.poll(0.5):
                    seen.add((record.topic, record.partition, record.value))
            except AuthorizationError as refused:
                refusals.append(refused)
            return wanted <= seen and bool(refusals)

        wait_until("a's records read and b refused", all_of_a_and_a_refusal, timeout_s=50)
    assert not [record for record in seen if record[0] == "b"]
    for refused in refusals:
        assert (refused.code, refused.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b")
        assert f"{ALICE} may not READ topic b (" in str(refused)


@BODY_TIMEOUT
def test_create_topics_creates_the_allowed_and_refuses_the_other(cluster: LocalCluster) -> None:
    wanted = [NewTopic("alices", 1, 1), NewTopic("denied", 1, 1)]
    with Admin(as_client(cluster, "alice")) as admin:

        def refused_denied_only() -> AuthorizationError | None:
            try:
                admin.create_topics(wanted)
            except AuthorizationError as refused:
                if set(refused.errors) == {"denied"}:  # alices created, or there already
                    return refused
            except KafkaError:  # the grant not yet replayed where the call was decided
                pass
            return None

        refused = wait_until("alices created, denied refused", refused_denied_only)
    assert (refused.code, refused.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "denied")
    assert f"{ALICE} may not CREATE topic denied (nor CREATE cluster" in str(refused)
    with Admin(super_user(cluster)) as admin:
        topics = admin.list_topics()
    assert "alices" in topics and "denied" not in topics


@BODY_TIMEOUT
def test_delete_records_deletes_the_allowed_partition_only(cluster: LocalCluster) -> None:
    with Admin(as_client(cluster, "alice")) as admin:

        def refused_b_only() -> AuthorizationError | None:
            try:
                admin.delete_records({("a", 0): 1, ("b", 0): 1})
            except AuthorizationError as refused:
                if set(refused.errors) == {("b", 0)}:
                    return refused
            except KafkaError:  # the grant not yet replayed by the leader
                pass
            return None

        refused = wait_until("a-0 deleted, b-0 refused", refused_b_only)
    assert (refused.code, refused.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b")
    assert f"{ALICE} may not DELETE topic b (" in str(refused)
    with Admin(super_user(cluster)) as admin:
        starts = admin.list_offsets({("a", 0): "earliest", ("b", 0): "earliest"})
    assert (starts[("a", 0)].offset, starts[("b", 0)].offset) == (1, 0)
