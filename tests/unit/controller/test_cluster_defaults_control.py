"""Goal: the cluster-wide topic defaults (the broker resource named "", KIP-226's
--entity-default) are taken, refused and resolved as the README says: a topic's own config >
the cluster default > the built-in default, for the controller, the brokers and DescribeConfigs;
a per-broker name is refused (it takes only the replication throttle rates:
test_broker_throttle_control.py); new defaults that would make a topic invalid are refused
naming it; validate_only writes nothing; the defaults survive a snapshot.

Method: IncrementalAlterConfigs and DescribeConfigs decided against an image and committed with
the real replay (test_control_plane's helpers); the broker's view through metadata_diff.
"""

from __future__ import annotations

from dataclasses import replace

import coordinator_helpers
from test_control_plane import DEFAULTS, alter_config, cluster, commit, heartbeat
from test_controller_review import _offline_with_out_of_sync_follower_fenced
from topic_creation import create_topics_decided

from samsa.common.errors import ErrorCode
from samsa.metadata.image import BROKER_RESOURCE as BROKER
from samsa.metadata.image import TOPIC_RESOURCE as TOPIC
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.metadata.topic_defaults import (
    defaults_for_topic,
    effective_topic_configs,
    topic_defaults,
)
from samsa.services.broker.metadata.metadata_diff import UpdateConfig, partition_changes
from samsa.services.controller import control_plane as cp
from samsa.services.controller.eligible_leaders import min_insync_replicas
from samsa.services.controller.unclean_election import unclean_allowed
from samsa.v1 import controller_pb2 as c

SET, DELETE = c.ALTER_CONFIG_OP_SET, c.ALTER_CONFIG_OP_DELETE


def alter_defaults(image: MetadataImage, *ops, name: str = "", validate_only: bool = False):
    request = c.IncrementalAlterConfigsRequest(
        validate_only=validate_only,
        resources=[
            c.IncrementalAlterConfigsRequest.Resource(
                resource=c.ConfigResource(type=BROKER, name=name),
                alterations=[
                    c.IncrementalAlterConfigsRequest.Alteration(name=k, op=op, value=v)
                    for k, op, v in ops
                ],
            )
        ],
    )
    result = cp.incremental_alter_configs(image, request)
    return commit(image, result), result.response.results[0], result.records


def create(image: MetadataImage, name: str, partitions: int = 3, factor: int = 1, **configs):
    topic = c.CreateTopicsRequest.Topic(
        name=name, num_partitions=partitions, replication_factor=factor, configs=configs
    )
    request = c.CreateTopicsRequest(topics=[topic])
    result = create_topics_decided(image, request, DEFAULTS, first_id=len(image.topics) + 1)
    return commit(image, result), result.response.topics[0]


def describe(image: MetadataImage, kind: int, name: str) -> c.DescribeConfigsResponse.Result:
    resource = c.ConfigResource(type=kind, name=name)  # type: ignore[arg-type]
    request = c.DescribeConfigsRequest(
        resources=[c.DescribeConfigsRequest.Resource(resource=resource)]
    )
    return cp.describe_configs(image, request).results[0]


def entries(result: c.DescribeConfigsResponse.Result) -> dict[str, tuple[str, int]]:
    return {e.name: (e.value, e.source) for e in result.entries}


def test_a_default_applies_to_topics_without_their_own_value() -> None:
    image, _ = create(cluster(), "plain")
    image, _ = create(image, "own", **{"retention.ms": "5000"})
    image, result, _ = alter_defaults(image, ("log.retention.ms", SET, "60000"))
    assert result.error_code == ErrorCode.NONE
    assert effective_topic_configs(image, "plain")["retention.ms"] == "60000"
    assert effective_topic_configs(image, "own")["retention.ms"] == "5000"
    plain = entries(describe(image, TOPIC, "plain"))
    own = entries(describe(image, TOPIC, "own"))
    assert plain["retention.ms"] == ("60000", c.CONFIG_SOURCE_DYNAMIC_DEFAULT)
    assert own["retention.ms"] == ("5000", c.CONFIG_SOURCE_DYNAMIC)
    assert plain["segment.bytes"][1] == c.CONFIG_SOURCE_DEFAULT
    image, result, _ = alter_defaults(image, ("log.retention.ms", DELETE, ""))
    assert "retention.ms" not in effective_topic_configs(image, "plain")
    plain = entries(describe(image, TOPIC, "plain"))
    assert plain["retention.ms"] == ("604800000", c.CONFIG_SOURCE_DEFAULT)


