"""Helpers for tests that run a real local cluster: stubs, waiting, describing, and a fake
coordinator (its controller side only: registration and heartbeats, signed)."""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import grpc
from history_checker import History, Report

from samsa.cli.launcher import ClusterSpec, LocalCluster, load_or_create, wait_healthy
from samsa.client import Consumer
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import replay
from samsa.metadata.snapshot_transfer import SnapshotAssembler
from samsa.services.runtime import membership
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.secret import load_secret
from samsa.v1 import broker_pb2, controller_pb2, controller_pb2_grpc

T = TypeVar("T")

# No retention pass during a test (local_cluster sets it unless a test says otherwise): records
# written with fixed, old timestamps (build_batch's 0, a 2023 CreateTime) are past the default
# retention.ms, and the brokers would delete them, active segment and all, at their first check
# (retention itself is tested in tests/unit/log and replication_sim.py).
NO_RETENTION_CHECK = {"log.retention.check.interval.ms": "3600000"}
# Short sessions so that fencing is observable in a test; heartbeats well inside them.
FAST_SETTINGS = NO_RETENTION_CHECK | {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
}
# For transaction tests: few internal partitions, and coordinators and members that are fenced
# within seconds.
TRANSACTION_SETTINGS = FAST_SETTINGS | {
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "300",
}
# A fake coordinator's heartbeat interval: well inside the tests' coordinator sessions (>= 1.5 s).
HEARTBEAT_INTERVAL_S = 0.3
CONTROLLER_SERVICE = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name
# The channels `open_channel` opened, closed by `close_channels` (local_cluster does, as it ends).
# An idle sync channel does not answer a stopping server's GOAWAY under gRPC's older poller
# (which the SDK selects, samsa.common.grpc_experiments), so a channel left open holds that
# server's graceful stop for its whole grace period.
_OPEN_CHANNELS: list[grpc.Channel] = []


def open_channel(endpoint: str) -> grpc.Channel:
    """A new channel to `endpoint`, closed with the cluster (`close_channels`)."""
    opened = grpc.insecure_channel(endpoint)
    _OPEN_CHANNELS.append(opened)
    return opened


def close_channels() -> None:
    while _OPEN_CHANNELS:
        _OPEN_CHANNELS.pop().close()


@contextmanager
def local_cluster(
    data_dir: Path,
    controllers: int,
    brokers: int,
    settings: dict[str, str] | None = None,
    coordinators: int = 0,
    tls: bool = False,
    authorizer: bool = False,
    sasl: bool = False,
) -> Iterator[LocalCluster]:
    """A started, healthy cluster; every process is stopped by PID on the way out. `tls`: every
    process serves TLS and requires a client certificate (spec.client_security(data_dir) is a
    client's configuration); `authorizer` (with tls): and enforces ACLs, that client being the
    super user (cluster_tls.issue_client makes other principals' certificates); `sasl`: every
    process requires a SASL/SCRAM login over TLS, spec.client_security(data_dir) logging in as
    admin (the super user with `authorizer`)."""
    settings = NO_RETENTION_CHECK | (settings or FAST_SETTINGS)
    spec = load_or_create(
        data_dir,
        controllers,
        brokers,
        settings,
        coordinators=coordinators,
        tls=tls,
        authorizer=authorizer,
        sasl=sasl,
    )
    cluster = LocalCluster(spec, data_dir)
    try:
        cluster.start_all()
        wait_healthy(cluster, timeout_s=60)
        yield cluster
    finally:
        close_channels()
        cluster.stop_all()


def wait_until(what: str, probe: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after the timeout."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = probe()
        except grpc.RpcError as error:
            last_error, value = error, None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last_error})")


def broker_log_count(data_dir: Path, message: str) -> int:
    """How many times `message` appears in the brokers' logs of the cluster in `data_dir` (every
    restart appends to the same file): a fault test counts the faults that fired."""
    return sum(
        path.read_text(errors="replace").count(message)
        for path in (data_dir / "logs").glob("broker-*.log")
    )


