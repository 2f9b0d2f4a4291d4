"""The controller's decisions, applied with the real replay: placement, fencing, epochs, errors."""

from __future__ import annotations

import random

import pytest
from topic_creation import create_topics_decided

from samsa.common.errors import ErrorCode
from samsa.metadata.image import NO_LEADER, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c

DEFAULTS = cp.ClusterDefaults(num_partitions=3, default_replication_factor=1)


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:
    if not result.records:
        return image
    return replay(image, make_batch(image, result.records, 1))


def register(image: MetadataImage, broker_id: int, incarnation: str = "a", rack: str = ""):
    result = cp.register_broker(
        image,
        c.RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id=incarnation, endpoint=f"h:{broker_id}", rack=rack
        ),
        liveness=BrokerLiveness(),
        now_ms=0,
        session_timeout_ms=1000,
    )
    return commit(image, result), result.response


def heartbeat(image: MetadataImage, broker_id: int, **fields):
    broker = image.brokers[broker_id]
    request = c.BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=fields.pop("epoch", broker.broker_epoch),
        metadata_offset=fields.pop("offset", image.end_offset),
        **fields,
    )
    result = cp.broker_heartbeat(image, request)
    return commit(image, result), result.response


def cluster(brokers: int = 3, racks: list[str] | None = None) -> MetadataImage:
    image = MetadataImage.empty()
    for broker_id in range(1, brokers + 1):
        image, _ = register(image, broker_id, rack=racks[broker_id - 1] if racks else "")
        image, _ = heartbeat(image, broker_id)
    return image


def create(image: MetadataImage, name: str, partitions: int = 3, factor: int = 1, **configs):
    request = c.CreateTopicsRequest(
        topics=[
            c.CreateTopicsRequest.Topic(
                name=name, num_partitions=partitions, replication_factor=factor, configs=configs
            )
        ]
    )
    result = create_topics_decided(image, request, DEFAULTS)
    return commit(image, result), result.response.topics[0]


def test_a_broker_registers_fenced_with_its_offset_as_epoch_and_is_unfenced_when_caught_up():
    image, response = register(MetadataImage.empty(), 1)
    assert response.broker_epoch == 0 and image.brokers[1].fenced
    behind, answer = heartbeat(image, 1, offset=0)
    assert behind.brokers[1].fenced and not answer.is_caught_up and answer.is_fenced
    image, answer = heartbeat(image, 1, offset=1)
    assert not image.brokers[1].fenced and answer.is_caught_up and not answer.is_fenced


def test_a_stale_epoch_heartbeat_is_refused():
    image = cluster(1)
    image, _ = register(image, 1, incarnation="restarted")
    _, answer = heartbeat(image, 1, epoch=0)
    assert answer.status.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_a_second_live_process_with_the_same_id_is_refused():
    image = cluster(1)
    liveness = BrokerLiveness()
    liveness.heartbeat(1, image.brokers[1].broker_epoch, now_ms=100)
    request = c.RegisterBrokerRequest(broker_id=1, incarnation_id="other", endpoint="h:9")
    result = cp.register_broker(
        image, request, liveness=liveness, now_ms=500, session_timeout_ms=1000
    )
    assert result.response.status.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert not result.records
    later = cp.register_broker(
        image, request, liveness=liveness, now_ms=5000, session_timeout_ms=1000
    )
    assert later.records, "once the old session expired, the new incarnation may register"


def test_topics_are_placed_round_robin_over_unfenced_brokers():
    image, result = create(cluster(3), "orders", partitions=6, factor=2)
    assert result.error_code == 0
    partitions = image.topics["orders"].partitions
    assert len(partitions) == 6
    leaders = [partitions[p].leader for p in range(6)]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3], "every broker leads equally"
    for state in partitions.values():
        assert len(set(state.replicas)) == 2 and state.leader == state.replicas[0]
        assert state.isr == state.replicas and state.leader_epoch == 0


def test_rack_aware_placement_spreads_replicas_over_racks():
    image, _ = create(cluster(4, racks=["a", "a", "b", "b"]), "t", partitions=8, factor=2)
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for state in image.topics["t"].partitions.values():
        assert {racks[r] for r in state.replicas} == {"a", "b"}


