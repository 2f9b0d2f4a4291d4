"""The controller quorum as real processes: election, failover, fencing, and a safe Raft port.

Three controllers and two brokers on loopback. Each test states the invariant it would catch
breaking (DESIGN §2): metadata survives the loss of the Raft leader, a silent broker is fenced and
comes back with a new epoch, and nothing a stranger sends to the Raft port runs.
"""

from __future__ import annotations

import contextlib
import pickle
import socket
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from cluster_helpers import (
    active_controller,
    admin_write,
    describe_cluster,
    local_cluster,
    wait_until,
)

from samsa.cli.launcher import LocalCluster
from samsa.common import limits
from samsa.v1 import controller_pb2

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("quorum"), controllers=3, brokers=2) as running:
        yield running


def create_topic(
    cluster: LocalCluster, name: str, partitions: int = 2
) -> controller_pb2.CreateTopicsResponse:
    request = controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreateTopicsRequest.Topic(
                name=name, num_partitions=partitions, replication_factor=1
            )
        ]
    )
    answer = admin_write(cluster.spec, "CreateTopics", request)
    assert answer.topics[0].error_code == 0, answer.topics[0].error_message
    return answer


def describe_topic(cluster: LocalCluster, node_id: int, name: str, min_offset: int = 0):
    from cluster_helpers import controller_stub

    endpoint = next(c.endpoint for c in cluster.spec.controllers if c.node_id == node_id)
    return controller_stub(endpoint).DescribeTopics(
        controller_pb2.DescribeTopicsRequest(
            names=[name],
            min_metadata_offset=min_offset,
            # One page holds any one topic at the largest limit (KIP-966 paging).
            partition_limit=limits.describe_topics_partitions_max,
        ),
        timeout=10,
    )


def test_one_active_controller_and_every_follower_serves_reads_at_an_offset(cluster) -> None:
    active = wait_until("an agreed active controller", lambda: active_controller(cluster.spec))
    answer = create_topic(cluster, "orders", partitions=4)
    offset = answer.status.metadata_offset
    assert offset > 0
    for controller in cluster.spec.controllers:
        described = describe_topic(cluster, controller.node_id, "orders", min_offset=offset)
        assert described.status.metadata_offset >= offset
        topic = described.topics[0]
        assert topic.error_code == 0 and len(topic.partitions) == 4
        assert {p.leader for p in topic.partitions} <= {1, 2}
        assert set(described.broker_endpoints) == {1, 2}
    follower = next(c for c in cluster.spec.controllers if c.node_id != active)
    from cluster_helpers import controller_stub

    refused = controller_stub(follower.endpoint).CreateTopics(
        controller_pb2.CreateTopicsRequest(
            topics=[controller_pb2.CreateTopicsRequest.Topic(name="x", num_partitions=1)]
        ),
        timeout=5,
    )
    assert refused.status.error_code == 41, "a follower must answer NOT_CONTROLLER"
    assert refused.status.active_controller.node_id == active


def test_a_metadata_batch_larger_than_a_raft_chunk_reaches_every_controller(cluster) -> None:
    """One CreateTopics of topic_partitions_max partitions is one metadata batch of several
    hundred KiB (pysyncobj chunked such an entry and its followers failed to unpickle it, see
    limits.raft_append_entries_batch_bytes): every controller applies it, with no Raft error."""
    logs_before = {c.node_id: controller_log(cluster, c.node_id) for c in cluster.spec.controllers}
    answer = create_topic(cluster, "wide", partitions=limits.topic_partitions_max)
    offset = answer.status.metadata_offset
    for controller in cluster.spec.controllers:
        described = describe_topic(cluster, controller.node_id, "wide", min_offset=offset)
        assert described.status.metadata_offset >= offset, f"controller {controller.node_id}"
        assert len(described.topics[0].partitions) == limits.topic_partitions_max
        written = controller_log(cluster, controller.node_id)[
            len(logs_before[controller.node_id]) :
        ]
        assert "failed _onTick" not in written, written[-2000:]