# The broker log lines an idempotence fault test counts: a Produce answer the fault hook dropped
# after the append, and a retried batch the broker found already in the log (SAMSA_FAULTS).
ANSWER_DROPPED = '"fault": "produce.drop_answer"'
RETRY_ANSWERED = "a retried batch is already in the log"


def assert_idempotent_history(
    report: Report, history: History, retries: int, data_dir: Path, label: str = ""
) -> None:
    """What every idempotence fault test asserts of its run, after printing its figures (the
    issue notes report them): nothing lost, duplicated or reordered; every send acknowledged (a
    crashed node is back within seconds and delivery.timeout.ms is 2 minutes, so each is
    retried until it is); and the faults really fired: an answer was dropped, and a retried
    batch reached a broker that already had it."""
    dropped = broker_log_count(data_dir, ANSWER_DROPPED)
    answered = broker_log_count(data_dir, RETRY_ANSWERED)
    print(
        f"\n{label}{report.summary()}; batches retried {retries}, answers dropped {dropped}, "
        f"retried batches the broker answered from its state {answered}; "
        f"failed sends {dict(history.failed)}"
    )
    assert report.ok, (
        f"{report.summary()}: lost {report.lost[:3]}, duplicated {report.duplicated[:3]}, "
        f"reordered {report.reordered[:3]}"
    )
    assert not history.failed, f"sends failed: {dict(history.failed)}"
    assert report.records_acked == report.records_sent, report.summary()
    assert dropped > 0, "no answer was dropped: the fault hook did not fire"
    assert answered > 0, "no retried batch reached a broker that already had it"


def read_to_end(
    bootstrap: str, partitions: list[tuple[str, int]], isolation: str, timeout_s: float = 120
) -> list[tuple[int, int, bytes]]:
    """Every record of `partitions` from the start to their end at `isolation` (the last stable
    offset for read_committed), as (partition, offset, value)."""
    config = {
        "bootstrap.servers": bootstrap,
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
        "max.poll.records": 10_000,
    }
    with Consumer(config) as consumer:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        records: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"could not read {partitions} to their end"
            records += [(r.partition, r.offset, r.value) for r in consumer.poll(timeout=2)]
        return records


def controller_stub(endpoint: str) -> controller_pb2_grpc.ControllerServiceStub:
    return controller_pb2_grpc.ControllerServiceStub(open_channel(endpoint))


def describe_cluster(spec: ClusterSpec, node_id: int) -> controller_pb2.DescribeClusterResponse:
    endpoint = next(c.endpoint for c in spec.controllers if c.node_id == node_id)
    return controller_stub(endpoint).DescribeCluster(
        controller_pb2.DescribeClusterRequest(), timeout=5
    )


def active_controller(spec: ClusterSpec, alive: set[int] | None = None) -> int | None:
    """The node id every live controller agrees is active, or None while they do not."""
    views = set()
    for controller in spec.controllers:
        if alive is not None and controller.node_id not in alive:
            continue
        answer = describe_cluster(spec, controller.node_id)
        views.add(next((c.node_id for c in answer.controllers if c.is_active), None))
    if len(views) != 1:
        return None
    agreed = views.pop()
    return agreed if alive is None or agreed in alive else None


def admin_write(spec: ClusterSpec, method: str, request: object) -> object:
    """Send a write to the controllers, following NOT_CONTROLLER redirects like a client."""
    endpoints = [c.endpoint for c in spec.controllers]
    deadline = time.monotonic() + 30
    index = 0
    while time.monotonic() < deadline:
        stub = controller_stub(endpoints[index % len(endpoints)])
        try:
            answer = getattr(stub, method)(request, timeout=5)
        except grpc.RpcError:
            index += 1
            time.sleep(0.1)
            continue
        if answer.status.error_code != 41:  # NOT_CONTROLLER
            return answer
        if answer.status.HasField("active_controller"):
            index = endpoints.index(answer.status.active_controller.endpoint)
        else:
            index += 1
            time.sleep(0.1)
    raise AssertionError(f"{method}: no active controller answered within 30 s")


