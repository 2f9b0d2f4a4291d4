"""Goal: ListOffsets, DeleteRecords and DescribeProducers answer each partition of a topic the
caller may not DESCRIBE / DELETE / READ with TOPIC_AUTHORIZATION_FAILED (naming principal,
operation and topic) and hand only the other topics to the core; a topic named by id is decided
under its name from the image; with ACLs off the request goes through untouched.

Method: partition_refusals.per_partition with a stand-in Caller in caller.CALLER and a core that
records the request it was handed and answers its partitions with NONE (a coroutine for
DeleteRecords' core, a plain function for the others).
"""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType
from samsa.services.broker.requests.partition_refusals import per_partition
from samsa.services.runtime.caller import CALLER
from samsa.services.runtime.session_access import NO_GRANT, SessionGrant
from samsa.v1 import broker_pb2 as b

ALICE = "User:CN=alice"


class Alice:
    def __init__(self, *allowed: str) -> None:
        self.allowed = set(allowed)
        self.asked: list[str] = []

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        self.asked.append(name)
        return name in self.allowed

    def principal(self) -> str:
        return ALICE

    def grant(self) -> SessionGrant:
        return NO_GRANT


def run(operation: Operation, request: Any, response_type: Any, caller: Any, coroutine: bool):
    handed: list[Any] = []

    def core(allowed: Any) -> Any:
        handed.append(allowed)
        response = response_type()
        for topic in allowed.topics:
            result = response.topics.add(name=topic.name)
            for wanted in topic.partitions:
                result.partitions.add(
                    partition=wanted if isinstance(wanted, int) else wanted.partition
                )
        return response

    async def core_async(allowed: Any) -> Any:
        return core(allowed)

    async def main() -> Any:
        if caller is not None:
            CALLER.set(caller)
        names = {b"\x01" * 16: "by-id"}.get
        return await per_partition(operation, request, core_async if coroutine else core, names)

    response = asyncio.run(main())
    answered = {
        (t.name, p.partition): (p.error_code, p.error_message)
        for t in response.topics
        for p in t.partitions
    }
    return handed[0], answered


def test_delete_records_deletes_the_allowed_topic_only() -> None:
    request = b.DeleteRecordsRequest(
        topics=[
            b.DeleteRecordsRequest.TopicData(
                name=n,
                partitions=[b.DeleteRecordsRequest.PartitionData(partition=p) for p in (0, 1)],
            )
            for n in ("mine", "theirs")
        ],
        timeout_ms=100,
    )
    alice = Alice("mine")
    handed, answered = run(Operation.DELETE, request, b.DeleteRecordsResponse, alice, True)
    assert [t.name for t in handed.topics] == ["mine"] and handed.timeout_ms == 100
    assert answered[("mine", 1)] == (ErrorCode.NONE, "")
    for partition in (0, 1):
        code, message = answered[("theirs", partition)]
        assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert message.startswith(f"{ALICE} may not DELETE topic theirs (")
    assert sorted(alice.asked) == ["mine", "theirs"]


def test_list_offsets_decides_a_topic_named_by_id_under_its_name() -> None:
    request = b.ListOffsetsRequest(
        topics=[
            b.ListOffsetsRequest.TopicData(
                topic_id=b"\x01" * 16, partitions=[b.ListOffsetsRequest.PartitionData(partition=0)]
            ),
            b.ListOffsetsRequest.TopicData(
                name="mine", partitions=[b.ListOffsetsRequest.PartitionData(partition=0)]
            ),
        ]
    )
    handed, answered = run(Operation.DESCRIBE, request, b.ListOffsetsResponse, Alice("mine"), False)
    assert [t.name for t in handed.topics] == ["mine"]
    assert "may not DESCRIBE topic by-id" in answered[("", 0)][1]


def test_describe_producers_and_acls_off() -> None:
    request = b.DescribeProducersRequest(
        topics=[b.DescribeProducersRequest.TopicRequest(name="theirs", partitions=[0, 2])]
    )
    handed, answered = run(Operation.READ, request, b.DescribeProducersResponse, Alice(), False)
    assert not handed.topics
    assert {code for code, _ in answered.values()} == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert set(answered) == {("theirs", 0), ("theirs", 2)}
    handed, answered = run(Operation.READ, request, b.DescribeProducersResponse, None, False)
    assert handed is request and set(answered) == {("theirs", 0), ("theirs", 2)}
