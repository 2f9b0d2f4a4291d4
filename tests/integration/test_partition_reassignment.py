"""Goal: a partition moves to other brokers while an acks=all producer writes to it (KIP-455),
and a reassignment can be cancelled, with real processes: the added replicas follow the leader
from its log start and join the ISR, the removed leader hands over without losing an
acknowledged record, and a removed replica deletes its log directory.

Method: 1 controller, 3 brokers. A topic of replication factor 1 lands on some broker A (its
placement read back); the others are B and C. C is stopped before the move, so the reassignment
to [B, C] is observably in progress (B joins the ISR, C cannot) until C starts again. The
controller is called through raw gRPC stubs (the SDK's Admin call is written elsewhere); the
cancel goes through a broker, which forwards it. Records are read back with an SDK consumer
from whichever broker leads; A's partition directory must be gone.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, admin_write, controller_stub, local_cluster, wait_until
from cluster_helpers import read_to_end as read_all

from samsa.cli.launcher import LocalCluster
from samsa.client import Producer
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

pytestmark = pytest.mark.timeout(300)

# A short lag window: a stopped follower leaves the ISR within seconds.
SETTINGS = dict(FAST_SETTINGS, **{"replica.lag.time.max.ms": "2000"})
# The producer's bound: it stops well before this unless the move hangs.
RECORDS_MAX = 20_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("reassign"), 1, 3, SETTINGS) as running:
        yield running


def create_single_replica(cluster: LocalCluster, topic: str) -> tuple[int, int, int]:
    """Create `topic` (1 partition, replication factor 1); (A, B, C): the broker holding it,
    then the other two by id."""
    request = c.CreateTopicsRequest(
        topics=[c.CreateTopicsRequest.Topic(name=topic, num_partitions=1, replication_factor=1)]
    )
    answer = admin_write(cluster.spec, "CreateTopics", request)
    assert answer.topics[0].error_code == ErrorCode.NONE, answer.topics[0].error_message
    state = wait_until(f"{topic} led", lambda: (s := describe(cluster, topic)).leader >= 0 and s)
    a = state.replicas[0]
    b, c_ = sorted(broker.broker_id for broker in cluster.spec.brokers if broker.broker_id != a)
    return a, b, c_


def describe(cluster: LocalCluster, topic: str) -> c.DescribeTopicsResponse.Partition:
    answer = controller_stub(cluster.spec.controllers[0].endpoint).DescribeTopics(
        c.DescribeTopicsRequest(names=[topic]), timeout=5
    )
    return answer.topics[0].partitions[0]


def listed(
    endpoint: str, topic: str, min_metadata_offset: int = 0
) -> list[tuple[list[int], list[int], list[int]]]:
    """(replicas, adding, removing) of `topic`'s reassignments in progress, as `endpoint` (a
    controller or a broker) answers once it has applied `min_metadata_offset`."""
    request = c.ListPartitionReassignmentsRequest(
        topics=[c.ListPartitionReassignmentsRequest.Topic(name=topic)],
        min_metadata_offset=min_metadata_offset,
    )
    answer = controller_stub(endpoint).ListPartitionReassignments(request, timeout=10)
    assert answer.metadata_offset >= min_metadata_offset
    return [
        (list(r.replicas), list(r.adding_replicas), list(r.removing_replicas))
        for r in answer.reassignments
    ]


def broker_endpoint(cluster: LocalCluster, broker_id: int) -> str:
    return next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)


def partition_dir(cluster: LocalCluster, broker_id: int, topic: str) -> Path:
    return cluster.data_dir / f"broker-{broker_id}" / f"{topic}-0"


class BackgroundProducer:
    """An acks=all idempotent producer writing to `topic` in a thread until stopped; the
    acknowledged records by offset, and every failure."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.cluster, self.topic = cluster, topic
        self.acked: dict[int, bytes] = {}
        self.failed: list[str] = []
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        config = {
            "bootstrap.servers": self.cluster.spec.bootstrap_servers,
            "acks": "all",
            "linger.ms": 2,
            "delivery.timeout.ms": 120_000,
        }
        with Producer(config) as producer:
            futures = []
            while not self.stop.is_set() and self.sent < RECORDS_MAX:
                value = b"record-%d" % self.sent
                futures.append((value, producer.send(self.topic, value, partition=0)))
                self.sent += 1
                if self.sent % 50 == 0:
                    time.sleep(0.02)  # a steady trickle through the whole move
            producer.flush(timeout=180)
            for value, future in futures:
                error = future.exception(timeout=0)
                if error is None:
                    self.acked[future.result(timeout=0).offset] = value
                else:
                    self.failed.append(f"{value!r}: {error}")

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=200)
        assert not self.thread.is_alive(), "the producer did not finish"
        assert not self.failed, f"{len(self.failed)} sends failed: {self.failed[:3]}"
        assert len(self.acked) == self.sent, f"{self.sent} sent, {len(self.acked)} offsets"


