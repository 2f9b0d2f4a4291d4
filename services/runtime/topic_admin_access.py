"""The admin calls naming topics or config resources answer an ACL refusal per item, as Kafka's do.

Theory of operation. CreateTopics (CREATE on the topic or on the cluster), DeleteTopics (DELETE)
and CreatePartitions (ALTER) name topics; Kafka answers a topic the caller may not touch with
TOPIC_AUTHORIZATION_FAILED in that topic's result and applies the others. Their rule is
therefore "anyone" (access_rules.py) and the handler decides: `per_topic` asks the caller
(caller.py) about each distinct topic, hands the request without the refused ones to the write
(`answer`: the controller's commit, or a broker's forwarding to it), and adds a result per refused
topic to its response, whose message names the principal, the operation and the topic. With
ACLs off (EVERYONE) nothing is asked and the request goes through as is. A broker decides before
forwarding; the controller then sees the cluster's signed call, for which the caller may do
anything, so nothing is decided twice.

DescribeConfigs (DESCRIBE_CONFIGS) and IncrementalAlterConfigs (ALTER_CONFIGS) alike, per config
resource (`per_config_resource`): a topic's needs the operation on the topic
(TOPIC_AUTHORIZATION_FAILED), a broker's (or the cluster defaults') on the cluster
(CLUSTER_AUTHORIZATION_FAILED), as Kafka's DescribeConfigs and IncrementalAlterConfigs answer.

Pure but for awaiting `answer`: no I/O of its own, no grpc.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from samsa.services.runtime.access_rules import Access, Need, Refusal, refusal
from samsa.services.runtime.caller import EVERYONE, Caller, current_caller

Response = TypeVar("Response")


@dataclass(frozen=True)
class TopicWrite:
    """One admin write naming topics: what it needs per topic, and where its topics are."""

    need: Callable[[str], Need]
    field: str  # the request's repeated field of topics
    name: Callable[[Any], str]  # a topic's name from an item of that field


CREATE_TOPICS = TopicWrite(
    lambda name: (
        Access(Operation.CREATE, ResourceType.TOPIC, name),
        Access(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME),
    ),
    "topics",
    lambda topic: topic.name,
)
DELETE_TOPICS = TopicWrite(
    lambda name: (Access(Operation.DELETE, ResourceType.TOPIC, name),), "names", lambda name: name
)
CREATE_PARTITIONS = TopicWrite(
    lambda name: (Access(Operation.ALTER, ResourceType.TOPIC, name),),
    "topics",
    lambda topic: topic.name,
)


def request_keeping(request: Any, field: str, keep: Callable[[int, Any], bool]) -> Any:
    """A copy of `request` whose repeated `field` holds only the items `keep(index, item)`
    admits: what the core is handed once the refused items are taken out."""
    kept = type(request)()
    kept.CopyFrom(request)
    items = getattr(kept, field)
    del items[:]
    items.extend(item for index, item in enumerate(getattr(request, field)) if keep(index, item))
    return kept


def refused_topics(caller: Caller, write: TopicWrite, names: list[str]) -> dict[str, str]:
    """Why the caller may not touch each refused topic of `names` (once per distinct name)."""
    refused: dict[str, str] = {}
    for name in dict.fromkeys(names):
        need = write.need(name)
        if not any(caller.may(a.operation, a.resource_type, a.name) for a in need):
            refused[name] = str(refusal(caller.principal(), need))
    return refused


async def per_topic(
    write: TopicWrite, request: Any, answer: Callable[[Any], Awaitable[Response]]
) -> Response:
    """`answer(request)` with the topics the current caller may not touch left out of the
    request and answered TOPIC_AUTHORIZATION_FAILED in the response (see the module doc)."""
    caller = current_caller()
    if caller is EVERYONE:
        return await answer(request)
    items = getattr(request, write.field)
    refused = refused_topics(caller, write, [write.name(item) for item in items])
    if not refused:
        return await answer(request)
    allowed = request_keeping(request, write.field, lambda _, item: write.name(item) not in refused)
    response = await answer(allowed)
    for name, message in refused.items():
        result = response.topics.add(name=name)  # type: ignore[attr-defined]
        result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        result.error_message = message
    return response


TOPIC_CONFIG_RESOURCE = 1  # ConfigResource.Type TOPIC (controller.proto)


def _config_need(operation: Operation, resource: Any) -> Need:
    if resource.type == TOPIC_CONFIG_RESOURCE:
        return (Access(operation, ResourceType.TOPIC, resource.name),)
    return (Access(operation, ResourceType.CLUSTER, CLUSTER_NAME),)


async def per_config_resource(
    operation: Operation, request: Any, answer: Callable[[Any], Any]
) -> Any:
    """`answer(request)` (awaited when a coroutine) with the config resources the current caller
    may not do `operation` on left out and answered in `results` with their refusal's code."""
    caller = current_caller()
    refused: dict[int, Refusal] = {}
    if caller is not EVERYONE:
        decided: dict[Access, Refusal | None] = {}
        for index, item in enumerate(request.resources):
            need = _config_need(operation, item.resource)
            if need[0] not in decided:
                allowed = caller.may(need[0].operation, need[0].resource_type, need[0].name)
                decided[need[0]] = None if allowed else refusal(caller.principal(), need)
            why = decided[need[0]]
            if why is not None:
                refused[index] = why
    allowed_request = request
    if refused:
        allowed_request = request_keeping(request, "resources", lambda i, _r: i not in refused)
    response = answer(allowed_request)
    if inspect.isawaitable(response):
        response = await response
    for index, why in refused.items():
        result = response.results.add()
        result.resource.CopyFrom(request.resources[index].resource)
        result.error_code, result.error_message = why.code, str(why)
    return response
