"""Goal: a CreateTopics request naming a topic twice creates neither and answers both
INVALID_REQUEST, as Kafka's controller does (and as CreatePartitions and
IncrementalAlterConfigs here already refuse a repeated name): the first occurrence was created
with its settings and the second answered TOPIC_ALREADY_EXISTS, so which partition count or
configs the topic got depended on the order of a list the caller may have built from a map.

Method: the pure control plane over a three-broker cluster image.
"""

from __future__ import annotations

from topic_creation import create_topics_decided

from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from tests.unit.controller.test_control_plane import DEFAULTS, cluster


def test_a_topic_named_twice_is_created_by_neither() -> None:
    image = cluster(3)
    request = c.CreateTopicsRequest(
        topics=[
            c.CreateTopicsRequest.Topic(name="t", num_partitions=3, replication_factor=1),
            c.CreateTopicsRequest.Topic(name="u", num_partitions=1, replication_factor=1),
            c.CreateTopicsRequest.Topic(name="t", num_partitions=6, replication_factor=2),
        ]
    )
    result = create_topics_decided(image, request, DEFAULTS, seed=1)
    codes = [(topic.name, topic.error_code) for topic in result.response.topics]
    assert codes == [
        ("t", ErrorCode.INVALID_REQUEST),
        ("u", ErrorCode.NONE),
        ("t", ErrorCode.INVALID_REQUEST),
    ]
    created = {record.topic.name for record in result.records if record.HasField("topic")}
    assert created == {"u"}
