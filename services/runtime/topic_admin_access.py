"""The admin writes naming topics answer an ACL refusal per topic, as Kafka's do.

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

Pure but for awaiting `answer`: no I/O of its own, no grpc.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from samsa.services.runtime.access_rules import Access, Need, refusal
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
    allowed = type(request)()
    allowed.CopyFrom(request)
    kept = [item for item in items if write.name(item) not in refused]
    del getattr(allowed, write.field)[:]
    getattr(allowed, write.field).extend(kept)
    response = await answer(allowed)
    for name, message in refused.items():
        result = response.topics.add(name=name)  # type: ignore[attr-defined]
        result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        result.error_message = message
    return response
