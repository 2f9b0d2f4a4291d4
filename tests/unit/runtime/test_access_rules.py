"""Goal: the rule table (services/runtime/access_rules.py) asks what Kafka asks of each RPC, and
covers every RPC of every Samsa service, so that a new RPC cannot slip past the authorizer.

Method: the pure table, called with real request messages; `decide` grants exactly a given set of
accesses (no authorizer involved); the proto descriptors are walked for the coverage check. Each
method is shown allowed (with the accesses it needs), refused (with one missing), or members-only.
"""

from __future__ import annotations

import pytest

from samsa.metadata.acls import (
    AclBinding,
    Acls,
    AuthorizerSettings,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.services.runtime import access_rules
from samsa.services.runtime.access_rules import ANY_NAME, Access, first_unmet, requirement
from samsa.v1 import broker_pb2 as b
from samsa.v1 import controller_pb2 as c
from samsa.v1 import coordinator_pb2 as g
from samsa.v1 import metadata_pb2 as m
from samsa.v1 import security_pb2 as s
from samsa.v1 import transactions_pb2 as t

Op, R = Operation, ResourceType
CLUSTER = "kafka-cluster"
BROKER = "/samsa.v1.BrokerService/"
CONTROLLER = "/samsa.v1.ControllerService/"
GROUPS = "/samsa.v1.GroupCoordinatorService/"
TXNS = "/samsa.v1.TransactionCoordinatorService/"
LOOKUP = "/samsa.v1.CoordinatorLookupService/"
TOPIC_IDS = {b"\x01" * 16: "by-id"}


def names(topic_id: bytes) -> str | None:
    return TOPIC_IDS.get(topic_id)


def needed(method: str, request: object) -> set[Access] | str:
    """The accesses that are each required (single-alternative needs), or the members-only
    reason; a need with alternatives appears as the tuple."""
    rule = requirement(method, request, names)
    if rule.members_only is not None:
        return "members"
    return {need[0] if len(need) == 1 else need for need in rule.needs}  # type: ignore[misc]


def a(operation: Operation, resource_type: ResourceType, name: str) -> Access:
    return Access(operation, resource_type, name)


def produce(*topics: str, txn: str = "") -> b.ProduceRequest:
    return b.ProduceRequest(
        transactional_id=txn, topics=[b.ProduceRequest.TopicData(name=name) for name in topics]
    )


def fetch(*topics: str, replica_id: int | None = None, topic_id: bytes = b"") -> b.FetchRequest:
    """A consumer's fetch (replica_id unset, as the SDK sends it) unless `replica_id` is given."""
    data = [b.FetchRequest.TopicData(name=name) for name in topics]
    if topic_id:
        data.append(b.FetchRequest.TopicData(topic_id=topic_id))
    return b.FetchRequest(replica_id=replica_id, topics=data)


def producer(txn: str) -> t.TransactionalProducer:
    return t.TransactionalProducer(transactional_id=txn)


CASES: list[tuple[str, object, set[object] | str]] = [
    # SaslService: anyone, before it has a principal at all.
    ("/samsa.v1.SaslService/SaslAuthenticate", s.SaslAuthenticateRequest(), set()),
    # BrokerService
    # Produce and Fetch: each topic decided per partition by the handler (caller.py).
    (BROKER + "Produce", produce("orders", "orders"), set()),
    (BROKER + "Produce", produce("orders", txn="tx"), {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx")}),
    (BROKER + "Produce", produce("__consumer_offsets"), "members"),
    (BROKER + "ProduceStream", b.ProduceStreamRequest(request=produce("a", "b")), set()),
    (BROKER + "Fetch", fetch("orders", topic_id=b"\x01" * 16), set()),
    (BROKER + "Fetch", fetch("orders", replica_id=2), "members"),
    (BROKER + "Fetch", fetch("orders", replica_id=0), "members"),  # broker 0 is a broker
    (BROKER + "Fetch", fetch("orders", replica_id=-1), set()),
    (BROKER + "FetchStream", b.FetchStreamRequest(request=fetch("orders")), set()),
    (BROKER + "ReplicaFetchStream", b.ReplicaFetchStreamRequest(), "members"),
    (
        BROKER + "ListOffsets",
        b.ListOffsetsRequest(topics=[b.ListOffsetsRequest.TopicData(name="orders")]),
        set(),  # per partition by the handler: test_partition_refusals.py
    ),
    (
        BROKER + "InitProducerId",
        b.InitProducerIdRequest(transactional_id="tx"),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx")},
    ),
    (
        BROKER + "InitProducerId",
        b.InitProducerIdRequest(),
        {(a(Op.IDEMPOTENT_WRITE, R.CLUSTER, CLUSTER), a(Op.WRITE, R.TOPIC, ANY_NAME))},
    ),
    (BROKER + "WriteTxnMarkers", b.WriteTxnMarkersRequest(), "members"),
    (BROKER + "WriteTxnMarkersStream", b.WriteTxnMarkersStreamRequest(), "members"),
    (
        BROKER + "DescribeProducers",
        b.DescribeProducersRequest(topics=[b.DescribeProducersRequest.TopicRequest(name="o")]),
        set(),
    ),
    (
        BROKER + "DeleteRecords",
        b.DeleteRecordsRequest(topics=[b.DeleteRecordsRequest.TopicData(name="o")]),
        set(),
    ),
    (BROKER + "DescribeLogDirs", b.DescribeLogDirsRequest(), {a(Op.DESCRIBE, R.CLUSTER, CLUSTER)}),
    # ControllerService
    *[
        (CONTROLLER + name, getattr(c, name + "Request")(), "members")
        for name in (
            "RegisterBroker",
            "BrokerHeartbeat",
            "AlterPartition",
            "ReportCorruptReplica",
            "AllocateProducerIds",
            "RegisterCoordinator",
            "CoordinatorHeartbeat",
            "FetchMetadata",
            "FetchSnapshot",
        )
    ],
    # Decided per topic by the handler (topic_admin_access.py): test_topic_admin_access.py.
    (
        CONTROLLER + "CreateTopics",
        c.CreateTopicsRequest(topics=[c.CreateTopicsRequest.Topic(name="new")]),
        set(),
    ),
    (CONTROLLER + "DeleteTopics", c.DeleteTopicsRequest(names=["o"]), set()),
    (
        CONTROLLER + "CreatePartitions",
        c.CreatePartitionsRequest(topics=[c.CreatePartitionsRequest.Topic(name="o")]),
        set(),
    ),
    *[
        (CONTROLLER + name, getattr(c, name + "Request")(), {a(operation, R.CLUSTER, CLUSTER)})
        for name, operation in (
            ("AlterPartitionReassignments", Op.ALTER),
            ("UnregisterBroker", Op.ALTER),
            ("ElectLeaders", Op.ALTER),
            ("ListPartitionReassignments", Op.DESCRIBE),
            ("DescribeQuorum", Op.DESCRIBE),
            ("AlterClientQuotas", Op.ALTER_CONFIGS),
            ("DescribeClientQuotas", Op.DESCRIBE_CONFIGS),
            ("CreateAcls", Op.ALTER),
            ("DeleteAcls", Op.ALTER),
            ("DescribeAcls", Op.DESCRIBE),
        )
    ],
    (CONTROLLER + "DescribeCluster", c.DescribeClusterRequest(), set()),
    # Every topic: anyone; the handler answers those the caller may DESCRIBE (caller.py). Named:
    # anyone too; the handler answers TOPIC_AUTHORIZATION_FAILED for each it may not DESCRIBE.
    (CONTROLLER + "DescribeTopics", c.DescribeTopicsRequest(), set()),
    (CONTROLLER + "DescribeTopics", c.DescribeTopicsRequest(names=["o"]), set()),
    (
        CONTROLLER + "DescribeConfigs",
        c.DescribeConfigsRequest(
            resources=[
                c.DescribeConfigsRequest.Resource(
                    resource=c.ConfigResource(type=m.CONFIG_RESOURCE_TYPE_TOPIC, name="o")
                ),
                c.DescribeConfigsRequest.Resource(
                    resource=c.ConfigResource(type=m.CONFIG_RESOURCE_TYPE_BROKER, name="1")
                ),
            ]
        ),
        set(),  # per resource by the handler: test_topic_admin_access.py
    ),
    (
        CONTROLLER + "IncrementalAlterConfigs",
        c.IncrementalAlterConfigsRequest(
            resources=[
                c.IncrementalAlterConfigsRequest.Resource(
                    resource=c.ConfigResource(type=m.CONFIG_RESOURCE_TYPE_TOPIC, name="o")
                )
            ]
        ),
        set(),
    ),
    # CoordinatorLookupService
    (
        LOOKUP + "FindCoordinator",
        g.FindCoordinatorRequest(key_type=g.COORDINATOR_KEY_TYPE_GROUP, keys=["grp"]),
        {a(Op.DESCRIBE, R.GROUP, "grp")},
    ),
    (
        LOOKUP + "FindCoordinator",
        g.FindCoordinatorRequest(key_type=g.COORDINATOR_KEY_TYPE_TRANSACTION, keys=["tx"]),
        {a(Op.DESCRIBE, R.TRANSACTIONAL_ID, "tx")},
    ),
    # GroupCoordinatorService
    (
        GROUPS + "ConsumerGroupHeartbeat",
        g.ConsumerGroupHeartbeatRequest(group_id="grp"),
        {a(Op.READ, R.GROUP, "grp")},
    ),
    (
        GROUPS + "OffsetCommit",
        g.OffsetCommitRequest(group_id="grp", topics=[g.OffsetCommitTopic(name="o")]),
        {a(Op.READ, R.GROUP, "grp"), a(Op.READ, R.TOPIC, "o")},
    ),
    (
        GROUPS + "OffsetFetch",
        g.OffsetFetchRequest(group_id="grp", topics=[g.TopicPartitions(topic="o")]),
        {a(Op.DESCRIBE, R.GROUP, "grp"), a(Op.DESCRIBE, R.TOPIC, "o")},
    ),
    (
        GROUPS + "OffsetFetch",
        g.OffsetFetchRequest(group_id="grp"),
        {a(Op.DESCRIBE, R.GROUP, "grp")},
    ),
    (
        GROUPS + "DescribeGroupLag",
        g.DescribeGroupLagRequest(group_id="grp"),
        {a(Op.DESCRIBE, R.GROUP, "grp")},
    ),
    (GROUPS + "ListGroups", g.ListGroupsRequest(), set()),  # filtered by the handler
    (
        GROUPS + "DescribeGroups",
        g.DescribeGroupsRequest(group_ids=["grp"]),
        set(),  # per group by the handler: test_caller.py
    ),
    (
        GROUPS + "DeleteGroups",
        g.DeleteGroupsRequest(group_ids=["grp"]),
        set(),
    ),
    (
        GROUPS + "OffsetDelete",
        g.OffsetDeleteRequest(group_id="grp", topics=[g.TopicPartitions(topic="o")]),
        {a(Op.DELETE, R.GROUP, "grp"), a(Op.READ, R.TOPIC, "o")},
    ),
    # TransactionCoordinatorService
    (
        TXNS + "InitTransactions",
        t.InitTransactionsRequest(transactional_id="tx"),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx")},
    ),
    (
        TXNS + "AddPartitionsToTxn",
        t.AddPartitionsToTxnRequest(
            producer=producer("tx"), partitions=[g.TopicPartitions(topic="o")]
        ),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx"), a(Op.WRITE, R.TOPIC, "o")},
    ),
    (
        TXNS + "AddPartitionsToTxnStream",
        t.AddPartitionsToTxnStreamRequest(
            request=t.AddPartitionsToTxnRequest(
                producer=producer("tx"), partitions=[g.TopicPartitions(topic="o")]
            )
        ),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx"), a(Op.WRITE, R.TOPIC, "o")},
    ),
    (
        TXNS + "AddOffsetsToTxn",
        t.AddOffsetsToTxnRequest(producer=producer("tx"), group_id="grp"),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx"), a(Op.READ, R.GROUP, "grp")},
    ),
    (
        TXNS + "TxnOffsetCommit",
        t.TxnOffsetCommitRequest(
            producer=producer("tx"), group_id="grp", topics=[t.TxnOffsetCommitTopic(name="o")]
        ),
        {
            a(Op.WRITE, R.TRANSACTIONAL_ID, "tx"),
            a(Op.READ, R.GROUP, "grp"),
            a(Op.READ, R.TOPIC, "o"),
        },
    ),
    (
        TXNS + "EndTxn",
        t.EndTxnRequest(producer=producer("tx")),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx")},
    ),
    (
        TXNS + "TransactionStream",
        t.TransactionStreamRequest(end_txn=t.EndTxnRequest(producer=producer("tx"))),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx")},
    ),
    (
        TXNS + "TransactionStream",
        t.TransactionStreamRequest(
            add_offsets_to_txn=t.AddOffsetsToTxnRequest(producer=producer("tx"), group_id="grp")
        ),
        {a(Op.WRITE, R.TRANSACTIONAL_ID, "tx"), a(Op.READ, R.GROUP, "grp")},
    ),
    (
        TXNS + "TransactionStream",
        t.TransactionStreamRequest(
            txn_offset_commit=t.TxnOffsetCommitRequest(
                producer=producer("tx"), group_id="grp", topics=[t.TxnOffsetCommitTopic(name="o")]
            )
        ),
        {
            a(Op.WRITE, R.TRANSACTIONAL_ID, "tx"),
            a(Op.READ, R.GROUP, "grp"),
            a(Op.READ, R.TOPIC, "o"),
        },
    ),
    (TXNS + "ListTransactions", t.ListTransactionsRequest(), set()),  # filtered by the handler
    (
        TXNS + "DescribeTransactions",
        t.DescribeTransactionsRequest(transactional_ids=["tx"]),
        {a(Op.DESCRIBE, R.TRANSACTIONAL_ID, "tx")},
    ),
    (TXNS + "AbortTransaction", t.AbortTransactionRequest(), {a(Op.ALTER, R.CLUSTER, CLUSTER)}),
]


@pytest.mark.parametrize(("method", "request_message", "wanted"), CASES)
def test_each_rpc_requires_what_kafka_requires(
    method: str, request_message: object, wanted: set[object] | str
) -> None:
    assert needed(method, request_message) == wanted


@pytest.mark.parametrize(("method", "request_message", "wanted"), CASES)
def test_a_call_is_allowed_with_every_need_met_and_refused_without_any_one(
    method: str, request_message: object, wanted: set[object] | str
) -> None:
    rule = requirement(method, request_message, names)
    if isinstance(wanted, str):
        assert rule.members_only
        return
    granted = {need[0] for need in rule.needs}
    assert first_unmet(rule, granted.__contains__) is None
    for need in rule.needs:
        assert first_unmet(rule, (granted - {need[0]}).__contains__) == need


def test_every_rpc_of_every_service_has_a_rule() -> None:
    """A new RPC without a rule fails here (at run time it would be members-only)."""
    methods = {
        f"/{service.full_name}/{method.name}"
        for module in (b, c, g, s, t)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    tested = {method for method, _, _ in CASES}
    assert methods - set(access_rules.RULES) == set()
    assert methods - tested == set(), "each method has a case in CASES"


def test_a_method_without_a_rule_is_for_members_only() -> None:
    rule = requirement("/samsa.v1.BrokerService/SomethingNew", b.FetchRequest(), names)
    assert rule.members_only is not None and "no access rule" in rule.members_only


def test_the_refusal_names_the_principal_the_operation_the_resource_and_the_grant() -> None:
    message = access_rules.refusal("User:CN=bob,O=samsa", (a(Op.WRITE, R.TOPIC, "orders"),))
    assert message.startswith("User:CN=bob,O=samsa may not WRITE topic orders (")
    assert (
        "samsa acls --add --allow-principal User:CN=bob,O=samsa --operation Write --topic orders"
        in message
    )
    cluster = access_rules.refusal("User:x", (a(Op.IDEMPOTENT_WRITE, R.CLUSTER, CLUSTER),))
    assert "--operation IdempotentWrite --cluster)" in cluster


def binding(
    name: str, operation: Operation, pattern: PatternType = PatternType.LITERAL
) -> AclBinding:
    return AclBinding(R.TOPIC, name, pattern, "User:alice", "*", operation, Permission.ALLOW)


@pytest.mark.parametrize(
    ("bindings", "allowed"),
    [
        ([], False),
        ([binding("orders", Op.WRITE)], True),
        ([binding("ord", Op.WRITE, PatternType.PREFIXED)], True),
        ([binding("orders", Op.ALL)], True),
        ([binding("orders", Op.READ)], False),
        (
            [
                binding("orders", Op.WRITE),
                AclBinding(
                    R.TOPIC,
                    "orders",
                    PatternType.LITERAL,
                    "User:alice",
                    "*",
                    Op.WRITE,
                    Permission.DENY,
                ),
            ],
            False,
        ),
    ],
)
def test_write_on_some_topic_is_found_for_idempotence(
    bindings: list[AclBinding], allowed: bool
) -> None:
    acls = Acls.empty().with_added(bindings)
    settings = AuthorizerSettings()
    assert (
        access_rules.allowed_on_some(acls, settings, "User:alice", "1.2.3.4", Op.WRITE, R.TOPIC)
        is allowed
    )
