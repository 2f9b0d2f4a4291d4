"""Goal: DescribeConfigs shows the values the brokers apply to the internal topics when none is
set: their log defaults (INTERNAL_TOPIC_LOG_DEFAULTS, message.timestamp.after.max.ms = 2^63 - 1,
which partition_log_config.log_config puts under their configs) rather than other topics'. An
internal topic created before that default was set, or whose setting was deleted, was described
with 3600000 (one hour) while every broker took any future time.

Method: the pure `describe_configs` over an image with __consumer_offsets and an ordinary topic,
neither with a dynamic config, against `log_config` for each.
"""

from __future__ import annotations

from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.partition_log_config import log_config
from samsa.services.runtime.metadata_reads import describe_configs
from samsa.services.runtime.topic_configs import LOG_KEYS
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

TOPICS = (CONSUMER_OFFSETS_TOPIC, "orders")


def _image() -> MetadataImage:
    image = MetadataImage.empty()
    records = []
    for number, name in enumerate(TOPICS, start=1):
        topic_id = number.to_bytes(16, "big")
        records.append(m.MetadataRecord(topic=m.TopicRecord(name=name, topic_id=topic_id)))
        records.append(
            m.MetadataRecord(
                partition=m.PartitionRecord(
                    topic_id=topic_id, partition=0, replicas=[1], isr=[1], leader=1
                )
            )
        )
    return replay(image, make_batch(image, records, 1))


def test_every_described_log_default_is_the_one_brokers_apply() -> None:
    request = c.DescribeConfigsRequest()
    for name in TOPICS:
        resource = request.resources.add()
        resource.resource.type = TOPIC_RESOURCE  # type: ignore[assignment]
        resource.resource.name = name
    answer = describe_configs(_image(), request)
    for name, result in zip(TOPICS, answer.results, strict=True):
        applied = log_config({}, name)
        described = {e.name: e.value for e in result.entries if e.name in LOG_KEYS}
        assert described["message.timestamp.after.max.ms"] == str(
            applied.message_timestamp_after_max_ms
        )
        for key, value in described.items():
            parsed = log_config({key: value}, name)
            assert parsed == applied, (name, key, value)
    internal = {e.name: e.value for e in answer.results[0].entries}
    assert internal["message.timestamp.after.max.ms"] == str(2**63 - 1)
    ordinary = {e.name: e.value for e in answer.results[1].entries}
    assert ordinary["message.timestamp.after.max.ms"] == "3600000"