def assert_all_read(bootstrap: str, topic: str, acked: dict[int, bytes]) -> None:
    """Every acknowledged record is read back at its offset (an SDK consumer bootstrapped at
    `bootstrap` reads from the partition's leader)."""
    read = {
        offset: value for _, offset, value in read_all(bootstrap, [(topic, 0)], "read_uncommitted")
    }
    lost = [offset for offset, value in acked.items() if read.get(offset) != value]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost: {lost[:5]}"


def reassign(endpoint: str, topic: str, target: list[int] | None) -> int:
    """Send one reassignment (None: a cancel) to `endpoint`, a controller or a broker; the
    metadata offset of its commit."""
    request = c.AlterPartitionReassignmentsRequest()
    request.partitions.add(topic=topic, partition=0, replicas=target or [], cancel=target is None)
    answer = controller_stub(endpoint).AlterPartitionReassignments(request, timeout=10)
    assert answer.status.error_code == ErrorCode.NONE, answer.status.error_message
    (result,) = answer.partitions
    assert result.error_code == ErrorCode.NONE, result.error_message
    return answer.status.metadata_offset


def test_a_partition_moves_to_two_other_brokers_under_acks_all_writes(cluster) -> None:
    topic = "moving"
    a, b, c_ = create_single_replica(cluster, topic)
    controller = cluster.spec.controllers[0].endpoint
    cluster.kill(f"broker-{c_}", signal.SIGTERM)  # C is down while B catches up
    producer = BackgroundProducer(cluster, topic)
    try:
        wait_until("records acknowledged before the move", lambda: producer.sent >= 500)
        offset = reassign(controller, topic, [b, c_])
        in_progress = [([b, c_, a], [b, c_], [a])]
        assert listed(controller, topic) == in_progress, "C is down: it cannot complete"
        assert listed(broker_endpoint(cluster, b), topic, offset) == in_progress
        wait_until(f"broker {b} in the ISR", lambda: b in describe(cluster, topic).isr, 60)
        state = describe(cluster, topic)
        assert state.leader == a and list(state.adding_replicas) == [b, c_], "C is down"
    finally:
        cluster.start(f"broker-{c_}")
    wait_until("the move to complete", lambda: not listed(controller, topic), 90)
    sent_at_completion = producer.sent
    wait_until(  # a few more writes, to the new leader
        "more sends after the move",
        lambda: producer.sent >= min(sent_at_completion + 100, RECORDS_MAX),
        60,
    )
    producer.finish()
    state = describe(cluster, topic)
    assert list(state.replicas) == [b, c_] and state.leader in (b, c_)
    assert not state.adding_replicas and not state.removing_replicas
    assert a not in state.isr
    gone = partition_dir(cluster, a, topic)
    wait_until(f"broker {a} to delete its copy", lambda: not gone.exists())
    assert_all_read(broker_endpoint(cluster, state.leader), topic, producer.acked)


def test_a_cancel_drops_the_added_replicas_and_keeps_the_partition(cluster) -> None:
    topic = "staying"
    a, b, c_ = create_single_replica(cluster, topic)
    producer = BackgroundProducer(cluster, topic)
    cluster.kill(f"broker-{c_}", signal.SIGTERM)
    try:
        wait_until("records acknowledged", lambda: producer.sent >= 200)
        via = broker_endpoint(cluster, b)  # a broker forwards it to the controller
        offset = reassign(via, topic, [b, c_])
        assert listed(via, topic, offset) == [([b, c_, a], [b, c_], [a])]
        wait_until(f"broker {b} in the ISR", lambda: b in describe(cluster, topic).isr, 60)
        offset = reassign(via, topic, None)
        assert listed(via, topic, offset) == []
        assert listed(cluster.spec.controllers[0].endpoint, topic) == []
    finally:
        cluster.start(f"broker-{c_}")
    producer.finish()
    state = describe(cluster, topic)
    assert (list(state.replicas), list(state.isr), state.leader) == ([a], [a], a)
    assert not state.adding_replicas and not state.removing_replicas
    gone = partition_dir(cluster, b, topic)
    wait_until(f"broker {b} to delete its copy", lambda: not gone.exists())
    assert_all_read(broker_endpoint(cluster, a), topic, producer.acked)