def test_the_brokers_reconfigure_the_logs_that_take_the_default() -> None:
    image, _ = create(cluster(1), "plain", partitions=1)
    image, _ = create(image, "own", partitions=1, **{"segment.bytes": "3000000"})
    after, _, _ = alter_defaults(image, ("log.segment.bytes", SET, "2000000"))
    actions = partition_changes(image, after, broker_id=1)
    assert actions == [UpdateConfig("plain", 0, {"segment.bytes": "2000000"})]


def test_retention_synonyms_resolve_as_kafka_does() -> None:
    assert topic_defaults({"log.retention.hours": "2"}) == {"retention.ms": "7200000"}
    both = {"log.retention.hours": "2", "log.retention.minutes": "3"}
    assert topic_defaults(both) == {"retention.ms": "180000"}
    assert topic_defaults({**both, "log.retention.ms": "5"}) == {"retention.ms": "5"}
    assert topic_defaults({"log.retention.hours": "-1"}) == {"retention.ms": "-1"}
    assert topic_defaults({"message.max.bytes": "100"}) == {"max.message.bytes": "100"}


def test_the_controller_reads_min_isr_and_unclean_election_through_the_defaults() -> None:
    image, _ = create(cluster(), "plain", factor=3)
    image, _ = create(image, "own", factor=3, **{"min.insync.replicas": "1"})
    image, result, _ = alter_defaults(
        image, ("min.insync.replicas", SET, "2"), ("unclean.leader.election.enable", SET, "true")
    )
    assert result.error_code == ErrorCode.NONE
    assert min_insync_replicas(image, "plain") == 2 and min_insync_replicas(image, "own") == 1
    assert unclean_allowed(image, "plain") and unclean_allowed(image, "own")


def test_a_per_broker_name_is_refused_saying_why() -> None:
    image, _ = create(cluster(), "t")
    unchanged, result, records = alter_defaults(image, ("log.retention.ms", SET, "1"), name="1")
    assert result.error_code == ErrorCode.INVALID_REQUEST and not records
    assert "cluster-wide only" in result.error_message and "every replica" in result.error_message
    assert unchanged is image
    assert describe(image, BROKER, "b1").error_code == (ErrorCode.INVALID_REQUEST)


def test_unknown_keys_and_bad_values_are_refused_naming_the_key() -> None:
    image = cluster()
    _, result, records = alter_defaults(image, ("retention.ms", SET, "1"))
    assert result.error_code == ErrorCode.INVALID_CONFIG and "retention.ms" in result.error_message
    _, result, records = alter_defaults(image, ("log.retention.hours", SET, "two"))
    assert result.error_code == ErrorCode.INVALID_CONFIG and not records
    assert "log.retention.hours" in result.error_message
    _, result, records = alter_defaults(image, ("log.cleanup.policy", SET, "sometimes"))
    assert result.error_code == ErrorCode.INVALID_CONFIG and not records


def test_defaults_that_would_break_a_topic_are_refused_naming_it() -> None:
    image, _ = create(cluster(), "small", **{"segment.bytes": "1500000"})
    image, _ = create(image, "zebra")
    unchanged, result, records = alter_defaults(image, ("message.max.bytes", SET, "2000000"))
    assert result.error_code == ErrorCode.INVALID_CONFIG and not records
    assert "'small'" in result.error_message and "zebra" not in result.error_message
    assert unchanged is image
    # a topic created later is held to the defaults too
    image, _, _ = alter_defaults(image, ("log.segment.bytes", SET, "1500000"))
    _, created = create(image, "tiny", **{"max.message.bytes": "2000000"})
    assert created.error_code == ErrorCode.INVALID_CONFIG
    assert "cluster-wide defaults" in created.error_message


def test_min_isr_default_above_a_topics_replication_factor_is_refused() -> None:
    image, _ = create(cluster(), "single", factor=1)
    _, result, records = alter_defaults(image, ("min.insync.replicas", SET, "2"))
    assert result.error_code == ErrorCode.INVALID_CONFIG and "'single'" in result.error_message
    assert not records


def test_validate_only_writes_nothing() -> None:
    image, _ = create(cluster(), "t")
    unchanged, result, records = alter_defaults(
        image, ("log.retention.ms", SET, "1000"), validate_only=True
    )
    assert result.error_code == ErrorCode.NONE and not records and unchanged is image


