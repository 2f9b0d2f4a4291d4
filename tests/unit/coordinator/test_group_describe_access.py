"""Goal: DescribeGroups never shows a caller a group naming topics it may not DESCRIBE (as
Kafka's ConsumerGroupDescribe, KAFKA-18813): such a group is answered TOPIC_AUTHORIZATION_FAILED
with nothing of its description and without naming the topics; a group whose every topic (by
subscription, ownership or target) the caller may DESCRIBE, and a group answered with an error
already, are shown as they are.

Method: the pure `shown_to` on hand-built descriptions with a predicate for the caller's
DESCRIBE.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_describe_access import shown_to
from samsa.v1 import coordinator_pb2 as c

ALICE = "User:CN=alice,O=samsa"


def described(subscribed: str = "a", owned: str = "a", target: str = "a") -> c.DescribedGroup:
    member = c.DescribedMember(
        member_id="m",
        subscription=c.ConsumerGroupSubscription(topic_names=[subscribed]),
        assignment=[c.TopicPartitions(topic=owned, partitions=[0])],
        target_assignment=[c.TopicPartitions(topic=target, partitions=[0])],
    )
    return c.DescribedGroup(group_id="g", group_epoch=3, members=[member])


def may(*topics: str):  # type: ignore[no-untyped-def]
    return lambda name: name in topics


def test_a_group_of_describable_topics_is_shown_whole() -> None:
    group = described()
    assert shown_to(group, may("a"), ALICE) is group


@pytest.mark.parametrize(
    "group",
    [described(subscribed="secret"), described(owned="secret"), described(target="secret")],
    ids=["subscribed", "owned", "target"],
)
def test_a_group_naming_a_hidden_topic_is_refused_without_naming_it(
    group: c.DescribedGroup,
) -> None:
    shown = shown_to(group, may("a"), ALICE)
    assert shown.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert (shown.group_id, list(shown.members), shown.group_epoch) == ("g", [], 0)
    assert ALICE in shown.error_message and "secret" not in shown.error_message


def test_a_regex_is_no_topic_and_an_error_answer_stays() -> None:
    regex = c.DescribedGroup(
        group_id="g",
        members=[
            c.DescribedMember(
                member_id="m", subscription=c.ConsumerGroupSubscription(topic_regex="secret.*")
            )
        ],
    )
    assert shown_to(regex, may(), ALICE) is regex
    missing = c.DescribedGroup(group_id="g", error_code=ErrorCode.GROUP_ID_NOT_FOUND)
    assert shown_to(missing, may(), ALICE) is missing
