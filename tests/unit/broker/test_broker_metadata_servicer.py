"""Goal: ControllerService on a broker (KIP-590) answers reads as a controller would, from the
broker's own image, waits for a min_metadata_offset it has not applied (then answers UNAVAILABLE),
forwards admin writes and answers the controller's answer (NOT_CONTROLLER when no controller
answered; a controller's whole-request refusal passed on), and refuses the member-only RPCs
UNIMPLEMENTED, saying where they go.

Method: BrokerMetadataServicer over a fake metadata follower (an image built with the controller's
real decisions and replay, a QuorumView, an event for "the image changed") and a fake controller
channel that records what it forwards; gRPC's context is faked with an `abort` that raises, as
grpc.aio's does. The controller's answer to the same reads comes from the same pure functions
(services/runtime/metadata_reads.py), so the comparison is with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import grpc
import pytest

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.metadata import metadata_servicer
from samsa.services.broker.metadata.metadata_servicer import BrokerMetadataServicer
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.runtime.controller_channel import ControllerUnavailableError
from samsa.services.runtime.metadata_log import QuorumView
from samsa.v1 import controller_pb2 as c


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code, self.details = code, details


class FakeContext:
    def __init__(self, time_remaining: float | None = None) -> None:
        self._time_remaining = time_remaining

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)

    def time_remaining(self) -> float | None:
        return self._time_remaining


class FakeFollower:
    """What the servicer reads of MetadataLogFollower."""

    def __init__(self, image: MetadataImage, quorum: QuorumView) -> None:
        self.image = image
        self.quorum = quorum
        self.last_answered_fetch_sent: float | None = 1.0
        self.changed = asyncio.Event()

    async def wait_for_change(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout_s)


class FakeChannel:
    def __init__(self, answer: Any = None, error: Exception | None = None) -> None:
        self.answer, self.error = answer, error
        self.forwarded: list[tuple[str, Any, float]] = []

    async def write(self, method: str, request: Any, timeout_s: float) -> Any:
        self.forwarded.append((method, request, timeout_s))
        if self.error is not None:
            raise self.error
        return self.answer


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:
    return replay(image, make_batch(image, result.records, 1)) if result.records else image


def cluster_image() -> MetadataImage:
    """Two registered brokers and a topic of two partitions, through the real decisions."""
    image = MetadataImage.empty()
    for broker_id in (1, 2):
        register = c.RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id="x", endpoint=f"b:{broker_id}"
        )
        result = cp.register_broker(
            image, register, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=1000
        )
        image = commit(image, result)
        heartbeat = c.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=image.brokers[broker_id].broker_epoch,
            metadata_offset=image.end_offset,
        )
        image = commit(image, cp.broker_heartbeat(image, heartbeat))  # unfenced: caught up
    create = c.CreateTopicsRequest(
        topics=[c.CreateTopicsRequest.Topic(name="t", num_partitions=2, replication_factor=1)]
    )
    result = cp.create_topics(
        image,
        create,
        rng=random.Random(1),
        defaults=cp.ClusterDefaults(num_partitions=1, default_replication_factor=1),
        new_topic_id=lambda: b"\x01" * 16,
    )
    image = commit(image, result)
    assert sorted(image.topics["t"].partitions) == [0, 1]
    return image


QUORUM = QuorumView(
    cluster_id="test-cluster",
    controllers={1: "ctl:1", 2: "ctl:2", 3: "ctl:3"},
    active_node_id=2,
    committed_end_offset=10,
)


def servicer(
    follower: FakeFollower | None = None, channel: FakeChannel | None = None
) -> BrokerMetadataServicer:
    return BrokerMetadataServicer(
        broker_id=7,
        metadata=follower or FakeFollower(cluster_image(), QUORUM),  # type: ignore[arg-type]
        controllers=channel or FakeChannel(),  # type: ignore[arg-type]
    )


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# --- reads -------------------------------------------------------------------------------------


def test_reads_are_a_controllers_answers_over_the_brokers_image() -> None:
    image = cluster_image()
    broker = servicer(FakeFollower(image, QUORUM))
    cluster = run(broker.DescribeCluster(c.DescribeClusterRequest(), FakeContext()))
    expected = cp.describe_cluster(
        image, cluster_id="test-cluster", controllers=QUORUM.controllers, active_node_id=2
    )
    assert list(cluster.brokers) == list(expected.brokers)
    assert [(x.node_id, x.endpoint, x.is_active) for x in cluster.controllers] == [
        (1, "ctl:1", False),
        (2, "ctl:2", True),
        (3, "ctl:3", False),
    ]
    assert cluster.cluster_id == "test-cluster"
    assert cluster.status.metadata_offset == image.end_offset
    assert cluster.status.active_controller.endpoint == "ctl:2"

    request = c.DescribeTopicsRequest(names=["t", "nope"])
    topics = run(broker.DescribeTopics(request, FakeContext()))
    assert list(topics.topics) == list(cp.describe_topics(image, request).topics)
    assert dict(topics.broker_endpoints) == {1: "b:1", 2: "b:2"}

    configs = c.DescribeConfigsRequest(
        resources=[c.DescribeConfigsRequest.Resource(resource=c.ConfigResource(type=1, name="t"))]
    )
    answer = run(broker.DescribeConfigs(configs, FakeContext()))
    assert list(answer.results) == list(cp.describe_configs(image, configs).results)


def test_no_active_controller_known_lists_none_as_active() -> None:
    quorum = QuorumView(cluster_id="x", controllers={1: "ctl:1"}, active_node_id=None)
    cluster = run(
        servicer(FakeFollower(cluster_image(), quorum)).DescribeCluster(
            c.DescribeClusterRequest(), FakeContext()
        )
    )
    assert [x.is_active for x in cluster.controllers] == [False]
    assert not cluster.status.HasField("active_controller")


def test_a_read_waits_for_the_offset_asked_then_answers_from_the_newer_image() -> None:
    old = MetadataImage.empty()
    new = cluster_image()
    follower = FakeFollower(old, QUORUM)

    async def scenario() -> c.DescribeTopicsResponse:
        async def catch_up() -> None:
            await asyncio.sleep(0.05)
            follower.image = new
            follower.changed.set()

        task = asyncio.create_task(catch_up())
        request = c.DescribeTopicsRequest(names=["t"], min_metadata_offset=new.end_offset)
        answer = await servicer(follower).DescribeTopics(request, FakeContext())
        await task
        return answer

    answer = run(scenario())
    assert answer.topics[0].error_code == ErrorCode.NONE
    assert answer.status.metadata_offset == new.end_offset


def test_a_read_the_broker_cannot_serve_yet_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metadata_servicer, "READ_YOUR_WRITES_WAIT_S", 0.05)
    image = cluster_image()
    behind = servicer(FakeFollower(image, QUORUM))
    request = c.DescribeClusterRequest(min_metadata_offset=image.end_offset + 1)
    with pytest.raises(Aborted) as waited:
        run(behind.DescribeCluster(request, FakeContext()))
    assert waited.value.code == grpc.StatusCode.UNAVAILABLE
    assert "broker 7" in waited.value.details and "retry" in waited.value.details

    never_fetched = FakeFollower(image, QuorumView())
    never_fetched.last_answered_fetch_sent = None
    with pytest.raises(Aborted) as unfollowed:
        run(servicer(never_fetched).DescribeCluster(c.DescribeClusterRequest(), FakeContext()))
    assert unfollowed.value.code == grpc.StatusCode.UNAVAILABLE

    absurd = c.DescribeClusterRequest(
        min_metadata_offset=QUORUM.committed_end_offset + limits.metadata_offset_ahead_max + 1
    )
    with pytest.raises(Aborted) as refused:
        run(behind.DescribeCluster(absurd, FakeContext()))
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_too_many_names_are_refused_whole() -> None:
    names = [f"t{n}" for n in range(limits.admin_request_items_max + 1)]
    with pytest.raises(Aborted) as refused:
        run(servicer().DescribeTopics(c.DescribeTopicsRequest(names=names), FakeContext()))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


# --- forwarded writes ---------------------------------------------------------------------------


def create_request() -> c.CreateTopicsRequest:
    return c.CreateTopicsRequest(topics=[c.CreateTopicsRequest.Topic(name="n", num_partitions=1)])


def test_a_write_is_forwarded_and_the_controllers_answer_answered() -> None:
    answer = c.CreateTopicsResponse(status=c.ControllerStatus(metadata_offset=99))
    answer.topics.add(name="n")
    channel = FakeChannel(answer=answer)
    got = run(servicer(channel=channel).CreateTopics(create_request(), FakeContext(3.0)))
    assert got is answer
    [(method, request, timeout_s)] = channel.forwarded
    assert method == "CreateTopics" and request == create_request()
    assert timeout_s <= 3.0, "never longer than the client's own deadline"


def test_no_active_controller_answers_not_controller() -> None:
    channel = FakeChannel(error=ControllerUnavailableError("none answered"))
    got = run(servicer(channel=channel).DeleteTopics(c.DeleteTopicsRequest(), FakeContext()))
    assert got.status.error_code == ErrorCode.NOT_CONTROLLER
    assert "broker 7" in got.status.error_message
    assert got.status.active_controller.endpoint == "ctl:2"


def test_a_controllers_refusal_is_passed_on() -> None:
    class Refused(grpc.aio.AioRpcError):
        def __init__(self) -> None:
            super().__init__(
                grpc.StatusCode.INVALID_ARGUMENT,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="too much metadata",
            )

    channel = FakeChannel(error=Refused())
    with pytest.raises(Aborted) as refused:
        run(servicer(channel=channel).CreatePartitions(c.CreatePartitionsRequest(), FakeContext()))
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details == "too much metadata"


def test_unregister_broker_is_forwarded_and_its_refusal_answered() -> None:
    answer = c.UnregisterBrokerResponse(status=c.ControllerStatus(metadata_offset=12))
    answer.status.error_code = ErrorCode.BROKER_ID_NOT_REGISTERED
    channel = FakeChannel(answer=answer)
    request = c.UnregisterBrokerRequest(broker_id=4)
    got = run(servicer(channel=channel).UnregisterBroker(request, FakeContext(3.0)))
    assert got is answer
    assert [(method, sent) for method, sent, _ in channel.forwarded] == [
        ("UnregisterBroker", request)
    ]


def test_elect_leaders_is_forwarded_and_its_answer_answered() -> None:
    answer = c.ElectLeadersResponse(status=c.ControllerStatus(metadata_offset=9))
    answer.partitions.add(topic="t", partition=0)
    channel = FakeChannel(answer=answer)
    request = c.ElectLeadersRequest(election_type=c.ELECTION_TYPE_UNCLEAN)
    got = run(servicer(channel=channel).ElectLeaders(request, FakeContext(3.0)))
    assert got is answer
    assert [(method, sent) for method, sent, _ in channel.forwarded] == [("ElectLeaders", request)]


def test_describe_quorum_is_forwarded_to_the_active_controller() -> None:
    answer = c.DescribeQuorumResponse(leader_id=2, status=c.ControllerStatus(metadata_offset=9))
    channel = FakeChannel(answer=answer)
    request = c.DescribeQuorumRequest()
    got = run(servicer(channel=channel).DescribeQuorum(request, FakeContext(3.0)))
    assert got is answer, "only the active controller knows the quorum's replication"
    assert [(method, sent) for method, sent, _ in channel.forwarded] == [
        ("DescribeQuorum", request)
    ]


def test_an_oversized_write_is_refused_before_it_is_forwarded() -> None:
    channel = FakeChannel()
    resources = [
        c.IncrementalAlterConfigsRequest.Resource()
        for _ in range(limits.admin_request_items_max + 1)
    ]
    with pytest.raises(Aborted) as refused:
        run(
            servicer(channel=channel).IncrementalAlterConfigs(
                c.IncrementalAlterConfigsRequest(resources=resources), FakeContext()
            )
        )
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert channel.forwarded == []


@pytest.mark.parametrize(
    "method",
    [
        "RegisterBroker",
        "BrokerHeartbeat",
        "FetchMetadata",
        "FetchSnapshot",
        "AlterPartition",
        "ReportCorruptReplica",
        "AllocateProducerIds",
        "RegisterCoordinator",
        "CoordinatorHeartbeat",
    ],
)
def test_member_only_rpcs_are_unimplemented_and_not_forwarded(method: str) -> None:
    channel = FakeChannel()
    with pytest.raises(Aborted) as refused:
        run(getattr(servicer(channel=channel), method)(object(), FakeContext()))
    assert refused.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert method in refused.value.details and "send it to a controller" in refused.value.details
    assert channel.forwarded == []


# --- what the broker learns from FetchMetadata ----------------------------------------------------


def test_the_quorum_view_is_read_from_a_fetch_answer() -> None:
    response = c.FetchMetadataResponse(cluster_id="cid", committed_end_offset=12)
    response.controllers.add(node_id=1, endpoint="ctl:1")
    response.controllers.add(node_id=2, endpoint="ctl:2")
    assert QuorumView.of(response) == QuorumView("cid", {1: "ctl:1", 2: "ctl:2"}, None, 12)
    response.status.active_controller.node_id = 2
    response.status.active_controller.endpoint = "ctl:2"
    assert QuorumView.of(response).active_node_id == 2
