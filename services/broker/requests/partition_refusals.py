"""The broker's reads and writes naming partitions answer an ACL refusal per topic, as Kafka's do.

Theory of operation. ListOffsets (DESCRIBE on each topic), DeleteRecords (DELETE) and
DescribeProducers (READ) name partitions of topics; Kafka answers each partition of a topic the
caller may not touch with TOPIC_AUTHORIZATION_FAILED and serves the others. Their rule is
"anyone" (access_rules.py); `per_partition` asks the caller (caller.topic_refusals: nothing with
ACLs off, once per distinct topic otherwise), hands the request without the refused topics to the
core, and adds their partitions to its response, each with the message naming the principal, the
operation and the topic. A topic named by id only (ListOffsets) is decided under the name the
image gives it; an unknown id is left to the core (UNKNOWN_TOPIC_ID).

Pure but for awaiting the core's answer when it is a coroutine (DeleteRecords): no I/O of its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation
from samsa.services.runtime.caller import topic_refusals
from samsa.services.runtime.topic_admin_access import request_keeping


async def per_partition(
    operation: Operation,
    request: Any,
    answer: Callable[[Any], Any],
    topic_name: Callable[[bytes], str | None] = lambda _id: None,
) -> Any:
    """`answer(request)` (awaited when it is a coroutine) with the topics the current caller may
    not do `operation` on left out and their partitions answered TOPIC_AUTHORIZATION_FAILED."""
    refused = topic_refusals(operation)
    denied: dict[int, str] = {}  # index of the request's topic -> why
    if refused is not None:
        for index, topic in enumerate(request.topics):
            name = topic.name or (topic_name(topic.topic_id) if _by_id(topic) else None)
            why = refused(name) if name else None
            if why is not None:
                denied[index] = why
    allowed = request
    if denied:
        allowed = request_keeping(request, "topics", lambda index, _topic: index not in denied)
    response = answer(allowed)
    if inspect.isawaitable(response):
        response = await response
    for index, why in denied.items():
        topic = request.topics[index]
        result = response.topics.add(name=topic.name)
        for wanted in topic.partitions:
            number = wanted if isinstance(wanted, int) else wanted.partition
            partition = result.partitions.add(partition=number, error_message=why)
            partition.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return response


def _by_id(topic: Any) -> bool:
    return "topic_id" in type(topic).DESCRIPTOR.fields_by_name and bool(topic.topic_id)
