"""Goal: `bootstrap.servers` may list brokers only, as in Kafka (KIP-590): the SDK's Admin,
Producer and Consumer (with a group) and the CLI work without ever being given a controller's
address; a broker answers the controller-only RPCs UNIMPLEMENTED with a message saying where they
go; and a wrong address fails within the client's timeout with one clear line.

Method: a real local cluster (1 controller, 2 brokers, 1 coordinator, processes stopped by PID),
clients given the brokers' endpoints alone. Admin creates, describes, configures and deletes a
topic (each read after a write asks the broker for the write's metadata offset, so it also checks
that the broker waits for its image to catch up); a producer and a group consumer move records
through it; the CLI lists and describes through a broker. The wrong addresses are a port nothing
listens on (retried until the timeout: a server may be starting) and ports that are not Samsa's
(a gRPC server without Samsa's services, a plain HTTP server: given up on at once). Timings are
bounds far above what these take on a loaded machine, never tight.
"""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, Consumer, NewTopic, NoBrokersAvailable, Producer, TopicError
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2, controller_pb2_grpc

pytestmark = pytest.mark.timeout(300)

SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "300",
}
TOPIC = "via-brokers"
RECORDS = 500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("brokers-only"), 1, 2, SETTINGS, 1) as running:
        yield running


def brokers_only(cluster: LocalCluster) -> str:
    bootstrap = ",".join(broker.endpoint for broker in cluster.spec.brokers)
    controllers = {controller.endpoint for controller in cluster.spec.controllers}
    assert not controllers & set(bootstrap.split(","))
    return bootstrap


