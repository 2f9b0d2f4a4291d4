"""Goal: OffsetCommit answers each topic the caller may not READ with TOPIC_AUTHORIZATION_FAILED
in every one of its partitions (naming principal, operation and topic) and stores the others,
as Kafka's OffsetCommit does; the response keeps the request's topic order; with every topic
refused nothing is committed; with ACLs off the request goes through untouched.

Method: commit_access.per_topic_commit with a stand-in Caller set in caller.CALLER, and a
`commit` that records the request it was handed and answers each partition with NONE, as the
group's shard would.
"""

from __future__ import annotations

import asyncio

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType
from samsa.services.coordinator.commit_access import per_topic_commit
from samsa.services.runtime.caller import CALLER
from samsa.services.runtime.session_access import NO_GRANT, SessionGrant
from samsa.v1 import coordinator_pb2 as c


class Reader:
    """May READ the topics named; counts the questions."""

    def __init__(self, *topics: str) -> None:
        self.topics = set(topics)

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return (operation, resource_type) == (Operation.READ, ResourceType.TOPIC) and (
            name in self.topics
        )

    def principal(self) -> str:
        return "User:erin"

    def grant(self) -> SessionGrant:
        return NO_GRANT


def commit_of(*topics: tuple[str, int]) -> c.OffsetCommitRequest:
    request = c.OffsetCommitRequest(group_id="g")
    for name, partitions in topics:
        topic = request.topics.add(name=name)
        for number in range(partitions):
            topic.partitions.add(partition=number, committed_offset=10)
    return request


def run(request: c.OffsetCommitRequest, caller: Reader | None):
    handed: list[c.OffsetCommitRequest] = []

    async def commit(allowed: c.OffsetCommitRequest) -> c.OffsetCommitResponse:
        handed.append(allowed)
        response = c.OffsetCommitResponse()
        for topic in allowed.topics:
            result = response.topics.add(name=topic.name)
            for p in topic.partitions:
                result.partitions.add(partition=p.partition)
        return response

    async def main() -> c.OffsetCommitResponse:
        if caller is not None:
            CALLER.set(caller)
        return await per_topic_commit(request, commit)

    response = asyncio.run(main())
    answered = [
        (t.name, p.partition, p.error_code, p.error_message)
        for t in response.topics
        for p in t.partitions
    ]
    return handed, answered


def test_the_refused_topic_is_answered_per_partition_and_the_others_stored() -> None:
    handed, answered = run(
        commit_of(("open", 1), ("closed", 2), ("also", 1)), Reader("open", "also")
    )
    assert [[t.name for t in request.topics] for request in handed] == [["open", "also"]]
    assert [(name, number, code) for name, number, code, _ in answered] == [
        ("open", 0, ErrorCode.NONE),
        ("closed", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("closed", 1, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("also", 0, ErrorCode.NONE),
    ]
    message = answered[1][3]
    assert "User:erin" in message and "READ" in message and "closed" in message


def test_every_topic_refused_commits_nothing() -> None:
    handed, answered = run(commit_of(("closed", 1)), Reader())
    assert handed == []
    assert [code for _, _, code, _ in answered] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]


def test_with_acls_off_the_request_goes_through_untouched() -> None:
    request = commit_of(("closed", 1))
    handed, answered = run(request, None)
    assert handed == [request]
    assert [code for _, _, code, _ in answered] == [ErrorCode.NONE]
