"""Goal: the coordinator owning a group, killed with SIGKILL while two members consume under
load, loses no record, and commits succeed again on the coordinator that takes the group over.

Method: real processes from the launcher (1 controller, 2 brokers, 2 coordinators, stopped by PID
also on failure), with short sessions (group_test_helpers.SETTINGS); the members and the producer
are threads of this process.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster, wait_until
from group_test_helpers import SETTINGS, consumer_config, create_topics

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    Consumer,
    KafkaError,
    NewTopic,
    Producer,
)
from samsa.metadata.coordinators import GROUP_KEY_TYPE
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg

pytestmark = pytest.mark.timeout(300)


COORDINATOR_TOPIC = "coordinator-kill"
COORDINATOR_PARTITIONS = 4


def find_coordinator(cluster: LocalCluster, group_id: str) -> c.CoordinatorLocation:
    """The group's coordinator, as the first broker answers it once it knows one."""
    stub = cg.CoordinatorLookupServiceStub(grpc.insecure_channel(cluster.spec.brokers[0].endpoint))

    def found() -> c.CoordinatorLocation | None:
        request = c.FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, keys=[group_id])
        location = stub.FindCoordinator(request, timeout=5).coordinators[0]
        return None if location.error_code else location

    return wait_until(f"a coordinator for {group_id}", found, timeout_s=30)


class ConsumingThread(threading.Thread):
    """A group member polling and committing after every batch until told to stop; then one
    last commit of everything it consumed, and close()."""

    def __init__(self, config: dict) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(config)
        self.stop = threading.Event()
        self.seen_lock = threading.Lock()
        self.seen: set[int] = set()  # under seen_lock: the test thread reads it
        self.commit_ok_ns: list[int] = []  # when each successful commit was started
        self.commit_errors: list[str] = []
        self.failure: BaseException | None = None
        # Partitions it owns, as of its last poll: the test thread reads this, never the
        # consumer (a Consumer refuses a second thread while the polling one is inside a call).
        self.owned = 0

    def run(self) -> None:
        try:
            self.consumer.subscribe([COORDINATOR_TOPIC])
            while not self.stop.is_set():
                records = self.consumer.poll(timeout=0.2)
                self.owned = len(self.consumer.assignment())
                with self.seen_lock:
                    self.seen |= {int(r.value) for r in records}
                if records:
                    self.commit()
            self.consumer.poll(timeout=0)
            self.consumer.commit()
        except BaseException as error:  # the test thread reports it
            self.failure = error
        finally:
            self.consumer.close()

    def seen_ids(self) -> set[int]:
        with self.seen_lock:
            return set(self.seen)

    def commit(self) -> None:
        started_ns = time.monotonic_ns()
        try:
            self.consumer.commit()
        except KafkaError as error:
            self.commit_errors.append(f"{type(error).__name__}: {error}")
        else:
            self.commit_ok_ns.append(started_ns)


class ProducingThread(threading.Thread):
    """Produces ids 0, 1, 2, ... round-robin over the partitions until told to stop."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers})
        self.stop = threading.Event()
        self.sent = 0
        self.acked: dict[int, int] = {}  # id -> partition
        self.end_offsets: dict[int, int] = {}
        self.failure: BaseException | None = None
        # Partitions it owns, as of its last poll: the test thread reads this, never the
        # consumer (a Consumer refuses a second thread while the polling one is inside a call).
        self.owned = 0

    def run(self) -> None:
        futures = []
        try:
            while not self.stop.is_set():
                for _ in range(20):
                    n = self.sent
                    partition = n % COORDINATOR_PARTITIONS
                    futures.append(
                        (n, self.producer.send(COORDINATOR_TOPIC, b"%d" % n, partition=partition))
                    )
                    self.sent += 1
                time.sleep(0.02)
            self.producer.flush(30)
            for n, future in futures:
                metadata = future.result(timeout=0)
                self.acked[n] = metadata.partition
                at = self.end_offsets.get(metadata.partition, 0)
                self.end_offsets[metadata.partition] = max(at, metadata.offset + 1)
        except BaseException as error:  # the test thread reports it
            self.failure = error
        finally:
            self.producer.close()


def stop_threads(members: list[ConsumingThread], producer: ProducingThread) -> None:
    """Stop and join what was started; close the clients of what was not."""
    for thread in (*members, producer):
        thread.stop.set()
    for thread in (*members, producer):
        if thread.ident is not None:
            thread.join(20)
        elif isinstance(thread, ConsumingThread):
            thread.consumer.close()
        else:
            thread.producer.close()


def test_kill_9_of_the_group_coordinator_under_load_loses_no_record(tmp_path: Path) -> None:
    group_id = "coordinator-kill"
    with local_cluster(tmp_path, 1, 2, SETTINGS, 2) as cluster:
        create_topics(cluster, NewTopic(COORDINATOR_TOPIC, COORDINATOR_PARTITIONS, 2))
        config = consumer_config(cluster, group_id, **{"enable.auto.commit": False})
        members = [ConsumingThread(config), ConsumingThread(config)]
        producer = ProducingThread(cluster)
        try:
            for member in members:
                member.start()
            wait_until(
                "both members owning partitions",
                lambda: all(m.owned == 2 for m in members),
                timeout_s=30,
            )
            producer.start()
            wait_until(
                "records consumed", lambda: sum(len(m.seen_ids()) for m in members) > 500, 30
            )
            location = find_coordinator(cluster, group_id)
            kill_ns = time.monotonic_ns()
            sent_before_kill = producer.sent
            cluster.kill(f"coordinator-{location.coordinator_id}", signal.SIGKILL)
            wait_until(
                "a commit to succeed on both members after the kill",
                lambda: all(m.commit_ok_ns and m.commit_ok_ns[-1] > kill_ns for m in members),
                timeout_s=45,
            )
            time.sleep(1)  # go on producing a little on the new coordinator's watch
            producer.stop.set()
            producer.join(40)
            assert producer.failure is None, producer.failure
            acked = set(producer.acked)
            assert len(acked) == producer.sent > sent_before_kill
            wait_until(
                "every record consumed",
                lambda: set().union(*(m.seen_ids() for m in members)) >= acked,
                timeout_s=60,
            )
        finally:
            stop_threads(members, producer)
        for member in members:
            assert member.failure is None, member.failure
        # The first broker answers from its own image, which may learn of the move after the
        # members did (they asked any server): wait for it to name the new coordinator.
        wait_until(
            "the first broker to name the group's new coordinator",
            lambda: find_coordinator(cluster, group_id).coordinator_id != location.coordinator_id,
            timeout_s=30,
        )
        with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
            committed = admin.list_consumer_group_offsets(group_id)
        assert {tp: at.offset for tp, at in committed.items()} == {
            (COORDINATOR_TOPIC, p): end for p, end in producer.end_offsets.items()
        }
