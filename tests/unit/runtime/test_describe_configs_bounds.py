"""Goal: a DescribeConfigs answer is bounded by the configs that exist, not by the request: a
client (admin calls need no membership proof) naming one config a million times in one
resource got a million entries back, each with its documentation, built in the answering
controller's or broker's memory (tens of MiB of request, gigabytes of answer). A config named
twice is answered once, and a refusal of unknown names quotes only a few of them.

Method: the pure `describe_configs` over an image with one topic.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.metadata.image import TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.runtime.metadata_reads import describe_configs
from samsa.services.runtime.topic_configs import TOPIC_KEYS
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


def _image() -> MetadataImage:
    image = MetadataImage.empty()
    topic_id = b"t" * 16
    records = [
        m.MetadataRecord(topic=m.TopicRecord(name="t", topic_id=topic_id)),
        m.MetadataRecord(
            partition=m.PartitionRecord(
                topic_id=topic_id, partition=0, replicas=[1], isr=[1], leader=1
            )
        ),
    ]
    return replay(image, make_batch(image, records, 1))


def _request(names: list[str]) -> c.DescribeConfigsRequest:
    request = c.DescribeConfigsRequest()
    resource = request.resources.add()
    resource.resource.type = TOPIC_RESOURCE  # type: ignore[assignment]
    resource.resource.name = "t"
    resource.names.extend(names)
    return request


def test_a_config_named_many_times_is_answered_once() -> None:
    response = describe_configs(_image(), _request(["retention.ms"] * 100_000 + ["flush.ms"]))
    result = response.results[0]
    assert result.error_code == ErrorCode.NONE
    assert [entry.name for entry in result.entries] == ["retention.ms", "flush.ms"]
    assert len(result.entries) <= len(TOPIC_KEYS)


def test_a_refusal_quotes_few_of_the_unknown_names() -> None:
    response = describe_configs(_image(), _request([f"no.such.{i}" for i in range(100_000)]))
    result = response.results[0]
    assert result.error_code == ErrorCode.INVALID_CONFIG
    assert "no.such.0" in result.error_message
    assert len(result.error_message) < 1_000
