"""Goal: CreateTopics refuses a name that differs from an existing topic's only in '.' and '_'
(INVALID_TOPIC_EXCEPTION naming the other topic), as KRaft's controller does ("collides with
existing topic"): Kafka's metric names, and the tools built on them, cannot tell the two apart.
Both were created. A name collides with the topics created before it in the same request too;
names without '.' or '_' collide with nothing but themselves (TOPIC_ALREADY_EXISTS).

Method: the pure control plane over a three-broker cluster image.
"""

from __future__ import annotations

import pytest
from topic_creation import create_topics_decided

from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from tests.unit.controller.test_control_plane import DEFAULTS, cluster, create


def _create(image, *names: str, validate_only: bool = False):
    request = c.CreateTopicsRequest(
        topics=[c.CreateTopicsRequest.Topic(name=n, num_partitions=1) for n in names],
        validate_only=validate_only,
    )
    return create_topics_decided(image, request, DEFAULTS, first_id=100)


@pytest.mark.parametrize(
    ("existing", "new"),
    [("orders.v1", "orders_v1"), ("orders_v1", "orders.v1"), ("a.b_c", "a_b.c")],
)
def test_a_name_colliding_with_an_existing_topic_is_refused(existing: str, new: str) -> None:
    image, created = create(cluster(3), existing)
    assert created.error_code == ErrorCode.NONE
    result = _create(image, new)
    (answer,) = result.response.topics
    assert answer.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert repr(existing) in answer.error_message and "collides" in answer.error_message
    assert result.records == []


@pytest.mark.parametrize("validate_only", [False, True])
def test_a_name_colliding_with_one_created_before_it_in_the_request_is_refused(
    validate_only: bool,
) -> None:
    result = _create(cluster(3), "x.y", "other", "x_y", validate_only=validate_only)
    codes = [(t.name, t.error_code) for t in result.response.topics]
    assert codes == [
        ("x.y", ErrorCode.NONE),
        ("other", ErrorCode.NONE),
        ("x_y", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]
    created = {r.topic.name for r in result.records if r.HasField("topic")}
    assert created == (set() if validate_only else {"x.y", "other"})


def test_names_without_collision_characters_and_exact_repeats_are_unchanged() -> None:
    image, _ = create(cluster(3), "orders.v1")
    codes = [
        (t.name, t.error_code) for t in _create(image, "orders-v1", "ordersv1").response.topics
    ]
    assert codes == [("orders-v1", ErrorCode.NONE), ("ordersv1", ErrorCode.NONE)]
    (again,) = _create(image, "orders.v1").response.topics
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