def controller_log(cluster: LocalCluster, node_id: int) -> str:
    path = cluster.data_dir / "logs" / f"controller-{node_id}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def test_kill_9_the_active_controller_elects_another_with_metadata_intact(cluster) -> None:
    create_topic(cluster, "before-failover", partitions=3)
    old = wait_until("an active controller", lambda: active_controller(cluster.spec))
    cluster.kill(f"controller-{old}")
    alive = {c.node_id for c in cluster.spec.controllers} - {old}
    new = wait_until(
        "a new active controller", lambda: active_controller(cluster.spec, alive), timeout_s=60
    )
    assert new != old
    assert describe_topic(cluster, new, "before-failover").topics[0].error_code == 0
    create_topic(cluster, "after-failover")
    cluster.start(f"controller-{old}")
    end = describe_cluster(cluster.spec, new).status.metadata_offset
    wait_until(
        "the restarted controller to catch up",
        lambda: (
            describe_topic(cluster, old, "after-failover", min_offset=end).topics[0].error_code == 0
        ),
        timeout_s=60,
    )


def test_kill_9_a_broker_fences_it_and_a_restart_registers_a_new_epoch(cluster) -> None:
    def broker(node: int) -> controller_pb2.DescribeClusterResponse.Broker | None:
        active = active_controller(cluster.spec)
        if active is None:
            return None
        answer = describe_cluster(cluster.spec, active)
        return next((b for b in answer.brokers if b.broker_id == node), None)

    before = wait_until("broker 2 registered", lambda: broker(2))
    cluster.kill("broker-2")
    wait_until("broker 2 fenced", lambda: (b := broker(2)) is not None and b.is_fenced, 30)
    cluster.start("broker-2")
    after = wait_until(
        "broker 2 back unfenced",
        lambda: (b := broker(2)) is not None and not b.is_fenced and b,
        timeout_s=60,
    )
    assert after.broker_epoch > before.broker_epoch, "a restart registers with a new epoch"


def test_the_raft_port_runs_nothing_a_stranger_sends_and_the_quorum_keeps_working(
    cluster, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    payload = zlib.compress(pickle.dumps(Exploit()))
    frames = [
        struct.pack("i", len(payload)) + payload,  # pysyncobj's framing, no encryption
        b"\x00\x00\x10\x00" + b"garbage" * 100,
        b"GET / HTTP/1.1\r\n\r\n",
    ]
    for controller in cluster.spec.controllers:
        if cluster.processes[f"controller-{controller.node_id}"].poll() is not None:
            continue
        host, port = controller.raft_address.rsplit(":", 1)
        for frame in frames:
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(frame)
                sock.settimeout(1)
                with contextlib.suppress(TimeoutError, ConnectionResetError):
                    sock.recv(1024)
    assert not marker.exists(), "a pickle sent to the Raft port was executed"
    create_topic(cluster, "after-garbage")
    assert not cluster.exited(), "a controller died of garbage on its Raft port"


def test_a_controller_refuses_to_start_without_the_cluster_secret(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "samsa.services.controller",
            "--node-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--raft-address",
            "127.0.0.1:0",
            "--peers",
            "",
            "--data-dir",
            str(tmp_path / "c"),
            "--secret-file",
            str(tmp_path / "missing.secret"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "secret" in result.stderr and "missing.secret" in result.stderr


def test_a_whole_cluster_restart_recovers_metadata_from_snapshots_and_journals(
    tmp_path: Path,
) -> None:
    from cluster_helpers import FAST_SETTINGS

    settings = dict(FAST_SETTINGS, **{"metadata.snapshot.entries": "20"})
    with local_cluster(tmp_path, controllers=3, brokers=1, settings=settings) as cluster:
        for n in range(30):  # one Raft entry per topic: the journal passes 20 entries
            create_topic(cluster, f"topic-{n}", partitions=1)
        end = describe_cluster(cluster.spec, 1).status.metadata_offset
        cluster.stop_all()
        snapshots = list(tmp_path.glob("controller-*/metadata.snapshot"))
        assert snapshots, "no controller wrote a metadata snapshot"
        cluster.start_all()
        from samsa.cli.launcher import wait_healthy

        wait_healthy(cluster, timeout_s=60)
        for controller in cluster.spec.controllers:
            answer = wait_until(
                f"controller {controller.node_id} to recover",
                lambda node=controller.node_id: (
                    (d := describe_topic(cluster, node, "topic-29", min_offset=end))
                    .topics[0]
                    .error_code
                    == 0
                    and d
                ),
                timeout_s=60,
            )
            assert answer.status.metadata_offset >= end
        # Brokers re-register (fenced until caught up) right after a restart: retry like a user.
        wait_until("a topic created after the restart", lambda: _try_create(cluster, "after"))


def _try_create(cluster: LocalCluster, name: str) -> bool:
    request = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreateTopicsRequest.Topic(name=name, num_partitions=1)]
    )
    return admin_write(cluster.spec, "CreateTopics", request).topics[0].error_code in (0, 36)
