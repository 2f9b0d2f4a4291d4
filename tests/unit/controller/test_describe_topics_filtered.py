"""Goal: DescribeTopics for every topic answers only the topics the caller may DESCRIBE (Kafka's
Metadata), and its pages stay correct: filtered before paging, so that no page is empty only
because of filtering while visible topics follow, every visible partition is answered once,
and a page's cursor leads on to the next visible topics. Named topics are answered per topic:
each the predicate refuses, existing or not, with TOPIC_AUTHORIZATION_FAILED naming the caller,
the operation and the topic (the same answer either way, so names cannot be probed), the others
as ever, in the order named and paged as ever.

Method: the pure `describe_topics` with a predicate, over images built with the real replay
(test_describe_topics_paging's), pages followed from each answer's next_cursor as a client does.
"""

from __future__ import annotations

from test_describe_topics_paging import answered, image_of

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c

SIZES = {"a-1": 2, "b-1": 3, "b-2": 4, "b-3": 1, "a-2": 3, "c-1": 2, "a-3": 1}


def alice(name: str) -> bool:
    return name.startswith("a-")


def follow(
    image: MetadataImage, request: c.DescribeTopicsRequest, visible, principal=lambda: ""
) -> list[c.DescribeTopicsResponse]:
    answers = []
    for _ in range(100):
        answer = cp.describe_topics(image, request, visible, principal)
        answers.append(answer)
        if not answer.HasField("next_cursor"):
            return answers
        request.cursor.CopyFrom(answer.next_cursor)
    raise AssertionError("the cursor never reached the end")


def test_every_topic_means_every_visible_topic_in_every_page_size() -> None:
    image = image_of(SIZES)
    expected = [(n, p) for n in sorted(SIZES) if alice(n) for p in range(SIZES[n])]
    for limit in (1, 2, 3, 4, 6, 100):
        answers = follow(image, c.DescribeTopicsRequest(partition_limit=limit), alice)
        assert answered(answers) == expected, f"limit {limit}"
        # Only the last page may be short; none is empty while visible partitions follow.
        counts = [sum(len(t.partitions) for t in a.topics) for a in answers]
        assert all(count == limit for count in counts[:-1]), (limit, counts)
        assert counts[-1] > 0
        cursors = [a.next_cursor.topic for a in answers if a.HasField("next_cursor")]
        assert all(alice(topic) for topic in cursors), cursors


def test_nothing_visible_is_one_empty_page_without_a_cursor() -> None:
    answers = follow(image_of(SIZES), c.DescribeTopicsRequest(partition_limit=2), lambda _: False)
    assert len(answers) == 1 and not answers[0].topics


def test_a_cursor_inside_a_deleted_topic_is_answered_only_if_visible() -> None:
    def names(topic: str) -> list[str]:
        cursor = c.DescribeTopicsRequest.Cursor(topic=topic, partition=1)
        answer = cp.describe_topics(image_of(SIZES), c.DescribeTopicsRequest(cursor=cursor), alice)
        return [t.name for t in answer.topics]

    assert names("a-0") == ["a-0", "a-1", "a-2", "a-3"]  # a-0: UNKNOWN_TOPIC_OR_PARTITION
    assert names("b-0") == []  # hidden, and so is every topic after it


ALICE = "User:CN=alice,O=samsa"


def named(names: list[str], limit: int = 0) -> list[c.DescribeTopicsResponse]:
    request = c.DescribeTopicsRequest(names=names, partition_limit=limit)
    return follow(image_of(SIZES), request, alice, lambda: ALICE)


def test_a_named_topic_the_caller_may_not_describe_is_refused_alone() -> None:
    (answer,) = named(["b-1", "a-1"])
    refused, described = answer.topics
    assert (refused.name, refused.error_code) == ("b-1", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert f"{ALICE} may not DESCRIBE topic b-1" in refused.error_message
    assert "--operation Describe --topic b-1" in refused.error_message
    assert not refused.partitions and not refused.topic_id
    assert (described.name, described.error_code) == ("a-1", ErrorCode.NONE)
    assert [p.partition for p in described.partitions] == [0, 1]


def test_a_name_that_does_not_exist_is_refused_as_one_that_does() -> None:
    (answer,) = named(["b-0", "b-1", "a-0"])
    hidden, existing, unknown = answer.topics
    assert hidden.error_code == existing.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert hidden.error_message == existing.error_message.replace("b-1", "b-0")
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # she may describe a-*


def test_refused_names_take_no_partitions_of_a_page() -> None:
    for limit in (1, 2, 3, 100):
        answers = named(["a-1", "b-2", "a-2", "c-1"], limit)
        by_topic = {}
        for answer in answers:
            for topic in answer.topics:
                by_topic.setdefault(topic.name, []).extend(p.partition for p in topic.partitions)
        assert by_topic == {"a-1": [0, 1], "b-2": [], "a-2": [0, 1, 2], "c-1": []}, limit
        counts = [sum(len(t.partitions) for t in a.topics) for a in answers]
        assert all(count == limit for count in counts[:-1]), (limit, counts)


def test_the_principal_is_asked_only_for_a_refusal() -> None:
    def principal() -> str:
        raise AssertionError("asked with nothing refused")

    answer = cp.describe_topics(
        image_of(SIZES), c.DescribeTopicsRequest(names=["a-1"]), alice, principal
    )
    assert [t.error_code for t in answer.topics] == [ErrorCode.NONE]


def test_without_a_predicate_every_topic_is_answered() -> None:
    answer = cp.describe_topics(image_of(SIZES), c.DescribeTopicsRequest())
    assert [t.name for t in answer.topics] == sorted(SIZES)
