"""Goal: with ACLs on, a consumer may not join a group subscribing by name to a topic it may not
DESCRIBE: its poll raises AuthorizationError (TOPIC_AUTHORIZATION_FAILED) naming the topic, and
it is assigned nothing; subscribed to the topics it may read, the same principal joins, is
assigned and reads. Kafka's ConsumerGroupHeartbeat refuses such a subscription alike (KIP-848).
And a principal who may DESCRIBE the group but not its topic gets TOPIC_AUTHORIZATION_FAILED for
it from DescribeGroups, not its members' topics (Kafka's ConsumerGroupDescribe, KAFKA-18813),
while erin, who may, sees her own assignment.

Method: a TLS+authorizer cluster of 1 controller, 1 broker and 1 coordinator (acl_cluster.py:
real processes, killed by PID on the way out); erin holds READ on her group and on topic
"open", nothing on "closed". The super user writes a record to each topic first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from acl_cluster import acl_cluster, allow, as_client, grant, principal, super_user
from cluster_helpers import wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, AuthorizationError, Consumer, KafkaError, Producer
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType

pytestmark = pytest.mark.timeout(240)

GROUP = "erins"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    topics = {"open": (1, 1), "closed": (1, 1)}
    with acl_cluster(tmp_path_factory, "acl-subscribe", coordinators=1, topics=topics) as running:
        with Producer(super_user(running)) as producer:
            for topic in topics:
                producer.send(topic, topic.encode()).result(timeout=30)
        yield running


def test_a_subscription_to_an_undescribable_topic_is_refused_by_name(cluster: LocalCluster):  # type: ignore[no-untyped-def]
    erin = principal("erin")
    grant(
        cluster,
        allow(erin, Operation.READ, ResourceType.GROUP, GROUP),
        allow(erin, Operation.READ, ResourceType.TOPIC, "open"),
    )
    config = {**as_client(cluster, "erin"), "group.id": GROUP, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.subscribe(["open", "closed"])
        deadline = time.monotonic() + 60
        with pytest.raises(AuthorizationError) as refused:
            while time.monotonic() < deadline:
                consumer.poll(1.0)
        assert refused.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "may not DESCRIBE the subscribed topic(s) closed" in str(refused.value)
        assert erin in str(refused.value)
        assert not consumer.assignment()

    with Consumer(config) as consumer:
        consumer.subscribe(["open"])
        values: list[bytes] = []

        def read() -> bool:
            values.extend(record.value for record in consumer.poll(1.0))
            return bool(values)

        wait_until("erin reads the topic she may", read, timeout_s=60)
        assert values == [b"open"]

        frank = principal("frank")
        grant(cluster, allow(frank, Operation.DESCRIBE, ResourceType.GROUP, GROUP))
        with Admin(as_client(cluster, "frank")) as admin:

            def refused() -> KafkaError | None:
                try:
                    admin.describe_consumer_groups([GROUP])
                except KafkaError as error:
                    if error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                        return error
                    if error.code != ErrorCode.GROUP_AUTHORIZATION_FAILED:  # not applied yet
                        raise
                return None

            error = wait_until("frank refused the group's description", refused, timeout_s=30)
            assert "open" not in str(error), "the refusal must not name the hidden topic"
        with Admin(as_client(cluster, "erin")) as admin:
            grant(cluster, allow(erin, Operation.DESCRIBE, ResourceType.GROUP, GROUP))
            wait_until(
                "erin sees her group's assignment",
                lambda: _assigned_topics(admin) == {"open"},
                timeout_s=30,
            )


def _assigned_topics(admin: Admin) -> set[str]:
    try:
        [group] = admin.describe_consumer_groups([GROUP]).values()
    except KafkaError:
        return set()
    return {topic for member in group.members for topic, _partition in member.assignment}
