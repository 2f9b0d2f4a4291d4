"""Goal: the controller runs the coordinators' side of the cluster end to end over real gRPC:
coordinators register and heartbeat with the cluster's membership proof (and are refused
without it), `__consumer_offsets` appears once a coordinator and enough brokers are live, its
partitions are split evenly between live coordinators, a coordinator that stops heartbeating is
fenced and its partitions move to the other with assignment epoch + 1, and FindCoordinator
answers the owner's endpoint throughout — on the controller, and on the broker from its own
image, with the same answers once that image has caught up.

Method: one controller and one broker (real processes, started with the existing launcher and
stopped by PID, also on failure), the controller with `--offsets-topic-num-partitions 4
--offsets-topic-replication-factor 1` and a 1.5 s coordinator session. Two fake coordinators
are threads of this test that call RegisterCoordinator and CoordinatorHeartbeat signed with
MemberSigner and the cluster secret (cluster_helpers.FakeCoordinator). The test reads the
assignments by replaying the controller's metadata log (FetchMetadata) with the real replay, and
compares FindCoordinator's answers with `group_partition` over them; the broker's answers are
polled until they equal the controller's (all but metadata_offset, which is each image's own).
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
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, GROUP_KEY_TYPE, group_partition
from samsa.metadata.image import MetadataImage
from samsa.services.runtime import membership
from samsa.services.runtime.secret import load_secret
from samsa.v1 import controller_pb2, coordinator_pb2, coordinator_pb2_grpc

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 4
SESSION_TIMEOUT_MS = 1500
GROUPS = [f"group-{n}" for n in range(12)]


@contextmanager
def running_cluster(data_dir: Path) -> Iterator[LocalCluster]:
    settings = dict(FAST_SETTINGS) | {
        "offsets.topic.num.partitions": str(PARTITIONS),
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


def find(endpoint: str, groups: list[str]) -> coordinator_pb2.FindCoordinatorResponse:
    stub = coordinator_pb2_grpc.CoordinatorLookupServiceStub(grpc.insecure_channel(endpoint))
    return stub.FindCoordinator(
        coordinator_pb2.FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, keys=groups), timeout=5
    )


def owners(image: MetadataImage) -> dict[int, int]:
    return {p: a.coordinator_id for p, a in image.coordinator_assignments.items()}


def test_coordinators_register_own_the_offsets_topic_and_take_over_from_a_silent_one(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path) as cluster:
        endpoint = cluster.spec.controllers[0].endpoint
        broker = cluster.spec.brokers[0].endpoint
        key = membership.derive_key(load_secret(tmp_path / "cluster.secret"))

        for asked in (endpoint, broker):
            before = find(asked, ["g"]).coordinators[0]
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
                "__consumer_offsets split 2/2 between the coordinators",
                lambda: (
                    (image := controller_image(endpoint))
                    and sorted(owners(image).values()) == [1, 1, 2, 2]
                    and image
                ),
                timeout_s=30,
            )
            topic = split.topics[CONSUMER_OFFSETS_TOPIC]
            assert sorted(topic.partitions) == list(range(PARTITIONS))
            assert all(a.assignment_epoch == 0 for a in split.coordinator_assignments.values())
            check_find_coordinator(endpoint, split, coordinators)
            check_broker_agrees(broker, endpoint, split, coordinators)

            silent = 1 if owners(split)[PARTITIONS - 1] == 1 else 2
            other = 3 - silent
            coordinators[silent].stop_heartbeating()
            moved = wait_until(
                f"coordinator {silent}'s partitions moved to {other}",
                lambda: (
                    (image := controller_image(endpoint))
                    and set(owners(image).values()) == {other}
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
    answer = find(endpoint, GROUPS)
    assert [location.key for location in answer.coordinators] == GROUPS
    for location in answer.coordinators:
        partition = group_partition(location.key, PARTITIONS)
        owner = image.coordinator_assignments[partition].coordinator_id
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
    expected = without_offset(find(controller, GROUPS))
    wait_until(
        "the broker's FindCoordinator to agree with the controller's",
        lambda: without_offset(find(broker, GROUPS)) == expected,
        timeout_s=15,
    )
    check_find_coordinator(broker, image, coordinators)