def member_metadata(
    data_dir: Path, method: str, member_id: int, secret: str | None = None
) -> tuple[tuple[str, str], ...]:
    """gRPC metadata proving membership as `member_id` for one call to `method` (e.g. "Fetch",
    "Produce" or "AlterPartition"), signed with the cluster secret in `data_dir` (or `secret`)."""
    on_broker = method in (
        "Fetch",
        "Produce",
        "ProduceStream",
        "WriteTxnMarkers",
        "WriteTxnMarkersStream",
    )
    service = "BrokerService" if on_broker else "ControllerService"
    descriptor = broker_pb2 if on_broker else controller_pb2
    path = membership.method_path(descriptor.DESCRIPTOR.services_by_name[service].full_name, method)
    key = membership.derive_key(secret or load_secret(data_dir / "cluster.secret"))
    proof = membership.sign(key, path, member_id, int(time.time() * 1000), secrets.token_hex(8))
    return ((membership.METADATA_KEY, proof),)


class FakeCoordinator:
    """A coordinator's controller side: registration, then heartbeats on a thread."""

    def __init__(self, endpoint: str, key: bytes, coordinator_id: int) -> None:
        self.stub = controller_stub(endpoint)
        self.signer = MemberSigner(key, coordinator_id)
        self.coordinator_id = coordinator_id
        self.endpoint = f"127.0.0.1:{17000 + coordinator_id}"
        self.coordinator_epoch = -1
        self.last: controller_pb2.CoordinatorHeartbeatResponse | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat_loop, daemon=True)

    def _metadata(self, method: str) -> tuple[tuple[str, str], ...]:
        return self.signer.metadata(membership.method_path(CONTROLLER_SERVICE, method))

    def register(
        self, incarnation: str | None = None
    ) -> controller_pb2.RegisterCoordinatorResponse:
        return self.stub.RegisterCoordinator(
            controller_pb2.RegisterCoordinatorRequest(
                coordinator_id=self.coordinator_id,
                incarnation_id=incarnation or uuid.uuid4().hex,
                endpoint=self.endpoint,
            ),
            timeout=10,
            metadata=self._metadata("RegisterCoordinator"),
        )

    def start(self) -> None:
        def registered() -> controller_pb2.RegisterCoordinatorResponse | None:
            answer = self.register()
            return None if answer.status.error_code == ErrorCode.NOT_CONTROLLER else answer

        answer = wait_until(f"coordinator {self.coordinator_id} registered", registered, 60)
        assert answer.status.error_code == ErrorCode.NONE, answer.status.error_message
        self.coordinator_epoch = answer.coordinator_epoch
        self._thread.start()

    def heartbeat(self) -> controller_pb2.CoordinatorHeartbeatResponse:
        return self.stub.CoordinatorHeartbeat(
            controller_pb2.CoordinatorHeartbeatRequest(
                coordinator_id=self.coordinator_id,
                coordinator_epoch=self.coordinator_epoch,
            ),
            timeout=5,
            metadata=self._metadata("CoordinatorHeartbeat"),
        )

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_INTERVAL_S):
            try:
                self.last = self.heartbeat()
            except grpc.RpcError:
                continue

    def stop_heartbeating(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def fetch_snapshot(
    stub: controller_pb2_grpc.ControllerServiceStub, snapshot_id: controller_pb2.SnapshotId
) -> MetadataImage:
    """The image of the snapshot a FetchMetadata answer named, fetched in chunks."""
    assembler = SnapshotAssembler(snapshot_id)
    while not assembler.done:
        request = controller_pb2.FetchSnapshotRequest(
            snapshot_id=snapshot_id, position=assembler.position
        )
        assembler.accept(stub.FetchSnapshot(request, timeout=5).chunk)
    return assembler.image()


def controller_image(endpoint: str) -> MetadataImage:
    """The controller's image, rebuilt here from its metadata log with the real replay."""
    stub = controller_stub(endpoint)
    image = MetadataImage.empty()
    while True:
        answer = stub.FetchMetadata(
            controller_pb2.FetchMetadataRequest(end_offset=image.end_offset, hash=image.hash),
            timeout=5,
        )
        if answer.HasField("snapshot_id"):
            image = fetch_snapshot(stub, answer.snapshot_id)
        for batch in answer.batches:
            image = replay(image, batch)
        if image.end_offset >= answer.committed_end_offset:
            return image
