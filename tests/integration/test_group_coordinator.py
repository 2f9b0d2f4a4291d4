"""Goal: the coordinator service runs consumer groups end to end over real gRPC: members that only
heartbeat and follow what they are told share a topic with never two owners of a partition;
offsets are committed against member epochs and read back; lag is log end minus committed; a
silent member is expired and its partitions move; new topics matching a subscribed regex and new
partitions join the assignment; a static member that restarts gets its partitions back with no
rebalance of the others; when the coordinator owning a group is killed with SIGKILL, another one
loads the group from `__consumer_offsets` (members, epochs, offsets intact) and the dead one's
writer identity is fenced on the brokers; and a coordinator cut off from the controllers stops
answering (its lease).

Method: one controller, two brokers and two coordinators (real processes from the launcher,
stopped by PID also on failure), with 4 partitions of `__consumer_offsets` at RF 2 and short
sessions. Members are `RawMember`s: a few lines of this test that speak the heartbeat protocol
with plain generated stubs, as a client in any language would — they report as owned exactly
what the last answer assigned. After every heartbeat round the test checks that no partition is
owned by two members. Records are produced with the SDK's Producer.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, controller_image, wait_until

from samsa.cli.launcher import LocalCluster, load_or_create, wait_healthy
from samsa.client import Producer
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, GROUP_KEY_TYPE
from samsa.services.runtime import membership
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.secret import load_secret
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg

pytestmark = pytest.mark.timeout(240)

TOPIC = "orders"
PARTITIONS = 6
SESSION_TIMEOUT_MS = 3000
SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.heartbeat.interval.ms": "300",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("groups")
    spec = load_or_create(data_dir, 1, 2, SETTINGS, coordinators=2)
    cluster = LocalCluster(spec, data_dir)
    try:
        cluster.start_all()
        wait_healthy(cluster, timeout_s=60)
        topic = controller_pb2.CreateTopicsRequest.Topic(
            name=TOPIC, num_partitions=PARTITIONS, replication_factor=2
        )
        answer = controller(cluster).CreateTopics(
            controller_pb2.CreateTopicsRequest(topics=[topic]), timeout=10
        )
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        yield cluster
    finally:
        cluster.stop_all()


def find_coordinator(cluster: LocalCluster, group_id: str) -> c.CoordinatorLocation:
    """The group's coordinator, as the first broker answers it once it knows one."""
    stub = cg.CoordinatorLookupServiceStub(grpc.insecure_channel(cluster.spec.brokers[0].endpoint))

    def found() -> c.CoordinatorLocation | None:
        request = c.FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, keys=[group_id])
        location = stub.FindCoordinator(request, timeout=5).coordinators[0]
        return None if location.error_code else location

    return wait_until(f"a coordinator for {group_id}", found, timeout_s=30)


def group_stub(endpoint: str) -> cg.GroupCoordinatorServiceStub:
    return cg.GroupCoordinatorServiceStub(grpc.insecure_channel(endpoint))


class RawMember:
    """A consumer-group member written against the proto alone: it owns what it was told."""

    def __init__(
        self,
        group_id: str,
        member_id: str,
        *,
        topics: tuple[str, ...] = (TOPIC,),
        regex: str = "",
        instance_id: str = "",
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.topics = topics
        self.regex = regex
        self.instance_id = instance_id
        self.epoch = 0
        self.owned: set[tuple[str, int]] = set()

    def heartbeat(
        self, stub: cg.GroupCoordinatorServiceStub, *, leave_epoch: int | None = None
    ) -> c.ConsumerGroupHeartbeatResponse:
        request = c.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch if leave_epoch is None else leave_epoch,
            rebalance_timeout_ms=10_000,
            group_instance_id=self.instance_id,
        )
        if self.epoch == 0:
            if self.regex:
                request.subscription.topic_regex = self.regex
            else:
                request.subscription.topic_names.extend(self.topics)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.owned):
            by_topic.setdefault(topic, []).append(partition)
        for topic, partitions in by_topic.items():
            request.owned_partitions.topics.add(topic=topic, partitions=partitions)
        if not by_topic:
            request.owned_partitions.SetInParent()
        answer = stub.ConsumerGroupHeartbeat(request, timeout=10)
        if answer.error_code:
            return answer
        self.epoch = answer.member_epoch
        if answer.HasField("assignment"):
            self.owned = {(t.topic, p) for t in answer.assignment.topics for p in t.partitions}
        return answer

    def partitions(self, topic: str = TOPIC) -> set[int]:
        return {p for t, p in self.owned if t == topic}


RETRY_CODES = (
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
)


def heartbeat_until_balanced(cluster: LocalCluster, members: list[RawMember], each: int) -> None:
    """Heartbeat every member in rounds until each owns `each` partitions; never two owners.
    Each round finds the group's coordinator first, and retriable errors retry, as for any
    client."""

    def balanced() -> bool:
        stub = group_stub(find_coordinator(cluster, members[0].group_id).endpoint)
        for member in members:
            answer = member.heartbeat(stub)
            if answer.error_code in RETRY_CODES:
                return False
            assert answer.error_code == ErrorCode.NONE, answer.error_message
        owned = [p for member in members for p in member.owned]
        assert len(owned) == len(set(owned)), f"a partition has two owners: {owned}"
        return all(len(member.owned) == each for member in members)

    wait_until(f"{len(members)} members owning {each} partitions each", balanced, timeout_s=60)


