"""Listing calls answer what the caller may DESCRIBE, as Kafka's, on a TLS+authorizer cluster.

Goal: alice, granted DESCRIBE on the topics, groups and transactional ids prefixed `a-`
(PREFIXED ACLs), lists only those: Admin.list_topics through the controller, DescribeTopics
through a broker page by page (filtered before paging: every page full of her topics, the
cursor leading on), ListGroups, ListTransactions, and all of a group's offsets and lag cover
only her topics; bob, with no ACL, lists nothing and is refused nothing; the super user (the
CLI's certificate) sees everything. DescribeTopics naming topics is answered per topic, as
Kafka's Metadata, by the controller and by a broker alike: [a-1, b-1, b-nope] answers a-1, and
TOPIC_AUTHORIZATION_FAILED for b-1 and for b-nope, which does not exist (the same refusal, so
that names cannot be probed); Admin.describe_topics raises AuthorizationError naming b-1.

Method: 1 controller, 1 broker and 1 coordinator started by acl_cluster.py (TLS and the
authorizer on, real processes stopped by PID also on failure); the super user makes topics
a-1, a-2, b-1, groups a-g and b-g (offsets committed from outside them) and transactional ids
a-tx and b-tx; alice's and bob's certificates are issued from the cluster's CA. Each process
applies a new ACL once it has replayed it: waited for, never slept on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from acl_cluster import acl_cluster, allow, as_client, channel_as, principal, super_user
from cluster_helpers import wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, AuthorizationError, Producer
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import AclBinding, Operation, PatternType, ResourceType
from samsa.v1 import controller_pb2, controller_pb2_grpc

pytestmark = pytest.mark.timeout(300)

ALICE = principal("alice")
TOPICS = {"a-1": (2, 1), "a-2": (1, 1), "b-1": (1, 1)}
GROUPS = ["a-g", "b-g"]
TRANSACTIONAL_IDS = ["a-tx", "b-tx"]


def prefixed(resource_type: ResourceType, prefix: str) -> AclBinding:
    return allow(ALICE, Operation.DESCRIBE, resource_type, prefix, PatternType.PREFIXED)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with acl_cluster(tmp_path_factory, "acl-listing", 1, 1, 1, TOPICS) as running:
        with Admin(super_user(running)) as admin:
            for group in GROUPS:
                admin.alter_consumer_group_offsets(group, {("a-1", 0): 1, ("b-1", 0): 2})
            bindings = [
                prefixed(kind, "a-")
                for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
            ]
            assert set(admin.create_acls(bindings).values()) == {None}
        for transactional_id in TRANSACTIONAL_IDS:
            config = {**super_user(running), "transactional.id": transactional_id}
            with Producer(config) as producer:
                producer.init_transactions(30)
        yield running


def listings(config: dict[str, object]) -> tuple[list[str], list[str], list[str]]:
    """(topics, groups, transactional ids) as `config`'s principal lists them."""
    with Admin(config) as admin:
        return (
            admin.list_topics(),
            [group.group_id for group in admin.list_consumer_groups()],
            [listed.transactional_id for listed in admin.list_transactions()],
        )


def test_alice_lists_only_what_she_may_describe(cluster: LocalCluster) -> None:
    alice = as_client(cluster, "alice")
    expected = (["a-1", "a-2"], ["a-g"], ["a-tx"])
    # Her grants reach every process through the metadata log: wait for all three listings.
    seen: list[tuple[list[str], list[str], list[str]]] = []

    def listed_as_expected() -> bool:
        seen.append(listings(alice))
        return seen[-1] == expected

    try:
        wait_until("alice's grants applied", listed_as_expected, timeout_s=60)
    except AssertionError:
        assert seen[-1:] == [expected]  # what she was shown instead
        raise
    with Admin(alice) as admin:
        offsets = admin.list_consumer_group_offsets("a-g")
        assert {(tp[0], tp[1]) for tp in offsets} == {("a-1", 0)}
        lag = admin.describe_consumer_group_lag("a-g")
        assert [(row.topic, row.partition) for row in lag] == [("a-1", 0)]


def test_a_brokers_pages_hold_only_her_topics(cluster: LocalCluster) -> None:
    alice = as_client(cluster, "alice")
    wait_until("alice's grants applied", lambda: listings(alice)[0] == ["a-1", "a-2"])
    channel = channel_as(cluster, cluster.spec.brokers[0].endpoint, "alice")
    stub = controller_pb2_grpc.ControllerServiceStub(channel)
    request = controller_pb2.DescribeTopicsRequest(partition_limit=1)
    pages = []
    for _ in range(10):
        answer = stub.DescribeTopics(request, timeout=10)
        pages.append([(t.name, p.partition) for t in answer.topics for p in t.partitions])
        if not answer.HasField("next_cursor"):
            break
        request.cursor.CopyFrom(answer.next_cursor)
    channel.close()
    assert pages == [[("a-1", 0)], [("a-1", 1)], [("a-2", 0)]]


def test_bob_lists_nothing_and_the_super_user_everything(cluster: LocalCluster) -> None:
    assert listings(as_client(cluster, "bob")) == ([], [], [])
    topics, groups, transactional_ids = listings(super_user(cluster))
    assert topics == sorted(TOPICS)
    assert groups == GROUPS
    assert transactional_ids == TRANSACTIONAL_IDS


def test_named_topics_are_answered_per_topic(cluster: LocalCluster) -> None:
    alice = as_client(cluster, "alice")
    wait_until("alice's grants applied", lambda: listings(alice)[0] == ["a-1", "a-2"])
    named = controller_pb2.DescribeTopicsRequest(names=["a-1", "b-1", "b-nope"])
    for endpoint in (cluster.spec.controllers[0].endpoint, cluster.spec.brokers[0].endpoint):
        channel = channel_as(cluster, endpoint, "alice")
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        described, refused, unknown = stub.DescribeTopics(named, timeout=10).topics
        channel.close()
        assert (described.name, described.error_code) == ("a-1", ErrorCode.NONE), endpoint
        assert [p.partition for p in described.partitions] == [0, 1]
        for topic in (refused, unknown):
            assert topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, (endpoint, topic)
            assert topic.error_message.startswith(
                f"{ALICE} may not DESCRIBE topic {topic.name} ("
            ), topic
            assert not topic.partitions and not topic.topic_id
        assert unknown.error_message == refused.error_message.replace("b-1", "b-nope")
    with Admin(alice) as admin, pytest.raises(AuthorizationError) as raised:
        admin.describe_topics(["a-1", "b-1"])
    assert (raised.value.code, raised.value.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "b-1")
