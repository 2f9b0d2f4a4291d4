"""Goal: IncrementalAlterConfigs refuses (INVALID_CONFIG, naming the key) the configs of
`__consumer_offsets` and `__transaction_state` that would have the coordinators' own writes
refused: a max.message.bytes below the default, to which they size their batches, and a
message.timestamp.after/before.max.ms bound, as their records carry the coordinators' clock. Both
were accepted; the leader then refused a coordinator's batch (MESSAGE_TOO_LARGE or
INVALID_TIMESTAMP, not retriable), which fails its writer and every group or transactional id of
the partition, at each retry. Raising max.message.bytes, deleting a timestamp setting (back to
the internal topics' 2^63 - 1), and the other keys stay allowed, as in Kafka.

Method: the pure control plane over a cluster image holding the two internal topics; the
coordinators' batch sizing (offsets_partition.split_write) and the broker's log settings
(partition_log_config.log_config) show what the refused values would do.
"""

from __future__ import annotations

import pytest

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.record.header import HEADER_BYTES
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.metadata.image import TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.partition_log_config import log_config
from samsa.services.controller import control_plane as cp
from samsa.services.coordinator import group_records
from samsa.services.coordinator.offsets_partition import split_write
from samsa.v1 import controller_pb2 as c
from samsa.v1 import group_records_pb2 as g
from samsa.v1 import metadata_pb2 as m
from tests.unit.controller.test_control_plane import cluster, create

INTERNAL = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


def with_internal_topics() -> MetadataImage:
    image = cluster(3)
    records = []
    for number, name in enumerate(INTERNAL, start=900):
        topic_id = number.to_bytes(16, "big")
        records.append(m.MetadataRecord(topic=m.TopicRecord(name=name, topic_id=topic_id)))
        records.append(
            m.MetadataRecord(
                partition=m.PartitionRecord(
                    topic_id=topic_id, partition=0, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1
                )
            )
        )
    return replay(image, make_batch(image, records, 1))


def alter(
    image: MetadataImage, topic: str, op: int = c.ALTER_CONFIG_OP_SET, **configs: str
) -> c.IncrementalAlterConfigsResponse.Result:
    Alteration = c.IncrementalAlterConfigsRequest.Alteration
    request = c.IncrementalAlterConfigsRequest(
        resources=[
            c.IncrementalAlterConfigsRequest.Resource(
                resource=c.ConfigResource(type=TOPIC_RESOURCE, name=topic),
                alterations=[
                    Alteration(name=key.replace("_", "."), op=op, value=value)  # type: ignore[arg-type]
                    for key, value in configs.items()
                ],
            )
        ]
    )
    return cp.incremental_alter_configs(image, request).response.results[0]


def test_a_coordinator_batch_is_larger_than_the_max_message_bytes_refused() -> None:
    # One OffsetCommit of 2,000 partitions goes as one batch of ~300 KB.
    records = [
        group_records.offset_commit(
            "g", "t" * 100, p, g.OffsetCommitValue(committed_offset=p, commit_timestamp_ms=1)
        )
        for p in range(2000)
    ]
    (part,) = split_write(records)
    size = HEADER_BYTES + sum(len(key) + len(value or b"") for key, value in part[1])
    assert 64 * 1024 < size <= limits.max_message_bytes_default
    applied = log_config({"max.message.bytes": "65536"}, CONSUMER_OFFSETS_TOPIC)
    assert applied.max_message_bytes < size  # what the leader would refuse


@pytest.mark.parametrize("topic", INTERNAL)
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max.message.bytes", "65536"),
        ("max.message.bytes", str(limits.max_message_bytes_default - 1)),
        ("message.timestamp.after.max.ms", "3600000"),
        ("message.timestamp.after.max.ms", "0"),
        ("message.timestamp.before.max.ms", "86400000"),
    ],
)
def test_what_the_coordinators_writes_cannot_take_is_refused(topic: str, key: str, value: str):
    image = with_internal_topics()
    result = alter(image, topic, **{key.replace(".", "_"): value})
    assert result.error_code == ErrorCode.INVALID_CONFIG
    assert key in result.error_message and "internal topic" in result.error_message


@pytest.mark.parametrize("topic", INTERNAL)
def test_other_changes_to_internal_topics_stay_allowed(topic: str) -> None:
    image = with_internal_topics()
    raised = str(2 * limits.max_message_bytes_default)
    for configs in (
        {"max_message_bytes": raised},
        {"segment_bytes": str(200 * limits.MIB), "retention_ms": "-1"},
        {"message_timestamp_after_max_ms": str(2**63 - 1)},
    ):
        assert alter(image, topic, **configs).error_code == ErrorCode.NONE, configs
    deleted = alter(image, topic, op=c.ALTER_CONFIG_OP_DELETE, message_timestamp_after_max_ms="")
    assert deleted.error_code == ErrorCode.NONE


def test_other_topics_keep_every_value_kafka_allows() -> None:
    image, _ = create(cluster(3), "orders")
    for configs in (
        {"max_message_bytes": "65536"},
        {"message_timestamp_after_max_ms": "0", "message_timestamp_before_max_ms": "1000"},
    ):
        assert alter(image, "orders", **configs).error_code == ErrorCode.NONE, configs
