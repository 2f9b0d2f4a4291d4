"""What DescribeGroups shows a caller of a group whose topics it may not all DESCRIBE.

Kafka's ConsumerGroupDescribe (KAFKA-18813) answers such a group with TOPIC_AUTHORIZATION_FAILED
and none of its description: the members' subscriptions and assignments would otherwise name
topics the caller may not know of. The message does not name them either. The topics are those
a member subscribes to by name, owns, or is to own (its target); a regex is not a topic name.
Pure: the caller's DESCRIBE is a predicate (services/runtime/caller.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c


def group_topics(group: c.DescribedGroup) -> Iterator[str]:
    """Every topic the description names (with repeats)."""
    for member in group.members:
        yield from member.subscription.topic_names
        for owned in (member.assignment, member.target_assignment):
            for topic in owned:
                yield topic.topic


def shown_to(
    group: c.DescribedGroup, may_describe: Callable[[str], bool], principal: str
) -> c.DescribedGroup:
    """`group` as is when the caller may DESCRIBE every topic it names (or it is an error
    already), else TOPIC_AUTHORIZATION_FAILED in its place."""
    if group.error_code != ErrorCode.NONE:
        return group
    if all(may_describe(topic) for topic in set(group_topics(group))):
        return group
    return c.DescribedGroup(
        group_id=group.group_id,
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,  # type: ignore[arg-type]
        error_message=f"group {group.group_id!r} has topics {principal} may not DESCRIBE: "
        "describing it needs DESCRIBE on every topic its members subscribe to or own",
    )
