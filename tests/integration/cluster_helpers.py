"""Helpers for tests that run a real local cluster: stubs, waiting, and describing."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import grpc

from samsa.cli.launcher import ClusterSpec, LocalCluster, load_or_create, wait_healthy
from samsa.services.runtime import membership
from samsa.services.runtime.secret import load_secret
from samsa.v1 import broker_pb2, controller_pb2, controller_pb2_grpc

T = TypeVar("T")

# Short sessions so that fencing is observable in a test; heartbeats well inside them.
FAST_SETTINGS = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "300"}


@contextmanager
def local_cluster(
    data_dir: Path, controllers: int, brokers: int, settings: dict[str, str] | None = None
) -> Iterator[LocalCluster]:
    """A started, healthy cluster; every process is stopped by PID on the way out."""
    spec = load_or_create(data_dir, controllers, brokers, settings or dict(FAST_SETTINGS))
    cluster = LocalCluster(spec, data_dir)
    try:
        cluster.start_all()
        wait_healthy(cluster, timeout_s=60)
        yield cluster
    finally:
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


def controller_stub(endpoint: str) -> controller_pb2_grpc.ControllerServiceStub:
    return controller_pb2_grpc.ControllerServiceStub(grpc.insecure_channel(endpoint))


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
    """gRPC metadata proving membership as `member_id` for one call to `method` (e.g. "Fetch"
    or "AlterPartition"), signed with the cluster secret in `data_dir` (or `secret`)."""
    service = "BrokerService" if method == "Fetch" else "ControllerService"
    descriptor = broker_pb2 if method == "Fetch" else controller_pb2
    path = membership.method_path(descriptor.DESCRIPTOR.services_by_name[service].full_name, method)
    key = membership.derive_key(secret or load_secret(data_dir / "cluster.secret"))
    proof = membership.sign(key, path, member_id, int(time.time() * 1000), secrets.token_hex(8))
    return ((membership.METADATA_KEY, proof),)