def test_a_silent_member_is_expired_and_its_partitions_move(cluster: LocalCluster) -> None:
    location = find_coordinator(cluster, "expiry")
    stub = group_stub(location.endpoint)
    quiet, busy = RawMember("expiry", "quiet"), RawMember("expiry", "busy")
    heartbeat_until_balanced(cluster, [quiet, busy], PARTITIONS // 2)

    # `quiet` stops heartbeating: after its session it is removed and `busy` gets everything.
    heartbeat_until_balanced(cluster, [busy], PARTITIONS)
    described = stub.DescribeGroups(c.DescribeGroupsRequest(group_ids=["expiry"]), timeout=5)
    assert [m.member_id for m in described.groups[0].members] == ["busy"]
    answer = quiet.heartbeat(stub)
    assert answer.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH)


def controller(cluster: LocalCluster) -> controller_pb2_grpc.ControllerServiceStub:
    return controller_pb2_grpc.ControllerServiceStub(
        grpc.insecure_channel(cluster.spec.controllers[0].endpoint)
    )


def test_new_topics_matching_a_regex_and_new_partitions_join_the_assignment(
    cluster: LocalCluster,
) -> None:
    admin = controller(cluster)

    def create(name: str, partitions: int) -> None:
        topic = controller_pb2.CreateTopicsRequest.Topic(
            name=name, num_partitions=partitions, replication_factor=1
        )
        answer = admin.CreateTopics(controller_pb2.CreateTopicsRequest(topics=[topic]), timeout=10)
        assert answer.topics[0].error_code == ErrorCode.NONE, answer

    create("events-a", 2)
    create("audit", 2)  # does not match
    one, two = (RawMember("regex", name, regex="^events-.*") for name in ("one", "two"))
    heartbeat_until_balanced(cluster, [one, two], 1)
    assert {t for m in (one, two) for t, _ in m.owned} == {"events-a"}

    create("events-b", 2)
    heartbeat_until_balanced(cluster, [one, two], 2)
    assert {t for m in (one, two) for t, _ in m.owned} == {"events-a", "events-b"}

    grow = controller_pb2.CreatePartitionsRequest(
        topics=[controller_pb2.CreatePartitionsRequest.Topic(name="events-a", count=4)]
    )
    assert admin.CreatePartitions(grow, timeout=10).topics[0].error_code == ErrorCode.NONE
    heartbeat_until_balanced(cluster, [one, two], 3)
    everything = one.owned | two.owned
    assert everything == {("events-a", p) for p in range(4)} | {("events-b", p) for p in range(2)}


