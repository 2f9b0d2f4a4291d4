"""Goal: Admin's topic, config and cluster answers become the right dataclasses and errors.

Method: the pure functions of samsa.client.cluster_admin on protobuf answers built by hand (no
ports), and that Admin still exports the same dataclasses. (test_client_cores_are_pure.py keeps
the module pure.)
"""

from __future__ import annotations

import pytest

from samsa.client import admin, cluster_admin
from samsa.client.cluster_admin import (
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    ControllerInfo,
    CoordinatorInfo,
    PartitionInfo,
    TopicDescription,
    cluster_description_of,
    config_entries_of,
    raise_first,
    topic_descriptions_of,
)
from samsa.client.errors import TopicError
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c


def test_the_first_failed_result_is_raised_and_success_is_silent() -> None:
    ok = c.DescribeTopicsResponse.Topic(name="a")
    missing = c.DescribeTopicsResponse.Topic(
        name="b",
        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # type: ignore[arg-type]
        error_message="b does not exist",
    )
    invalid = c.DescribeTopicsResponse.Topic(
        name="c",
        error_code=ErrorCode.INVALID_REQUEST,  # type: ignore[arg-type]
        error_message="c is invalid",
    )
    raise_first([ok, ok])
    with pytest.raises(TopicError, match="b does not exist") as raised:
        raise_first([ok, missing, invalid])
    assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_the_raised_error_names_the_topic_that_failed() -> None:
    """One call creates, alters or deletes many topics and raises for the first that failed:
    the error must say which, when the server's message does not (it names the topic once)."""
    created = c.CreateTopicsResponse.Result(name="a")
    refused = c.CreateTopicsResponse.Result(
        name="b",
        error_code=ErrorCode.INVALID_PARTITIONS,  # type: ignore[arg-type]
        error_message="num_partitions=0: use 1 to 10000 (or -1 for the cluster default)",
    )
    with pytest.raises(TopicError) as raised:
        raise_first([created, refused])
    assert str(raised.value) == f"topic 'b': {refused.error_message}"
    assert raised.value.code == ErrorCode.INVALID_PARTITIONS

    config = c.IncrementalAlterConfigsResponse.Result(
        resource=c.ConfigResource(type=1, name="orders"),
        error_code=ErrorCode.INVALID_CONFIG,  # type: ignore[arg-type]
        error_message="unknown topic config 'nope'",
    )
    with pytest.raises(TopicError, match=r"^topic 'orders': unknown topic config 'nope'$"):
        raise_first([config])

    named = c.CreateTopicsResponse.Result(
        name="b",
        error_code=ErrorCode.TOPIC_ALREADY_EXISTS,  # type: ignore[arg-type]
        error_message="topic 'b' already exists",
    )
    with pytest.raises(TopicError, match=r"^topic 'b' already exists$"):
        raise_first([named])


def test_topics_are_described_with_their_partitions_in_answer_order() -> None:
    topic = c.DescribeTopicsResponse.Topic(name="t", topic_id=b"\x01" * 16)
    topic.partitions.add(partition=0, leader=2, leader_epoch=5, replicas=[2, 3], isr=[2])
    topic.partitions.add(partition=1, leader=-1, leader_epoch=0, replicas=[3], isr=[])
    assert topic_descriptions_of([topic]) == {
        "t": TopicDescription(
            "t",
            b"\x01" * 16,
            (PartitionInfo(0, 2, 5, (2, 3), (2,)), PartitionInfo(1, -1, 0, (3,), ())),
        )
    }


def test_the_cluster_is_described_with_its_controllers_brokers_and_coordinators() -> None:
    answer = c.DescribeClusterResponse(cluster_id="k")
    answer.status.metadata_offset = 42
    answer.controllers.add(node_id=1, endpoint="c1:1", is_active=True)
    answer.brokers.add(broker_id=7, endpoint="b7:1", rack="r", broker_epoch=3, is_fenced=True)
    answer.coordinators.add(
        coordinator_id=9, endpoint="g9:1", coordinator_epoch=4, is_fenced=False, owned_partitions=5
    )
    assert cluster_description_of(answer) == ClusterDescription(
        "k",
        (ControllerInfo(1, "c1:1", True),),
        (BrokerInfo(7, "b7:1", "r", 3, True),),
        42,
        (CoordinatorInfo(9, "g9:1", 4, False, 5),),
    )


def test_config_sources_are_named_and_an_unknown_one_says_so() -> None:
    result = c.DescribeConfigsResponse.Result()
    result.entries.add(name="a", value="1", source=c.CONFIG_SOURCE_DYNAMIC, documentation="A")
    result.entries.add(name="b", value="2", source=c.CONFIG_SOURCE_DEFAULT)
    result.entries.add(name="c", value="3", source=c.CONFIG_SOURCE_DYNAMIC_DEFAULT)
    result.entries.add(name="d", value="4", source=c.CONFIG_SOURCE_UNSPECIFIED)
    assert config_entries_of(result) == {
        "a": ConfigEntry("a", "1", "dynamic", "A"),
        "b": ConfigEntry("b", "2", "default", ""),
        "c": ConfigEntry("c", "3", "dynamic default", ""),
        "d": ConfigEntry("d", "4", "unknown", ""),
    }


def test_admin_exports_the_same_dataclasses() -> None:
    for name in ("NewTopic", "TopicDescription", "ClusterDescription", "ConfigEntry"):
        assert name in admin.__all__
        assert getattr(admin, name) is getattr(cluster_admin, name)