def test_internal_topics_keep_what_their_coordinators_need() -> None:
    internal = "__consumer_offsets"
    defaults = {"message.max.bytes": "500000", "log.retention.ms": "1000"}
    taken = defaults_for_topic(internal, defaults)
    assert "max.message.bytes" not in taken and taken["retention.ms"] == "1000"
    assert taken["message.timestamp.after.max.ms"] == str(2**63 - 1)


def test_the_defaults_described_and_carried_by_a_snapshot() -> None:
    image, _ = create(cluster(), "t")
    image, _, _ = alter_defaults(
        image, ("log.retention.hours", SET, "1"), ("log.cleanup.policy", SET, "compact")
    )
    described = entries(describe(image, BROKER, ""))
    assert described["log.retention.hours"] == ("1", c.CONFIG_SOURCE_DYNAMIC_DEFAULT)
    assert described["log.retention.minutes"] == ("10080", c.CONFIG_SOURCE_DEFAULT)
    assert described["log.segment.bytes"][1] == c.CONFIG_SOURCE_DEFAULT
    topic = entries(describe(image, TOPIC, "t"))
    assert topic["retention.ms"] == ("3600000", c.CONFIG_SOURCE_DYNAMIC_DEFAULT)
    assert topic["cleanup.policy"] == ("compact", c.CONFIG_SOURCE_DYNAMIC_DEFAULT)
    restored = from_snapshot(to_snapshot(image))
    assert restored.configs == image.configs
    assert effective_topic_configs(restored, "t")["retention.ms"] == "3600000"


def test_lowering_the_min_isr_default_clears_the_eligible_leaders() -> None:
    image, _ = create(cluster(), "t", partitions=1, factor=3)
    image, _, _ = alter_defaults(image, ("min.insync.replicas", SET, "3"))
    topic = image.topics["t"]
    state = topic.partitions[0]
    shrunk = PartitionState(
        partition=0,
        replicas=state.replicas,
        isr=state.replicas[:2],
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.partition_epoch,
        elr=state.replicas[2:],
    )
    image = replace(image, topics={"t": replace(topic, partitions={0: shrunk})})
    _, result, records = alter_defaults(image, ("min.insync.replicas", SET, "2"))
    assert result.error_code == ErrorCode.NONE
    changes = [r.partition_change for r in records if r.HasField("partition_change")]
    assert len(changes) == 1 and changes[0].HasField("eligible_leader_replicas")


def test_an_unclean_default_turned_on_elects_a_live_replica_of_an_offline_partition() -> None:
    image, _, follower = _offline_with_out_of_sync_follower_fenced()
    image, _ = heartbeat(image, follower)  # back, but not allowed to lead yet
    image, result, _ = alter_defaults(image, ("unclean.leader.election.enable", SET, "true"))
    assert result.error_code == ErrorCode.NONE
    state = image.topics["t"].partitions[0]
    assert (state.leader, state.isr) == (follower, (follower,))


def test_deleting_a_topics_own_false_under_an_unclean_default_elects_as_well() -> None:
    image, _, follower = _offline_with_out_of_sync_follower_fenced()
    image, _ = alter_config(image, "t", ("unclean.leader.election.enable", SET, "false"))
    image, _, _ = alter_defaults(image, ("unclean.leader.election.enable", SET, "true"))
    image, _ = heartbeat(image, follower)
    assert image.topics["t"].partitions[0].leader == -1, "its own false still holds"
    image, _ = alter_config(image, "t", ("unclean.leader.election.enable", DELETE, ""))
    state = image.topics["t"].partitions[0]
    assert (state.leader, state.isr) == (follower, (follower,))


def test_an_internal_topic_created_under_a_min_isr_default_above_its_factor_is_capped() -> None:
    image = coordinator_helpers.with_brokers(2)
    image, _ = coordinator_helpers.register(image, 1)
    image, result, _ = alter_defaults(image, ("min.insync.replicas", SET, "3"))
    assert result.error_code == ErrorCode.NONE, "no topic yet that it would break"
    image, _ = coordinator_helpers.create_coordinator_topics(image)
    assert image.topic_configs("__consumer_offsets")["min.insync.replicas"] == "2"
    assert min_insync_replicas(image, "__consumer_offsets") == 2