def test_a_static_member_that_restarts_gets_its_partitions_back_without_a_rebalance(
    cluster: LocalCluster,
) -> None:
    stable = RawMember("static", "stable", instance_id="host-1")
    restarting = RawMember("static", "old-process", instance_id="host-2")
    heartbeat_until_balanced(cluster, [stable, restarting], PARTITIONS // 2)
    kept, epoch_before = set(restarting.owned), stable.epoch

    # The process stops with a static leave (-2): its partitions wait for it.
    stub = group_stub(find_coordinator(cluster, "static").endpoint)
    left = restarting.heartbeat(stub, leave_epoch=-2)
    assert left.error_code == ErrorCode.NONE, left.error_message
    described = stub.DescribeGroups(c.DescribeGroupsRequest(group_ids=["static"]), timeout=5)
    assert {m.group_instance_id for m in described.groups[0].members} == {"host-1", "host-2"}

    # It comes back as a new process (new member id) with the same instance id.
    back = RawMember("static", "new-process", instance_id="host-2")
    heartbeat_until_balanced(cluster, [stable, back], PARTITIONS // 2)
    assert back.owned == kept
    assert stable.epoch == epoch_before, "the other member saw no rebalance"


def test_offsets_and_members_survive_a_killed_coordinator_whose_writer_is_fenced(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    group = "payments"
    location = find_coordinator(cluster, group)
    stub = group_stub(location.endpoint)
    first, second = RawMember(group, "first"), RawMember(group, "second")
    heartbeat_until_balanced(cluster, [first, second], PARTITIONS // 2)

    # Commit for a partition `first` owns, under its epoch; a stale epoch is refused.
    partition = min(first.partitions())
    commit = c.OffsetCommitRequest(group_id=group, member_id="first", member_epoch=first.epoch)
    commit.topics.add(name=TOPIC).partitions.add(partition=partition, committed_offset=5)
    answer = stub.OffsetCommit(commit, timeout=10)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE
    stale = c.OffsetCommitRequest()
    stale.CopyFrom(commit)
    stale.member_epoch = first.epoch - 1
    refused = stub.OffsetCommit(stale, timeout=10).topics[0].partitions[0]
    assert refused.error_code == ErrorCode.STALE_MEMBER_EPOCH, refused

    # Lag: 20 records in the partition, 5 committed.
    with Producer({"bootstrap.servers": cluster.spec.bootstrap_servers}) as producer:
        for n in range(20):
            producer.send(TOPIC, b"v%d" % n, partition=partition)
        producer.flush(30)
    lag = stub.DescribeGroupLag(c.DescribeGroupLagRequest(group_id=group), timeout=10)
    row = next(r for r in lag.partitions if r.partition == partition)
    assert (row.committed_offset, row.log_end_offset, row.lag) == (5, 20, 15), row
    assert row.member_id == "first"
    listed = stub.ListGroups(c.ListGroupsRequest(), timeout=5)
    assert (group, 2) in [(g.group_id, g.member_count) for g in listed.groups]

    # The owner of the group's partition dies; the other coordinator takes it over.
    controller_endpoint = cluster.spec.controllers[0].endpoint
    assignment_key = (CONSUMER_OFFSETS_TOPIC, location.partition)
    before = controller_image(controller_endpoint).coordinator_assignments[assignment_key]
    cluster.kill(f"coordinator-{location.coordinator_id}", signal.SIGKILL)
    moved = wait_until(
        "the group's partition to move to the other coordinator",
        lambda: (
            (found := find_coordinator(cluster, group)).coordinator_id != location.coordinator_id
            and found
        ),
        timeout_s=30,
    )
    new_stub = group_stub(moved.endpoint)

    def loaded() -> c.OffsetFetchResponse | None:
        fetched = new_stub.OffsetFetch(c.OffsetFetchRequest(group_id=group), timeout=5)
        return None if fetched.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else fetched

    fetched = wait_until("the new coordinator to load the partition", loaded, timeout_s=30)
    assert fetched.error_code == ErrorCode.NONE, fetched.error_message
    offsets = {
        (t.name, p.partition): p.committed_offset for t in fetched.topics for p in t.partitions
    }
    assert offsets == {(TOPIC, partition): 5}
    # Both members carry on where they were, at the same epochs, with the same partitions.
    owned_before = (set(first.owned), set(second.owned))
    epochs_before = (first.epoch, second.epoch)
    heartbeat_until_balanced(cluster, [first, second], PARTITIONS // 2)
    assert (first.owned, second.owned) == owned_before
    assert (first.epoch, second.epoch) == epochs_before

    # The dead owner's writer identity is fenced on the brokers: a zombie cannot write.
    after = controller_image(controller_endpoint).coordinator_assignments[assignment_key]
    assert after.producer_id == before.producer_id
    assert after.assignment_epoch > before.assignment_epoch
    key = membership.derive_key(load_secret(cluster.data_dir / "cluster.secret"))
    zombie_batch = build_batch(
        [b"forged"],
        keys=[b"forged"],
        producer_id=before.producer_id,
        producer_epoch=before.assignment_epoch,
        base_sequence=1_000,
    )
    assert zombie_write(cluster, key, location.partition, zombie_batch) == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )


def zombie_write(cluster: LocalCluster, key: bytes, partition: int, batch: bytes) -> int:
    """Write `batch` to the partition's leader, signed as the dead coordinator: its error code."""
    image = controller_image(cluster.spec.controllers[0].endpoint)
    leader = image.topics[CONSUMER_OFFSETS_TOPIC].partitions[partition].leader
    stub = broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(image.brokers[leader].endpoint))
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=5000)
    request.topics.add(name=CONSUMER_OFFSETS_TOPIC).partitions.add(
        partition=partition, records=batch
    )
    service = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name
    signer = MemberSigner(key, 1)
    proof = signer.metadata(membership.method_path(service, "Produce"))
    answer = stub.Produce(request, timeout=10, metadata=proof)
    return answer.topics[0].partitions[0].error_code


def test_a_coordinator_cut_off_from_the_controllers_stops_answering(cluster: LocalCluster) -> None:
    """Its lease: once no heartbeat was answered for the coordinator session, the controller may
    have replaced it, so it must not answer from memory (two owners of a partition otherwise)."""
    location = find_coordinator(cluster, "lease")
    stub = group_stub(location.endpoint)
    heartbeat_until_balanced(cluster, [RawMember("lease", "before")], PARTITIONS)
    cluster.kill("controller-1", signal.SIGSTOP)
    try:
        probe = RawMember("lease", "probe")

        def refused() -> c.ConsumerGroupHeartbeatResponse | None:
            answer = probe.heartbeat(stub)
            return answer if answer.error_code == ErrorCode.NOT_COORDINATOR else None

        answer = wait_until("the cut-off coordinator to stop answering", refused, timeout_s=15)
        assert "lost touch with the controllers" in answer.error_message
    finally:
        cluster.kill("controller-1", signal.SIGCONT)
    # Back in touch (registered again if it was fenced), the group is served again.
    after = RawMember("lease", "after")
    heartbeat_until_balanced(cluster, [after], PARTITIONS)
