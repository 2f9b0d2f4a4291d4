"""Goal: the replication throttle configs (KIP-73) are taken and refused as the README says: a
broker id's resource takes its two throttle rates (a long >= 0) and nothing else; a topic takes
`*.replication.throttled.replicas` as `*` or partition:brokerId pairs, and garbage is refused with
INVALID_CONFIG naming the key; both are described and survive a snapshot.

Method: IncrementalAlterConfigs and DescribeConfigs decided against an image and committed with
the real replay (test_cluster_defaults_control's helpers).
"""

from __future__ import annotations

from test_cluster_defaults_control import SET, alter_defaults, create, describe, entries
from test_control_plane import alter_config, cluster

from samsa.common.errors import ErrorCode
from samsa.metadata.image import BROKER_RESOURCE as BROKER
from samsa.metadata.image import TOPIC_RESOURCE as TOPIC
from samsa.metadata.replication_throttles import broker_rates
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import controller_pb2 as c

DELETE = c.ALTER_CONFIG_OP_DELETE
LEADER = "leader.replication.throttled.rate"
FOLLOWER = "follower.replication.throttled.rate"


def test_a_broker_id_takes_its_throttle_rates() -> None:
    image = cluster()
    image, result, records = alter_defaults(
        image, (LEADER, SET, "200000"), (FOLLOWER, SET, "300000"), name="2"
    )
    assert result.error_code == ErrorCode.NONE and len(records) == 2
    assert broker_rates(image, 2) == (200000, 300000)
    assert broker_rates(image, 1) == (2**63 - 1, 2**63 - 1)
    described = entries(describe(image, BROKER, "2"))
    assert described[LEADER] == ("200000", c.CONFIG_SOURCE_DYNAMIC)
    assert entries(describe(image, BROKER, "1"))[LEADER] == (
        str(2**63 - 1),
        c.CONFIG_SOURCE_DEFAULT,
    )
    assert from_snapshot(to_snapshot(image)).configs == image.configs
    image, result, _ = alter_defaults(image, (LEADER, DELETE, ""), name="2")
    assert broker_rates(image, 2) == (2**63 - 1, 300000)


def test_bad_rates_and_other_keys_on_a_broker_id_are_refused() -> None:
    image = cluster()
    for value in ("-1", "fast", "1.5"):
        unchanged, result, records = alter_defaults(image, (LEADER, SET, value), name="1")
        assert result.error_code == ErrorCode.INVALID_CONFIG and not records
        assert LEADER in result.error_message and "bytes per second" in result.error_message
        assert unchanged is image
    _, result, _ = alter_defaults(
        image, (LEADER, SET, "1"), ("log.retention.ms", SET, "1"), name="1"
    )
    assert result.error_code == ErrorCode.INVALID_REQUEST and "throttle" in result.error_message
    _, result, _ = alter_defaults(image, (LEADER, SET, "1"), name="01")
    assert result.error_code == ErrorCode.INVALID_REQUEST


def test_a_topic_takes_throttled_replica_lists() -> None:
    image, _ = create(cluster(), "t", partitions=2)
    image, result = alter_config(
        image,
        "t",
        ("leader.replication.throttled.replicas", SET, "0:1,1:1"),
        ("follower.replication.throttled.replicas", SET, "*"),
    )
    assert result.error_code == ErrorCode.NONE
    described = entries(describe(image, TOPIC, "t"))
    assert described["leader.replication.throttled.replicas"] == (
        "0:1,1:1",
        c.CONFIG_SOURCE_DYNAMIC,
    )
    for garbage in ("0", "0:x", "*,0:1", "1:2:3"):
        unchanged, result = alter_config(
            image, "t", ("follower.replication.throttled.replicas", SET, garbage)
        )
        assert result.error_code == ErrorCode.INVALID_CONFIG
        assert "follower.replication.throttled.replicas" in result.error_message
        assert "partition:brokerId" in result.error_message
        assert unchanged is image
