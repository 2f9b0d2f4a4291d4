"""Goal: the controller runs the coordinators' side of the cluster end to end over real gRPC:
coordinators register and heartbeat with the cluster's membership proof (and are refused
without it), `__consumer_offsets` and `__transaction_state` appear once a coordinator and enough
brokers are live, the partitions of each are split evenly between live coordinators, a
coordinator that stops heartbeating is fenced and its partitions of both topics move to the
other with assignment epoch + 1, and FindCoordinator answers the owner's endpoint for group ids
(GROUP keys) and transactional ids (TRANSACTION keys) throughout — on the controller, and on the
broker from its own image, with the same answers once that image has caught up.

Method: one controller and one broker (real processes, started with the existing launcher and
stopped by PID, also on failure), the controller with `--offsets-topic-num-partitions 4
--transaction-state-log-num-partitions 3` (replication factors 1: the launcher's min(3, brokers))
and a 1.5 s coordinator session. Two fake coordinators are threads of this test that call
RegisterCoordinator and CoordinatorHeartbeat signed with MemberSigner and the cluster secret
(cluster_helpers.FakeCoordinator). The test reads the assignments by replaying the controller's
metadata log (FetchMetadata) with the real replay, and compares FindCoordinator's answers with
`group_partition` / `transaction_partition` over them (the two topics have different partition
counts, so a key answered from the wrong topic shows); the broker's answers are polled until
they equal the controller's (all but metadata_offset, which is each image's own).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from cluster_helpers import (
    FAST_SETTINGS,
    FakeCoordinator,
    controller_image,
    controller_stub,
    wait_until,
)

from samsa.cli.launcher import LocalCluster, load_or_create, wait_healthy
from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    COORDINATOR_TOPICS,
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    TRANSACTION_STATE_TOPIC,
    group_partition,
    transaction_partition,
)
from samsa.metadata.image import MetadataImage
from samsa.services.runtime import membership
from samsa.services.runtime.secret import load_secret
from samsa.v1 import controller_pb2, coordinator_pb2, coordinator_pb2_grpc

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 4
TXN_PARTITIONS = 3
SESSION_TIMEOUT_MS = 1500
GROUPS = [f"group-{n}" for n in range(12)]
TRANSACTIONAL_IDS = [f"txn-{n}" for n in range(12)]
# Per key type: the keys asked, the topic holding them, its partition count, the hash.
KEY_SPACES = {
    GROUP_KEY_TYPE: (GROUPS, CONSUMER_OFFSETS_TOPIC, PARTITIONS, group_partition),
    TRANSACTION_KEY_TYPE: (
        TRANSACTIONAL_IDS,
        TRANSACTION_STATE_TOPIC,
        TXN_PARTITIONS,
        transaction_partition,
    ),
}


@contextmanager
def running_cluster(data_dir: Path) -> Iterator[LocalCluster]:
    settings = dict(FAST_SETTINGS) | {
        "offsets.topic.num.partitions": str(PARTITIONS),
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
        "coordinator.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    }
    spec = load_or_create(data_dir, 1, 1, settings)
    cluster = LocalCluster(spec, data_dir)
    try:
        cluster.start_all()
        wait_healthy(cluster, timeout_s=60)
        yield cluster
    finally:
        cluster.stop_all()


def find(
    endpoint: str, keys: list[str], key_type: int = GROUP_KEY_TYPE
) -> coordinator_pb2.FindCoordinatorResponse:
    stub = coordinator_pb2_grpc.CoordinatorLookupServiceStub(grpc.insecure_channel(endpoint))
    return stub.FindCoordinator(
        coordinator_pb2.FindCoordinatorRequest(key_type=key_type, keys=keys),  # type: ignore[arg-type]
        timeout=5,
    )


def owners(image: MetadataImage, topic: str = CONSUMER_OFFSETS_TOPIC) -> dict[int, int]:
    return {
        number: assignment.coordinator_id
        for (name, number), assignment in image.coordinator_assignments.items()
        if name == topic
    }


def test_coordinators_register_own_the_offsets_topic_and_take_over_from_a_silent_one(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path) as cluster:
        endpoint = cluster.spec.controllers[0].endpoint
        broker = cluster.spec.brokers[0].endpoint
        key = membership.derive_key(load_secret(tmp_path / "cluster.secret"))

        for asked in (endpoint, broker):
            for key_type in KEY_SPACES:
                before = find(asked, ["g"], key_type).coordinators[0]
                assert before.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE, asked
                assert "no live coordinator" in before.error_message, asked

        unsigned = controller_stub(endpoint)
        with pytest.raises(grpc.RpcError) as refused:
            unsigned.RegisterCoordinator(
                controller_pb2.RegisterCoordinatorRequest(
                    coordinator_id=1, incarnation_id="x", endpoint="h:1"
                ),
                timeout=5,
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "coordinators get it from --secret-file" in (refused.value.details() or "")

        coordinators = {n: FakeCoordinator(endpoint, key, n) for n in (1, 2)}
        try:
            for coordinator in coordinators.values():
                coordinator.start()
            duplicate = coordinators[2].register("another-process")
            assert duplicate.status.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION

            split = wait_until(
                "__consumer_offsets split 2/2 and __transaction_state 2/1 between the coordinators",
                lambda: (
                    (image := controller_image(endpoint))
                    and sorted(owners(image).values()) == [1, 1, 2, 2]
                    and sorted(owners(image, TRANSACTION_STATE_TOPIC).values())
                    in ([1, 1, 2], [1, 2, 2])
                    and image
                ),
                timeout_s=30,
            )
            for _, name, count, _ in KEY_SPACES.values():
                topic = split.topics[name]
                assert sorted(topic.partitions) == list(range(count))
                assert all(len(state.replicas) == 1 for state in topic.partitions.values())
                # __transaction_state's min ISR: transaction.state.log.min.isr within RF 1.
                min_isr = {"min.insync.replicas": "1"} if name == TRANSACTION_STATE_TOPIC else {}
                assert split.topic_configs(name) == {
                    "cleanup.policy": "compact",
                    "segment.bytes": "104857600",
                    "message.timestamp.after.max.ms": "9223372036854775807",
                    **min_isr,
                }
            assert all(a.assignment_epoch == 0 for a in split.coordinator_assignments.values())
            check_find_coordinator(endpoint, split, coordinators)
            check_broker_agrees(broker, endpoint, split, coordinators)

            silent = 1 if owners(split)[PARTITIONS - 1] == 1 else 2
            other = 3 - silent
            coordinators[silent].stop_heartbeating()
            moved = wait_until(
                f"coordinator {silent}'s partitions of both topics moved to {other}",
                lambda: (
                    (image := controller_image(endpoint))
                    and all(set(owners(image, t).values()) == {other} for t in COORDINATOR_TOPICS)
                    and image
                ),
                timeout_s=30,
            )
            assert moved.coordinators[silent].fenced
            for number, old in split.coordinator_assignments.items():
                new = moved.coordinator_assignments[number]
                assert new.producer_id == old.producer_id
                expected = old.assignment_epoch + (1 if old.coordinator_id == silent else 0)
                assert new.assignment_epoch == expected, f"partition {number}"
            check_find_coordinator(endpoint, moved, coordinators)
            check_broker_agrees(broker, endpoint, moved, coordinators)
            late = coordinators[silent].heartbeat()
            assert late.status.error_code == ErrorCode.STALE_BROKER_EPOCH and late.is_fenced
            assert coordinators[other].last is not None and not coordinators[other].last.is_fenced
        finally:
            for coordinator in coordinators.values():
                coordinator.stop_heartbeating()


def check_find_coordinator(
    endpoint: str, image: MetadataImage, coordinators: dict[int, FakeCoordinator]
) -> None:
    for key_type, (keys, topic, count, partition_of) in KEY_SPACES.items():
        answer = find(endpoint, keys, key_type)
        assert [location.key for location in answer.coordinators] == keys
        for location in answer.coordinators:
            partition = partition_of(location.key, count)
            owner = image.coordinator_assignments[(topic, partition)].coordinator_id
            assert location.error_code == ErrorCode.NONE, location.error_message
            assert (location.partition, location.coordinator_id) == (partition, owner)
            assert location.endpoint == coordinators[owner].endpoint
            assert location.metadata_offset >= image.end_offset


def without_offset(answer: coordinator_pb2.FindCoordinatorResponse) -> list[tuple]:
    return [
        (c.key, c.error_code, c.error_message, c.coordinator_id, c.endpoint, c.partition)
        for c in answer.coordinators
    ]


def check_broker_agrees(
    broker: str, controller: str, image: MetadataImage, coordinators: dict[int, FakeCoordinator]
) -> None:
    """The broker answers FindCoordinator from its own image: once that image has caught up with
    `image`, its answers are the controller's."""
    for key_type, (keys, *_) in KEY_SPACES.items():
        expected = without_offset(find(controller, keys, key_type))
        wait_until(
            f"the broker's FindCoordinator (key type {key_type}) to agree with the controller's",
            lambda keys=keys, key_type=key_type, expected=expected: (
                without_offset(find(broker, keys, key_type)) == expected
            ),
            timeout_s=15,
        )
    check_find_coordinator(broker, image, coordinators)
