"""OffsetCommit answers an ACL refusal per topic, as Kafka's does.

Theory of operation. Committing needs READ on the group (access_rules.py decides it before the
handler runs, refusing the whole call) and READ on each topic. Kafka answers a topic the caller
may not read with TOPIC_AUTHORIZATION_FAILED in each of its partitions' results and stores the
other topics' offsets; so does `per_topic_commit`: it hands the core the request without the
refused topics and puts their results back where the request had them (the response keeps the
request's order). With ACLs off (EVERYONE) nothing is asked.

Pure but for awaiting `commit`: no I/O of its own, no grpc.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType
from samsa.services.runtime.access_rules import Access
from samsa.services.runtime.caller import EVERYONE, current_caller
from samsa.services.runtime.topic_admin_access import TopicWrite, refused_topics, request_keeping
from samsa.v1 import coordinator_pb2 as c

COMMIT_TOPICS = TopicWrite(
    lambda name: (Access(Operation.READ, ResourceType.TOPIC, name),),
    "topics",
    lambda topic: topic.name,
)


async def per_topic_commit(
    request: c.OffsetCommitRequest,
    commit: Callable[[c.OffsetCommitRequest], Awaitable[c.OffsetCommitResponse]],
) -> c.OffsetCommitResponse:
    """`commit(request)` without the topics the current caller may not READ, whose partitions
    are answered TOPIC_AUTHORIZATION_FAILED in the request's order."""
    caller = current_caller()
    if caller is EVERYONE:
        return await commit(request)
    refused = refused_topics(caller, COMMIT_TOPICS, [topic.name for topic in request.topics])
    if not refused:
        return await commit(request)
    allowed = request_keeping(request, "topics", lambda _, topic: topic.name not in refused)
    stored = iter((await commit(allowed)).topics) if allowed.topics else iter(())
    response = c.OffsetCommitResponse()
    for topic in request.topics:
        message = refused.get(topic.name)
        if message is None:
            response.topics.append(next(stored))
            continue
        result = response.topics.add(name=topic.name)
        for partition in topic.partitions:
            result.partitions.add(
                partition=partition.partition,
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,  # type: ignore[arg-type]
                error_message=message,
            )
    return response