def test_brokers_without_a_rack_count_as_one_more_rack():
    # A cluster half-way to racks: brokers 3 and 4 have none yet. Placement stays rack-aware,
    # with them as one rack of their own (KRaft's placer), instead of ignoring every rack and
    # putting some partitions' replicas all in rack "a".
    image, _ = create(cluster(4, racks=["a", "a", "", ""]), "t", partitions=8, factor=2)
    racks = {1: "a", 2: "a", 3: "", 4: ""}
    for state in image.topics["t"].partitions.values():
        assert {racks[r] for r in state.replicas} == {"a", ""}, state.replicas


@pytest.mark.parametrize(
    ("name", "partitions", "factor", "configs", "code"),
    [
        ("bad name!", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("t", 0, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("t", 1, 4, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("t", 1, 1, {"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG),
        ("t", 1, 1, {"no.such.key": "1"}, ErrorCode.INVALID_CONFIG),
        ("t", 1, 1, {"min.insync.replicas": "2"}, ErrorCode.INVALID_CONFIG),
        ("t", 1, 1, {"compression.type": "gzip"}, ErrorCode.INVALID_CONFIG),
    ],
)
def test_invalid_topics_are_refused_with_a_message_and_create_nothing(
    name, partitions, factor, configs, code
):
    before = cluster(3)
    image, result = create(before, name, partitions, factor, **configs)
    assert result.error_code == code and result.error_message
    assert image is before


def test_an_existing_topic_is_not_created_again():
    image, _ = create(cluster(), "t")
    again, result = create(image, "t")
    assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and again is image


def test_fencing_moves_leaders_to_live_isr_members_with_a_new_epoch():
    image, _ = create(cluster(3), "t", partitions=3, factor=3)
    led_by_1 = [s.partition for s in image.topics["t"].partitions.values() if s.leader == 1]
    image = commit(image, cp.fence_brokers(image, [1]))
    assert image.brokers[1].fenced
    for partition in led_by_1:
        state = image.topics["t"].partitions[partition]
        assert state.leader in (2, 3) and state.leader_epoch == 1
    for state in image.topics["t"].partitions.values():
        assert 1 not in state.isr, "a fenced broker leaves every ISR"


def test_a_single_replica_partition_goes_offline_and_returns_with_its_broker():
    image, _ = create(cluster(2), "t", partitions=2, factor=1)
    state = next(s for s in image.topics["t"].partitions.values() if s.leader == 1)
    image = commit(image, cp.fence_brokers(image, [1]))
    offline = image.topics["t"].partitions[state.partition]
    assert offline.leader == NO_LEADER and offline.isr == (1,), "KIP-966: keep the last member"
    image, _ = register(image, 1, incarnation="restarted")
    image, _ = heartbeat(image, 1)
    back = image.topics["t"].partitions[state.partition]
    assert back.leader == 1 and back.leader_epoch == offline.leader_epoch + 1


def test_controlled_shutdown_fences_and_moves_leaderships():
    image, _ = create(cluster(2), "t", partitions=2, factor=2)
    image, answer = heartbeat(image, 1, want_shutdown=True)
    assert answer.should_shut_down and image.brokers[1].fenced
    assert all(s.leader == 2 for s in image.topics["t"].partitions.values())


def test_delete_and_create_partitions():
    image, _ = create(cluster(3), "t", partitions=2)
    response = cp.create_partitions(
        image,
        c.CreatePartitionsRequest(topics=[c.CreatePartitionsRequest.Topic(name="t", count=2)]),
        rng=random.Random(1),
    ).response
    assert response.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
    result = cp.create_partitions(
        image,
        c.CreatePartitionsRequest(topics=[c.CreatePartitionsRequest.Topic(name="t", count=5)]),
        rng=random.Random(1),
    )
    image = commit(image, result)
    assert sorted(image.topics["t"].partitions) == [0, 1, 2, 3, 4]
    result = cp.delete_topics(image, c.DeleteTopicsRequest(names=["t", "nope"]))
    assert [t.error_code for t in result.response.topics] == [
        0,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert "t" not in commit(image, result).topics


def alter_config(image, name, *ops):
    request = c.IncrementalAlterConfigsRequest(
        resources=[
            c.IncrementalAlterConfigsRequest.Resource(
                resource=c.ConfigResource(type=1, name=name),
                alterations=[
                    c.IncrementalAlterConfigsRequest.Alteration(name=k, op=op, value=v)
                    for k, op, v in ops
                ],
            )
        ]
    )
    result = cp.incremental_alter_configs(image, request)
    return commit(image, result), result.response.results[0]


def test_incremental_alter_configs_set_append_delete_and_validate_the_whole():
    image, _ = create(cluster(), "t")
    image, result = alter_config(image, "t", ("retention.ms", c.ALTER_CONFIG_OP_SET, "1000"))
    assert result.error_code == 0 and image.topic_configs("t") == {"retention.ms": "1000"}
    image, _ = alter_config(image, "t", ("cleanup.policy", c.ALTER_CONFIG_OP_APPEND, "compact"))
    assert image.topic_configs("t")["cleanup.policy"] == "delete,compact"
    image, _ = alter_config(image, "t", ("retention.ms", c.ALTER_CONFIG_OP_DELETE, ""))
    assert "retention.ms" not in image.topic_configs("t")
    unchanged, result = alter_config(
        image,
        "t",
        ("segment.bytes", c.ALTER_CONFIG_OP_SET, "2048"),
        ("max.message.bytes", c.ALTER_CONFIG_OP_SET, "4096"),
    )
    assert result.error_code == ErrorCode.INVALID_CONFIG and "segment.bytes" in result.error_message
    assert unchanged is image
    described = cp.describe_configs(
        image,
        c.DescribeConfigsRequest(
            resources=[
                c.DescribeConfigsRequest.Resource(resource=c.ConfigResource(type=1, name="t"))
            ]
        ),
    ).results[0]
    by_name = {e.name: e for e in described.entries}
    assert by_name["cleanup.policy"].source == c.CONFIG_SOURCE_DYNAMIC
    assert by_name["retention.ms"].source == c.CONFIG_SOURCE_DEFAULT
    assert by_name["retention.ms"].value == "604800000" and by_name["retention.ms"].documentation


def test_a_resource_or_a_config_named_twice_is_refused_whole():
    """Each would be checked against the image alone, and their records applied in order could
    make a config no check saw: Kafka refuses both with INVALID_REQUEST."""
    image, _ = create(cluster(), "t")

    def resource(name, key, value):
        return c.IncrementalAlterConfigsRequest.Resource(
            resource=c.ConfigResource(type=1, name=name),
            alterations=[
                c.IncrementalAlterConfigsRequest.Alteration(
                    name=key, op=c.ALTER_CONFIG_OP_SET, value=value
                )
            ],
        )

    request = c.IncrementalAlterConfigsRequest(
        resources=[resource("t", "retention.ms", "1"), resource("t", "retention.ms", "2")]
    )
    result = cp.incremental_alter_configs(image, request)
    assert [r.error_code for r in result.response.results] == [ErrorCode.INVALID_REQUEST] * 2
    assert "named twice" in result.response.results[0].error_message
    assert commit(image, result) is image
    unchanged, result = alter_config(
        image,
        "t",
        ("retention.ms", c.ALTER_CONFIG_OP_SET, "1000"),
        ("retention.ms", c.ALTER_CONFIG_OP_DELETE, ""),
    )
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert "retention.ms is altered twice" in result.error_message
    assert unchanged is image


def test_describe_topics_answers_unknown_topics_per_topic():
    image, _ = create(cluster(), "t", partitions=2)
    response = cp.describe_topics(image, c.DescribeTopicsRequest(names=["t", "u"]))
    assert [t.error_code for t in response.topics] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert len(response.topics[0].partitions) == 2
    assert dict(response.broker_endpoints) == {1: "h:1", 2: "h:2", 3: "h:3"}


def alter(
    image, leader, isr, *, broker_epoch=None, leader_epoch=None, partition_epoch=None, epochs=None
):
    """Propose `isr` for t-0; `epochs`: the members' broker epochs as the leader saw them
    fetch (KIP-903), by default each one's current registration."""
    state = image.topics["t"].partitions[0]
    if epochs is None:
        epochs = {r: image.brokers[r].broker_epoch for r in isr if r in image.brokers}
    request = c.AlterPartitionRequest(
        broker_id=leader,
        broker_epoch=image.brokers[leader].broker_epoch if broker_epoch is None else broker_epoch,
    )
    request.partitions.add(
        topic="t",
        partition=0,
        leader_epoch=state.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=state.partition_epoch if partition_epoch is None else partition_epoch,
        new_isr=isr,
        new_isr_with_epochs=[
            c.AlterPartitionRequest.BrokerState(broker_id=r, broker_epoch=e)
            for r, e in epochs.items()
        ],
    )
    result = cp.alter_partition(image, request)
    (answer,) = result.response.partitions
    return commit(image, result), answer


def replicated(brokers: int = 3) -> tuple[MetadataImage, int]:
    image, _ = create(cluster(brokers), "t", partitions=1, factor=3)
    return image, image.topics["t"].partitions[0].leader


def test_alter_partition_shrinks_and_expands_the_isr_with_a_new_partition_epoch():
    image, leader = replicated()
    followers = [r for r in image.topics["t"].partitions[0].replicas if r != leader]
    image, answer = alter(image, leader, [leader, followers[0]])
    state = image.topics["t"].partitions[0]
    assert answer.error_code == 0 and state.isr == (leader, followers[0])
    assert (answer.partition_epoch, state.partition_epoch) == (1, 1)
    assert state.leader_epoch == 0, "an ISR change is not a leader change"
    image, answer = alter(image, leader, [leader, followers[0], followers[1]])
    assert answer.error_code == 0 and len(image.topics["t"].partitions[0].isr) == 3


@pytest.mark.parametrize(
    ("who", "fields", "code"),
    [
        ("leader", {"broker_epoch": 999}, ErrorCode.STALE_BROKER_EPOCH),
        ("leader", {"leader_epoch": 7}, ErrorCode.FENCED_LEADER_EPOCH),
        ("leader", {"partition_epoch": 7}, ErrorCode.INVALID_UPDATE_VERSION),
        ("follower", {}, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ],
)
def test_stale_or_foreign_isr_proposals_are_rejected(who, fields, code):
    image, leader = replicated()
    follower = next(r for r in image.topics["t"].partitions[0].replicas if r != leader)
    proposer = leader if who == "leader" else follower
    after, answer = alter(image, proposer, [proposer], **fields)
    assert answer.error_code == code and answer.error_message
    assert after is image, "nothing committed"


def test_a_fenced_broker_never_joins_an_isr():
    image, leader = replicated()
    follower = next(r for r in image.topics["t"].partitions[0].replicas if r != leader)
    image = commit(image, cp.fence_brokers(image, [follower]))
    assert follower not in image.topics["t"].partitions[0].isr
    after, answer = alter(image, leader, [*image.topics["t"].partitions[0].isr, follower])
    assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA and after is image


def test_unclean_election_only_when_the_topic_allows_it():
    for allowed, expect_leader in (("false", False), ("true", True)):
        image, leader = replicated()
        image, _ = alter(image, leader, [leader])  # the followers fell out of sync
        image, _ = alter_config(
            image, "t", ("unclean.leader.election.enable", c.ALTER_CONFIG_OP_SET, allowed)
        )
        image = commit(image, cp.fence_brokers(image, [leader]))
        state = image.topics["t"].partitions[0]
        if expect_leader:
            assert state.leader not in (leader, NO_LEADER) and state.isr == (state.leader,)
        else:
            assert state.leader == NO_LEADER and state.isr == (leader,)


def test_preferred_leaders_come_back():
    image, _ = create(cluster(3), "t", partitions=3, factor=3)
    preferred = {p: s.replicas[0] for p, s in image.topics["t"].partitions.items()}
    image = commit(image, cp.fence_brokers(image, [1]))
    image, _ = register(image, 1, incarnation="back")
    image, _ = heartbeat(image, 1)
    # broker 1 is back but not in the ISRs it left; once it is, leadership returns to it
    for p, state in image.topics["t"].partitions.items():
        if 1 not in state.isr:
            request = c.AlterPartitionRequest(
                broker_id=state.leader, broker_epoch=image.brokers[state.leader].broker_epoch
            )
            request.partitions.add(
                topic="t",
                partition=p,
                leader_epoch=state.leader_epoch,
                partition_epoch=state.partition_epoch,
                new_isr=[*state.isr, 1],
                new_isr_with_epochs=[
                    c.AlterPartitionRequest.BrokerState(
                        broker_id=1, broker_epoch=image.brokers[1].broker_epoch
                    )
                ],
            )
            change = cp.alter_partition(image, request)
            image = commit(image, change)
    image = commit(image, cp.preferred_leader_elections(image))
    assert {p: s.leader for p, s in image.topics["t"].partitions.items()} == preferred