def test_admin_producer_group_consumer_and_cli_with_brokers_only(cluster: LocalCluster) -> None:
    bootstrap = brokers_only(cluster)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 2, {"retention.ms": "3600000"})])
        # Read-your-writes through a broker: the broker waits for the write's offset.
        described = admin.describe_topics([TOPIC])[TOPIC]
        assert [p.partition for p in described.partitions] == [0, 1]
        assert all(len(p.replicas) == 2 for p in described.partitions)
        assert TOPIC in admin.list_topics()
        assert admin.describe_configs(TOPIC)["retention.ms"].value == "3600000"
        admin.alter_configs(TOPIC, {"retention.ms": "7200000"})
        assert admin.describe_configs(TOPIC)["retention.ms"].value == "7200000"
        with pytest.raises(TopicError) as exists:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        assert exists.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        cluster_view = admin.describe_cluster()
        # The controllers and which is active, as the brokers learned them from the log.
        assert [c.endpoint for c in cluster_view.controllers] == [
            c.endpoint for c in cluster.spec.controllers
        ]
        assert [c.active for c in cluster_view.controllers] == [True]
        assert cluster_view.cluster_id
        assert {b.endpoint for b in cluster_view.brokers} == set(bootstrap.split(","))
        wait_until(
            "the groups' coordinator",
            lambda: admin.describe_cluster().coordinators or None,
            timeout_s=30,
        )

    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        sent = [producer.send(TOPIC, b"%d" % n, key=b"k%d" % (n % 7)) for n in range(RECORDS)]
        producer.flush(30)
    assert all(future.result(timeout=0).offset >= 0 for future in sent)

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "brokers-only-group",
        "auto.offset.reset": "earliest",
    }
    received: set[int] = set()
    with Consumer(config) as consumer:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while len(received) < RECORDS and time.monotonic() < deadline:
            received |= {int(record.value) for record in consumer.poll(timeout=1)}
        consumer.commit()
    assert received == set(range(RECORDS))
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        offsets = admin.list_consumer_group_offsets("brokers-only-group", [(TOPIC, 0), (TOPIC, 1)])
        assert sum(found.offset for found in offsets.values()) == RECORDS

    cli = [sys.executable, "-m", "samsa.cli.main"]
    listed = subprocess.run(
        [*cli, "topics", "list", "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert TOPIC in listed.stdout.split()
    shown = subprocess.run(
        [*cli, "cluster", "--bootstrap-server", cluster.spec.brokers[1].endpoint],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "active (Raft leader)" in shown.stdout

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.delete_topics([TOPIC])
        assert TOPIC not in admin.list_topics()
        with pytest.raises(TopicError) as gone:
            admin.describe_topics([TOPIC])
        assert gone.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


MEMBER_ONLY_REQUESTS = {
    "RegisterBroker": controller_pb2.RegisterBrokerRequest(broker_id=9),
    "BrokerHeartbeat": controller_pb2.BrokerHeartbeatRequest(broker_id=9),
    "FetchMetadata": controller_pb2.FetchMetadataRequest(),
    "FetchSnapshot": controller_pb2.FetchSnapshotRequest(),
    "AlterPartition": controller_pb2.AlterPartitionRequest(broker_id=9),
    "ReportCorruptReplica": controller_pb2.ReportCorruptReplicaRequest(broker_id=9),
    "AllocateProducerIds": controller_pb2.AllocateProducerIdsRequest(broker_id=9),
    "RegisterCoordinator": controller_pb2.RegisterCoordinatorRequest(coordinator_id=9),
    "CoordinatorHeartbeat": controller_pb2.CoordinatorHeartbeatRequest(coordinator_id=9),
}


def test_a_broker_answers_controller_only_rpcs_unimplemented(cluster: LocalCluster) -> None:
    with grpc.insecure_channel(cluster.spec.brokers[0].endpoint) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        for method, request in MEMBER_ONLY_REQUESTS.items():
            with pytest.raises(grpc.RpcError) as refused:
                getattr(stub, method)(request, timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED, method
            assert "send it to a controller" in refused.value.details(), method
        # Reads are the broker's own: a read asking for an offset far beyond the log is refused.
        with pytest.raises(grpc.RpcError) as beyond:
            stub.DescribeCluster(
                controller_pb2.DescribeClusterRequest(min_metadata_offset=10**12), timeout=10
            )
        assert beyond.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# --- a wrong address ---------------------------------------------------------------------------

TIMEOUT_MS = 1000
# Not a speed check: twice the timeout set, far below the 60 s (max.block.ms) of a hang.
BOUND_S = 2 * TIMEOUT_MS / 1000


def refused_address() -> str:
    """A loopback port nothing listens on (bound, then released): connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def other_grpc_server() -> Iterator[str]:
    """A gRPC server with no Samsa service (only what every gRPC server answers: nothing)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(0)


@pytest.fixture
def http_server() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def produce_to(address: str) -> tuple[NoBrokersAvailable, float]:
    started = time.monotonic()
    config = {"bootstrap.servers": address, "max.block.ms": TIMEOUT_MS}
    with Producer(config) as producer, pytest.raises(NoBrokersAvailable) as failed:
        producer.send("anything", b"x")
    return failed.value, time.monotonic() - started


def admin_to(address: str) -> tuple[list[NoBrokersAvailable], float]:
    started = time.monotonic()
    errors = []
    with Admin({"bootstrap.servers": address, "request.timeout.ms": TIMEOUT_MS}) as admin:
        for call in (admin.list_topics, lambda: admin.create_topics([NewTopic("t", 1, 1)])):
            with pytest.raises(NoBrokersAvailable) as failed:
                call()
            errors.append(failed.value)
    return errors, time.monotonic() - started


def test_nothing_listening_fails_within_the_timeout_with_one_line() -> None:
    address = refused_address()
    error, elapsed = produce_to(address)
    assert str(error) == (
        f"no Samsa broker or controller answered DescribeTopics at {address} within 1 s: "
        "connection refused"
    )
    assert elapsed < BOUND_S
    errors, elapsed = admin_to(address)
    assert [str(e) for e in errors] == [
        f"no Samsa broker or controller answered {method} at {address} within 1 s: "
        "connection refused"
        for method in ("DescribeTopics", "CreateTopics")
    ]
    assert elapsed < 2 * BOUND_S  # two calls


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        ("other_grpc_server", "a gRPC service other than Samsa answers there"),
        ("http_server", "what answers there does not speak gRPC"),
    ],
)
def test_a_port_that_is_not_samsa_fails_at_once_with_one_line(
    server: str, reason: str, request: pytest.FixtureRequest
) -> None:
    address = request.getfixturevalue(server)
    error, elapsed = produce_to(address)
    assert str(error) == (
        f"no Samsa broker or controller answered DescribeTopics at {address}: {reason}"
    )
    assert elapsed < BOUND_S
    errors, elapsed = admin_to(address)
    assert [str(e) for e in errors] == [
        f"no Samsa broker or controller answered {method} at {address}: {reason}"
        for method in ("DescribeTopics", "CreateTopics")
    ]
    assert elapsed < BOUND_S
