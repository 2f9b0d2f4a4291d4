"""Goal: CreateTopics, DeleteTopics and CreatePartitions answer each topic the caller may not
touch with TOPIC_AUTHORIZATION_FAILED (naming principal, operation and topic) and hand only the
others to the write, as Kafka does; CreateTopics is allowed by CREATE on the topic or on the
cluster; with ACLs off the request goes through untouched and nothing is asked. DescribeConfigs
(and IncrementalAlterConfigs, the same code) answers per config resource: a topic's refused
with TOPIC_AUTHORIZATION_FAILED, a broker's with CLUSTER_AUTHORIZATION_FAILED.

Method: topic_admin_access.per_topic with a stand-in Caller set in caller.CALLER, and an `answer`
that records the request it was handed and answers each topic with NONE, as the controller's
write (or a broker's forwarding) would.
"""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType
from samsa.services.runtime.caller import CALLER
from samsa.services.runtime.session_access import NO_GRANT, SessionGrant
from samsa.services.runtime.topic_admin_access import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    TopicWrite,
    per_config_resource,
    per_topic,
)
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

ALICE = "User:CN=alice"


class Alice:
    """May do what `granted` holds ((operation, resource type, name)); counts the questions."""

    def __init__(self, *granted: tuple[Operation, ResourceType, str]) -> None:
        self.granted = set(granted)
        self.asked = 0

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        self.asked += 1
        return (operation, resource_type, name) in self.granted

    def principal(self) -> str:
        return ALICE

    def grant(self) -> SessionGrant:
        return NO_GRANT


def run(write: TopicWrite, request: Any, response_type: Any, caller: Any = None):
    """(the request the write was handed, the response) under `caller` (None: ACLs off)."""
    handed: list[Any] = []

    async def answer(allowed: Any) -> Any:
        handed.append(allowed)
        response = response_type()
        for item in getattr(allowed, write.field):
            response.topics.add(name=write.name(item))
        return response

    async def main() -> Any:
        if caller is not None:
            CALLER.set(caller)  # this task's own context
        return await per_topic(write, request, answer)

    response = asyncio.run(main())
    return handed[0], {t.name: (t.error_code, t.error_message) for t in response.topics}


def create(*names: str) -> c.CreateTopicsRequest:
    return c.CreateTopicsRequest(topics=[c.CreateTopicsRequest.Topic(name=n) for n in names])


def test_create_topics_creates_the_allowed_and_answers_the_refused() -> None:
    alice = Alice((Operation.CREATE, ResourceType.TOPIC, "mine"))
    handed, answered = run(
        CREATE_TOPICS, create("mine", "theirs", "theirs"), c.CreateTopicsResponse, alice
    )
    assert [t.name for t in handed.topics] == ["mine"]
    assert answered["mine"] == (ErrorCode.NONE, "")
    code, message = answered["theirs"]
    assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert message.startswith(f"{ALICE} may not CREATE topic theirs (nor CREATE cluster")
    assert alice.asked == 3  # mine once; theirs once, both alternatives


def test_create_on_the_cluster_allows_every_topic() -> None:
    alice = Alice((Operation.CREATE, ResourceType.CLUSTER, "kafka-cluster"))
    handed, answered = run(CREATE_TOPICS, create("x", "y"), c.CreateTopicsResponse, alice)
    assert [t.name for t in handed.topics] == ["x", "y"]
    assert {code for code, _ in answered.values()} == {ErrorCode.NONE}


def test_delete_and_create_partitions_answer_per_topic() -> None:
    alice = Alice(
        (Operation.DELETE, ResourceType.TOPIC, "mine"),
        (Operation.ALTER, ResourceType.TOPIC, "mine"),
    )
    request = c.DeleteTopicsRequest(names=["mine", "theirs"])
    handed, answered = run(DELETE_TOPICS, request, c.DeleteTopicsResponse, alice)
    assert list(handed.names) == ["mine"]
    assert answered["theirs"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert "may not DELETE topic theirs" in answered["theirs"][1]
    grow = c.CreatePartitionsRequest(
        topics=[c.CreatePartitionsRequest.Topic(name=n, count=3) for n in ("mine", "theirs")],
        validate_only=True,
    )
    handed, answered = run(CREATE_PARTITIONS, grow, c.CreatePartitionsResponse, alice)
    assert [t.name for t in handed.topics] == ["mine"] and handed.validate_only
    assert "may not ALTER topic theirs" in answered["theirs"][1]


def test_everything_refused_hands_an_empty_request() -> None:
    handed, answered = run(CREATE_TOPICS, create("a"), c.CreateTopicsResponse, Alice())
    assert not handed.topics
    assert answered["a"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_acls_off_hand_the_request_as_is() -> None:
    request = create("a", "b")
    handed, answered = run(CREATE_TOPICS, request, c.CreateTopicsResponse)
    assert handed is request and set(answered) == {"a", "b"}


def test_config_resources_are_answered_per_resource_with_their_code() -> None:
    topic, broker = m.CONFIG_RESOURCE_TYPE_TOPIC, m.CONFIG_RESOURCE_TYPE_BROKER
    request = c.DescribeConfigsRequest(
        resources=[
            c.DescribeConfigsRequest.Resource(resource=c.ConfigResource(type=t, name=n))
            for t, n in ((topic, "mine"), (topic, "theirs"), (broker, "1"))
        ]
    )
    alice = Alice((Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "mine"))
    handed: list[Any] = []

    def describe(allowed: Any) -> Any:
        handed.append(allowed)
        response = c.DescribeConfigsResponse()
        for item in allowed.resources:
            response.results.add(resource=item.resource)
        return response

    async def main() -> Any:
        CALLER.set(alice)
        return await per_config_resource(Operation.DESCRIBE_CONFIGS, request, describe)

    response = asyncio.run(main())
    assert [r.resource.name for r in handed[0].resources] == ["mine"]
    answered = {r.resource.name: (r.error_code, r.error_message) for r in response.results}
    assert answered["mine"][0] == ErrorCode.NONE
    assert answered["theirs"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert "may not DESCRIBE_CONFIGS topic theirs" in answered["theirs"][1]
    assert answered["1"][0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert "may not DESCRIBE_CONFIGS cluster kafka-cluster" in answered["1"][1]
