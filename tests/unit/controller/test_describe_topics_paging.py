"""DescribeTopics answers in bounded pages (KIP-966): a partition limit and a cursor.

Method: the pure `describe_topics` over images built with the real replay; pages are followed
from each answer's next_cursor, as a client does, and what they answer together is compared
with every (topic, partition) of the image.
"""

from __future__ import annotations

import random

from test_control_plane import DEFAULTS, cluster, commit

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c

SIZES = {"b": 7, "a": 3, "c": 2}
EVERY = [(name, p) for name in sorted(SIZES) for p in range(SIZES[name])]


def image_of(sizes: dict[str, int]) -> MetadataImage:
    """A 3-broker image holding topics of these sizes, each with its own topic id."""
    request = c.CreateTopicsRequest(
        topics=[
            c.CreateTopicsRequest.Topic(name=n, num_partitions=k, replication_factor=1)
            for n, k in sizes.items()
        ]
    )
    ids = iter(range(1, 1000))
    result = cp.create_topics(
        cluster(),
        request,
        rng=random.Random(7),
        defaults=DEFAULTS,
        new_topic_id=lambda: next(ids).to_bytes(16, "big"),
    )
    assert all(t.error_code == ErrorCode.NONE for t in result.response.topics)
    return commit(cluster(), result)


def follow(
    image: MetadataImage, request: c.DescribeTopicsRequest
) -> list[c.DescribeTopicsResponse]:
    """Every page of `request`, following next_cursor (bounded, so a loop fails the test)."""
    answers = []
    for _ in range(100):
        assert cp.describe_topics_problem(request) is None
        answer = cp.describe_topics(image, request)
        answers.append(answer)
        if not answer.HasField("next_cursor"):
            return answers
        request.cursor.CopyFrom(answer.next_cursor)
    raise AssertionError("the cursor never reached the end")


def answered(answers: list[c.DescribeTopicsResponse]) -> list[tuple[str, int]]:
    return [(t.name, p.partition) for a in answers for t in a.topics for p in t.partitions]


def cursor(topic: str, partition: int) -> c.DescribeTopicsRequest.Cursor:
    return c.DescribeTopicsRequest.Cursor(topic=topic, partition=partition)


def test_small_pages_answer_every_partition_once_in_name_order():
    for limit in (1, 2, 3, 4, 5, 11, 12, 13):
        answers = follow(image_of(SIZES), c.DescribeTopicsRequest(partition_limit=limit))
        assert answered(answers) == EVERY, f"limit {limit}"
        assert all(sum(len(t.partitions) for t in a.topics) <= limit for a in answers)
        assert len(answers) == -(-len(EVERY) // limit), "every page but the last is full"
        assert all(dict(a.broker_endpoints) == {1: "h:1", 2: "h:2", 3: "h:3"} for a in answers)


def test_a_topic_spanning_pages_appears_in_each_with_that_pages_partitions():
    answers = follow(image_of(SIZES), c.DescribeTopicsRequest(partition_limit=4))
    by_page = [[(t.name, [p.partition for p in t.partitions]) for t in a.topics] for a in answers]
    assert by_page == [
        [("a", [0, 1, 2]), ("b", [0])],
        [("b", [1, 2, 3, 4])],
        [("b", [5, 6]), ("c", [0, 1])],
    ]
    assert [a.next_cursor for a in answers[:-1]] == [cursor("b", 1), cursor("b", 5)]
    topic_ids = {t.topic_id for a in answers for t in a.topics if t.name == "b"}
    assert len(topic_ids) == 1 and topic_ids != {b""}


def test_an_answer_that_ends_exactly_at_the_limit_has_no_cursor():
    answer = cp.describe_topics(image_of(SIZES), c.DescribeTopicsRequest(partition_limit=12))
    assert not answer.HasField("next_cursor")
    assert answered([answer]) == EVERY


def test_a_cursor_past_the_end_answers_nothing():
    image = image_of(SIZES)
    for past in (cursor("d", 0), cursor("zzz", 0)):
        answer = cp.describe_topics(image, c.DescribeTopicsRequest(cursor=past))
        assert list(answer.topics) == [] and not answer.HasField("next_cursor")
    answer = cp.describe_topics(image, c.DescribeTopicsRequest(cursor=cursor("c", 2)))
    assert [(t.name, len(t.partitions)) for t in answer.topics] == [("c", 0)]


def test_the_limit_defaults_and_is_capped():
    assert cp.describe_topics_limit(0) == limits.describe_topics_partitions_default
    assert cp.describe_topics_limit(7) == 7
    assert cp.describe_topics_limit(10**9) == limits.describe_topics_partitions_max
    big = limits.describe_topics_partitions_default + 500
    image = image_of({"big": big})
    answer = cp.describe_topics(image, c.DescribeTopicsRequest())
    assert len(answer.topics[0].partitions) == limits.describe_topics_partitions_default
    assert answer.next_cursor == cursor("big", limits.describe_topics_partitions_default)
    answers = follow(image, c.DescribeTopicsRequest(partition_limit=2**31 - 1))
    assert len(answers) == 1 and answered(answers) == [("big", p) for p in range(big)]


def test_unknown_topics_answer_unknown_topic_or_partition_in_the_order_asked():
    request = c.DescribeTopicsRequest(names=["c", "nope", "b", "a", "b"], partition_limit=4)
    answers = follow(image_of(SIZES), request)
    names = [t.name for a in answers for t in a.topics]
    assert names == ["c", "nope", "b", "b", "b", "a"], "b spans 3 pages; a repeated name once"
    errors = {t.name: t.error_code for a in answers for t in a.topics}
    assert errors["nope"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert errors["a"] == errors["b"] == errors["c"] == ErrorCode.NONE
    expected = [("c", 0), ("c", 1)] + [("b", p) for p in range(7)] + [("a", p) for p in range(3)]
    assert answered(answers) == expected


def test_with_names_the_cursor_skips_the_names_before_its_topic():
    image = image_of(SIZES)
    request = c.DescribeTopicsRequest(names=["c", "b", "a"], cursor=cursor("b", 5))
    answer = cp.describe_topics(image, request)
    assert answered([answer]) == [("b", 5), ("b", 6), ("a", 0), ("a", 1), ("a", 2)]
    assert not answer.HasField("next_cursor")


def test_a_cursor_outside_the_names_or_negative_values_are_refused():
    refused = [
        c.DescribeTopicsRequest(names=["a"], cursor=cursor("b", 0)),
        c.DescribeTopicsRequest(cursor=cursor("a", -1)),
        c.DescribeTopicsRequest(partition_limit=-1),
    ]
    assert all(cp.describe_topics_problem(r) for r in refused)
    assert cp.describe_topics_problem(c.DescribeTopicsRequest(cursor=cursor("zzz", 0))) is None


def test_a_topic_deleted_between_pages_is_answered_unknown_where_its_cursor_points():
    image = image_of(SIZES)
    first = cp.describe_topics(image, c.DescribeTopicsRequest(partition_limit=5))
    assert first.next_cursor == cursor("b", 2)
    image, _ = commit_delete(image, "b")
    request = c.DescribeTopicsRequest(partition_limit=5, cursor=first.next_cursor)
    rest = follow(image, request)
    assert [(t.name, t.error_code) for t in rest[0].topics][:2] == [
        ("b", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("c", ErrorCode.NONE),
    ]
    assert answered(rest) == [("c", 0), ("c", 1)]


def commit_delete(image: MetadataImage, name: str):  # type: ignore[no-untyped-def]
    result = cp.delete_topics(image, c.DeleteTopicsRequest(names=[name]))
    return commit(image, result), result.response
