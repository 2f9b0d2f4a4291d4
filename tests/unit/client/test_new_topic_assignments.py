"""Goal: NewTopic's replica_assignments (Kafka's NewTopic(name, replicasAssignments)) go on the
wire as CreateTopics' assignments, by partition, the replicas in the given order; a map the
wire cannot carry as meant, or one given beside a count or factor, is refused before anything is
sent with a TopicError naming the topic and what to change. The same for create_partitions'
replica_assignments (Kafka's NewPartitions.increaseTo(count, assignments)).

Method: the pure request builder (create_topics_request), then one Admin whose bootstrap
server refuses connections, to see the refusal comes before any send.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from samsa.client.admin import Admin, NewTopic
from samsa.client.cluster_admin import create_partitions_request, create_topics_request
from samsa.client.errors import TopicError
from samsa.common.errors import ErrorCode


def test_the_assignments_go_on_the_wire_by_partition_in_the_given_order() -> None:
    topic = NewTopic("t", replica_assignments={1: (3, 1), 0: [2, 1, 3][:2]})
    request = create_topics_request([topic], validate_only=True)
    wire = request.topics[0]
    assert (wire.num_partitions, wire.replication_factor) == (-1, -1)
    assert [(a.partition_index, list(a.broker_ids)) for a in wire.assignments] == [
        (0, [2, 1]),
        (1, [3, 1]),
    ]
    assert request.validate_only


def test_without_assignments_nothing_is_sent_for_them() -> None:
    request = create_topics_request([NewTopic("t", 3, 2)], validate_only=False)
    assert list(request.topics[0].assignments) == []


@pytest.mark.parametrize(
    ("fields", "code", "words"),
    [
        ({"num_partitions": 2}, ErrorCode.INVALID_REQUEST, "leave num_partitions"),
        ({"replication_factor": 2}, ErrorCode.INVALID_REQUEST, "leave num_partitions"),
        ({"replica_assignments": {}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "non-empty mapping"),
        ({"replica_assignments": [[1, 2]]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "mapping"),
        ({"replica_assignments": {"0": [1]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "'0'"),
        ({"replica_assignments": {True: [1]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "True"),
        ({"replica_assignments": {0: "12"}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "'12'"),
        ({"replica_assignments": {0: 1}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "1 are not"),
        ({"replica_assignments": {0: {1, 2}}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "{1, 2}"),
        ({"replica_assignments": {0: [1, "2"]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "ints"),
        ({"replica_assignments": {0: [1, 2**31]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "ints"),
    ],
)
def test_a_malformed_map_is_refused_naming_the_topic(
    fields: dict[str, Any], code: ErrorCode, words: str
) -> None:
    fields = {"replica_assignments": {0: [1]}, **fields}
    with pytest.raises(TopicError) as raised:
        create_topics_request([NewTopic("orders", **fields)], validate_only=False)
    assert raised.value.code == code
    assert "'orders'" in str(raised.value) and words in str(raised.value)


def test_admin_refuses_a_malformed_map_before_sending_anything() -> None:
    with Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 3_000}) as admin:
        started = time.monotonic()
        with pytest.raises(TopicError, match="replica_assignments"):
            admin.create_topics([NewTopic("t", 1, -1, replica_assignments={0: [1]})])
        assert time.monotonic() - started < 1.0, "refused before anything was sent"


def test_create_partitions_sends_one_list_per_new_partition_in_order() -> None:
    request = create_partitions_request({"t": 4, "u": 2}, False, {"t": [(3, 1), [1, 2]]})
    t, u = request.topics
    assert (t.name, t.count, [list(a.broker_ids) for a in t.assignments]) == (
        "t",
        4,
        [[3, 1], [1, 2]],
    )
    assert (u.name, u.count, list(u.assignments)) == ("u", 2, [])


@pytest.mark.parametrize(
    ("plans", "code", "words"),
    [
        ({"v": [[1]]}, ErrorCode.INVALID_REQUEST, "names ['v'] without a new partition count"),
        ({"t": "1:2"}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a list of broker id lists"),
        ({"t": {0: [1]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a list of broker id lists"),
        ({"t": [[1], 2]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "new partition 1's replicas 2"),
        ({"t": [[1, None]]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "must be broker ids"),
    ],
)
def test_create_partitions_refuses_lists_the_wire_cannot_carry(
    plans: dict[str, Any], code: ErrorCode, words: str
) -> None:
    with pytest.raises(TopicError) as raised:
        create_partitions_request({"t": 3}, False, plans)
    assert raised.value.code == code and words in str(raised.value)
