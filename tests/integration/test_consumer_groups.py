"""Goal: consumer groups through the SDK (`Consumer.subscribe`) survive what real deployments do
to them: a member killed with SIGKILL mid-stream loses no record and the survivors take its
partitions over, re-reading only what it had not committed, with never two owners of a
partition; the coordinator owning the group killed with SIGKILL under load loses no record and
commits succeed again on the one that takes over; a static member that restarts within its
session gets exactly its partitions back without disturbing the other member; a regex
subscription picks up a topic created after joining; a member that commits in
on_partitions_revoked hands over exactly where it stopped; read_committed and a subscription
without group.id are refused.

Method: real processes from the launcher, stopped by PID also on failure, with short sessions
(3 s, heartbeats every 300 ms) and 4 partitions of `__consumer_offsets`. The two tests that kill
a process get a cluster of their own; the others share one (1 controller, 2 brokers, 2
coordinators) with a topic and a group each. The killed consumer is a subprocess
(group_consumer_proc.py) that journals every record it processed, every commit that succeeded
and every listener call with a monotonic timestamp (one clock for all processes on Linux); the
test reads the journals back. Record values are unique ids, so "every record at least once" is a
set comparison.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until
from group_consumer_proc import Journal, read_journal

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    Consumer,
    ConsumerRebalanceListener,
    KafkaError,
    NewTopic,
    OffsetAndMetadata,
    Producer,
)
from samsa.metadata.coordinators import GROUP_KEY_TYPE
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg

pytestmark = pytest.mark.timeout(300)

TopicPartition = tuple[str, int]

SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "300",
}
CONSUMER_PROC = Path(__file__).with_name("group_consumer_proc.py")

# Test 1: three member processes, one killed after about a third of the records.
KILL_TOPIC = "kill-consumer"
KILL_PARTITIONS = 12
KILL_RECORDS = 60_000
KILL_AFTER_RECORDS = 20_000
KILL_MEMBERS = ("a", "b", "c")
# How long to watch the victim's journal for a moment between a batch and its commit.
KILL_AIM_S = 5.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("sdk-groups"), 1, 2, SETTINGS, 2) as running:
        yield running


def consumer_config(cluster: LocalCluster, group_id: str, **settings: object) -> dict:
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        **settings,
    }


def create_topics(cluster: LocalCluster, *topics: NewTopic) -> None:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics(list(topics))


def produce(cluster: LocalCluster, topic: str, values: dict[bytes, int]) -> None:
    """Send each value to its partition and wait for every acknowledgement."""
    with Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "linger.ms": 5}) as p:
        futures = [p.send(topic, value, partition=at) for value, at in values.items()]
        p.flush(30)
    for future in futures:
        future.result(timeout=0)


# --- 1. kill -9 a consumer ------------------------------------------------------------------------


def start_member(
    cluster: LocalCluster, group_id: str, workdir: Path, name: str
) -> subprocess.Popen:
    arguments = [cluster.spec.bootstrap_servers, group_id, KILL_TOPIC]
    arguments += [str(workdir / f"{name}.journal"), str(workdir / f"{name}.stop")]
    log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it
    try:
        return subprocess.Popen(
            [sys.executable, str(CONSUMER_PROC), *arguments], stdout=log, stderr=subprocess.STDOUT
        )
    finally:
        log.close()


def ownership_intervals(
    journals: dict[str, Journal], victim: str, kill_ns: int
) -> dict[int, list[tuple[int, int, str]]]:
    """partition -> (start_ns, end_ns, member): from each assigned to its revoked or lost; the
    victim's open intervals end when it was killed, the others' never."""
    intervals: dict[int, list[tuple[int, int, str]]] = {}
    for name, journal in journals.items():
        opened: dict[int, int] = {}
        for kind, ns, partitions in journal.changes:
            for partition in partitions:
                if kind == "A":
                    assert partition not in opened, f"{name} assigned {partition} twice"
                    opened[partition] = ns
                else:
                    start = opened.pop(partition)
                    intervals.setdefault(partition, []).append((start, ns, name))
        end = kill_ns if name == victim else sys.maxsize
        for partition, start in opened.items():
            intervals.setdefault(partition, []).append((start, end, name))
    return intervals


def check_never_two_owners(intervals: dict[int, list[tuple[int, int, str]]]) -> None:
    for partition, spans in intervals.items():
        spans.sort()
        for (_, end, owner), (start, _, next_owner) in itertools.pairwise(spans):
            assert end <= start, (
                f"partition {partition} owned by {owner} until {end} and by {next_owner} "
                f"from {start}: two owners"
            )


def check_redelivery(journals: dict[str, Journal], victim: str, victim_owned: set[int]) -> None:
    """Every record processed at least once; twice only where the victim had not committed."""
    every = [r for journal in journals.values() for r in journal.records]
    ids = {record_id for _, _, record_id in every}
    assert ids == set(range(KILL_RECORDS)), f"{KILL_RECORDS - len(ids)} records never processed"
    for partition, offset, record_id in every:
        assert record_id % KILL_PARTITIONS == partition, (partition, offset, record_id)
    counts = Counter((partition, offset) for partition, offset, _ in every)
    twice = {key for key, count in counts.items() if count > 1}
    victim_processed = {(p, o) for p, o, _ in journals[victim].records}
    for partition, offset in sorted(twice):
        assert partition in victim_owned, f"{partition}@{offset} processed twice, not the victim's"
        last_commit = journals[victim].committed.get(partition, 0)
        assert offset >= last_commit, f"{partition}@{offset} processed twice below its commit"
        assert (partition, offset) in victim_processed, f"{partition}@{offset} twice by survivors"
        assert counts[(partition, offset)] == 2, f"{partition}@{offset} processed 3 times"


def wait_balanced(journal_paths: dict[str, Path], each: int) -> None:
    def balanced() -> bool:
        owned = [read_journal(path).owned() for path in journal_paths.values()]
        return all(len(mine) == each for mine in owned)

    wait_until(f"every member owning {each} partitions", balanced, timeout_s=60)


def produce_kill_records(cluster: LocalCluster, failures: list[BaseException]) -> None:
    """On a thread: the ids 0..KILL_RECORDS-1, each in partition id % KILL_PARTITIONS."""
    try:
        values = {b"%d" % n: n % KILL_PARTITIONS for n in range(KILL_RECORDS)}
        produce(cluster, KILL_TOPIC, values)
    except BaseException as error:  # the test thread reports it
        failures.append(error)


def processed_count(journal_paths: dict[str, Path]) -> int:
    return sum(len(read_journal(path).records) for path in journal_paths.values())


def processed_ids(journal_paths: dict[str, Path]) -> set[int]:
    return {r[2] for path in journal_paths.values() for r in read_journal(path).records}


def kill_between_processing_and_commit(process: subprocess.Popen, journal_path: Path) -> int:
    """SIGKILL the member, preferably while its journal ends with records it has not committed
    yet (so that some are processed twice); the monotonic time of the kill."""
    deadline = time.monotonic() + KILL_AIM_S
    with open(journal_path, "rb") as journal:
        while time.monotonic() < deadline:
            size = journal.seek(0, os.SEEK_END)
            journal.seek(max(0, size - 200))
            lines = journal.read().split(b"\n")
            if len(lines) >= 2 and lines[-2].startswith(b"R "):
                break
    kill_ns = time.monotonic_ns()
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    return kill_ns


def survivors_own_everything(cluster: LocalCluster, group_id: str) -> bool:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        group = admin.describe_consumer_groups([group_id])[group_id]
    owned = [tp for member in group.members for tp in member.assignment]
    every = {(KILL_TOPIC, p) for p in range(KILL_PARTITIONS)}
    return len(group.members) == 2 and len(owned) == len(set(owned)) and set(owned) == every


def test_kill_9_of_a_consumer_loses_nothing_and_redelivers_only_its_uncommitted_records(
    tmp_path: Path,
) -> None:
    group_id = "kill-consumer"
    workdir = tmp_path / "members"
    workdir.mkdir()
    journal_paths = {name: workdir / f"{name}.journal" for name in KILL_MEMBERS}
    with local_cluster(tmp_path / "cluster", 1, 2, SETTINGS, 1) as cluster:
        create_topics(cluster, NewTopic(KILL_TOPIC, KILL_PARTITIONS, 1))
        members: dict[str, subprocess.Popen] = {}
        try:
            for name in KILL_MEMBERS:
                members[name] = start_member(cluster, group_id, workdir, name)
            wait_balanced(journal_paths, KILL_PARTITIONS // len(KILL_MEMBERS))
            failures: list[BaseException] = []
            producer = threading.Thread(target=produce_kill_records, args=(cluster, failures))
            producer.start()
            wait_until(
                f"{KILL_AFTER_RECORDS} records processed",
                lambda: processed_count(journal_paths) >= KILL_AFTER_RECORDS,
                timeout_s=60,
            )
            victim = max(
                KILL_MEMBERS, key=lambda name: len(read_journal(journal_paths[name]).owned())
            )
            kill_ns = kill_between_processing_and_commit(members[victim], journal_paths[victim])
            producer.join(60)
            assert not producer.is_alive() and not failures, failures
            wait_until(
                "every record processed",
                lambda: len(processed_ids(journal_paths)) == KILL_RECORDS,
                timeout_s=60,
            )
            wait_until(
                "the survivors owning all partitions",
                lambda: survivors_own_everything(cluster, group_id),
                timeout_s=30,
            )
            survivors = [name for name in KILL_MEMBERS if name != victim]

            def journaled() -> list[set[int]] | None:
                owned = [read_journal(journal_paths[name]).owned() for name in survivors]
                return owned if owned[0] | owned[1] == set(range(KILL_PARTITIONS)) else None

            # A member journals a partition when its listener runs, after the heartbeat answer
            # the coordinator's view above already shows: wait for the journals to say so too.
            owned = wait_until("the survivors' journals owning all partitions", journaled, 30)
            assert not owned[0] & owned[1], owned
            for name in survivors:
                (workdir / f"{name}.stop").touch()
            for name in survivors:
                assert members[name].wait(20) == 0, (workdir / f"{name}.log").read_text()
        finally:
            for process in members.values():
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
    journals = {name: read_journal(path) for name, path in journal_paths.items()}
    victim_journal = journals[victim]
    victim_owned = victim_journal.owned()
    assert victim_owned, "the victim owned partitions when it was killed"
    assert victim_journal.records and victim_journal.committed, "the victim was killed midway"
    check_redelivery(journals, victim, victim_owned)
    check_never_two_owners(ownership_intervals(journals, victim, kill_ns))
    for name in survivors:
        assert not journals[name].failures, journals[name].failures
        assert journals[name].owned() == set(), f"{name} gave everything back at close()"


# --- 2. kill -9 the coordinator owning the group --------------------------------------------------


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

    def run(self) -> None:
        try:
            self.consumer.subscribe([COORDINATOR_TOPIC])
            while not self.stop.is_set():
                records = self.consumer.poll(timeout=0.2)
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
                lambda: all(len(m.consumer.assignment()) == 2 for m in members),
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


# --- 3. static membership -------------------------------------------------------------------------


class RecordingListener(ConsumerRebalanceListener):
    """Remembers every listener call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assigned", list(partitions)))

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("revoked", list(partitions)))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("lost", list(partitions)))


def poll_until(
    consumers: list[Consumer], what: str, done, timeout_s: float = 30, reads: list | None = None
) -> None:
    """Poll every consumer in turn (running their listener calls) until `done()`; what each
    read is appended to its list in `reads`."""
    deadline = time.monotonic() + timeout_s
    reads = reads or [[] for _ in consumers]
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for consumer, read in zip(consumers, reads, strict=True):
            read.extend(consumer.poll(timeout=0.05))


def test_a_static_member_restarting_within_its_session_moves_no_partition(
    cluster: LocalCluster,
) -> None:
    topic, group_id = "static-orders", "static-group"
    create_topics(cluster, NewTopic(topic, 4, 1))
    config_a = consumer_config(cluster, group_id, **{"group.instance.id": "host-a"})
    config_b = consumer_config(cluster, group_id, **{"group.instance.id": "host-b"})
    listener_a, listener_b, listener_back = (
        RecordingListener(),
        RecordingListener(),
        RecordingListener(),
    )
    with Consumer(config_a) as a:
        b = Consumer(config_b)
        try:
            a.subscribe([topic], listener=listener_a)
            b.subscribe([topic], listener=listener_b)
            poll_until(
                [a, b],
                "two partitions each",
                lambda: len(a.assignment()) == len(b.assignment()) == 2,
            )
            for _ in range(10):  # settled: nothing more happens
                a.poll(timeout=0.05)
                b.poll(timeout=0.05)
            kept, a_owned = sorted(b.assignment()), sorted(a.assignment())
            a_calls, a_epoch = len(listener_a.calls), a.group_metadata().member_epoch
        finally:
            b.close()  # the static leave: its partitions wait for host-b
        with Consumer(config_b) as back:
            back.subscribe([topic], listener=listener_back)
            poll_until(
                [a, back], "host-b back with partitions", lambda: len(back.assignment()) == 2, 10
            )
            for _ in range(20):  # a late rebalance would show in a's listener
                a.poll(timeout=0.05)
                back.poll(timeout=0.05)
            assert sorted(back.assignment()) == kept
            assert listener_back.calls == [("assigned", kept)]
            assert listener_a.calls[a_calls:] == [], "the other member saw a rebalance"
            assert sorted(a.assignment()) == a_owned
            assert a.group_metadata().member_epoch == a_epoch
            with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
                group = admin.describe_consumer_groups([group_id])[group_id]
            assert sorted(m.group_instance_id for m in group.members) == ["host-a", "host-b"]


# --- 4. regex subscription ------------------------------------------------------------------------


def test_a_regex_subscription_picks_up_a_topic_created_after_joining(cluster: LocalCluster) -> None:
    create_topics(cluster, NewTopic("rx-first", 2, 1), NewTopic("rxnot", 1, 1))
    produce(cluster, "rxnot", {b"not-%d" % n: 0 for n in range(10)})
    listener = RecordingListener()
    seen: list[bytes] = []
    with Consumer(consumer_config(cluster, "regex-group")) as consumer:
        consumer.subscribe(pattern="^rx-.*", listener=listener)

        def owns(expected: set[TopicPartition]) -> bool:
            seen.extend(r.value for r in consumer.poll(timeout=0.1))
            return set(consumer.assignment()) == expected

        first = {("rx-first", 0), ("rx-first", 1)}
        wait_until("rx-first assigned", lambda: owns(first), timeout_s=30)
        create_topics(cluster, NewTopic("rx-new", 3, 1))
        new_values = {b"new-%d" % n: n % 3 for n in range(60)}
        produce(cluster, "rx-new", new_values)
        everything = first | {("rx-new", p) for p in range(3)}
        wait_until(
            "rx-new assigned and its records consumed",
            lambda: owns(everything) and set(new_values) <= set(seen),
            timeout_s=30,
        )
        assert consumer.subscription() == ["rx-first", "rx-new"], "the topics matched so far"
        consumer.unsubscribe()
        assert consumer.subscription() == []
    assert ("assigned", sorted(everything - first)) in listener.calls
    assert sorted(seen) == sorted(new_values), "each rx-new record once, nothing from rxnot"


# --- 5. committing in on_partitions_revoked -------------------------------------------------------


class CommittingListener(ConsumerRebalanceListener):
    """Commits in on_partitions_revoked, then reads back what was committed."""

    def __init__(self, seen: list) -> None:
        self.consumer: Consumer | None = None
        self.seen = seen  # every record the consumer's polls returned so far
        self.revoked: list[TopicPartition] = []
        self.consumed: dict[TopicPartition, int] = {}  # next offsets when revoked
        self.committed: dict[TopicPartition, OffsetAndMetadata | None] = {}

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        assert self.consumer is not None
        consumed = next_offsets(self.seen)
        self.consumed |= {tp: consumed.get(tp, 0) for tp in partitions}
        self.consumer.commit()
        self.revoked += partitions
        self.committed |= self.consumer.committed(partitions)


def next_offsets(records: list) -> dict[TopicPartition, int]:
    offsets: dict[TopicPartition, int] = {}
    for record in records:
        tp = (record.topic, record.partition)
        offsets[tp] = max(offsets.get(tp, 0), record.offset + 1)
    return offsets


def spans_of(records: list) -> dict[int, tuple[int, int, int]]:
    """partition -> (count, first offset, last offset) of what a member read, for messages."""
    offsets: dict[int, list[int]] = {}
    for record in records:
        offsets.setdefault(record.partition, []).append(record.offset)
    return {p: (len(o), min(o), max(o)) for p, o in sorted(offsets.items())}


def test_a_member_committing_on_revocation_hands_over_exactly_where_it_stopped(
    cluster: LocalCluster,
) -> None:
    topic, partitions, each = "handover", 4, 100
    create_topics(cluster, NewTopic(topic, partitions, 1))
    produce(cluster, topic, {b"old-%d" % n: n % partitions for n in range(partitions * each)})
    config = consumer_config(cluster, "handover-group", **{"enable.auto.commit": False})
    config["max.poll.records"] = 10
    seen_first: list = []
    seen_second: list = []
    listener = CommittingListener(seen_first)
    with Consumer(config) as first, Consumer(config) as second:
        listener.consumer = first
        first.subscribe([topic], listener=listener)
        wait_until(
            "the first member reading every partition",
            lambda: (
                seen_first.extend(first.poll(timeout=0.1))
                or len(next_offsets(seen_first)) == partitions
            ),
            timeout_s=30,
        )
        # Paused, it reads nothing more: what it consumed stays put while the group rebalances.
        first.pause(first.assignment())
        read_while_paused: list = []
        second.subscribe([topic])
        poll_until(
            [first, second],
            "two partitions each",
            lambda: len(second.assignment()) == 2,
            reads=[read_while_paused, seen_second],
        )
        seen_first.extend(read_while_paused)
        first.resume(first.assignment())
        produce(cluster, topic, {b"new-%d" % n: n % partitions for n in range(partitions * 25)})

        def everything_read() -> bool:
            seen_first.extend(first.poll(timeout=0.05))
            seen_second.extend(second.poll(timeout=0.05))
            return len(seen_first) + len(seen_second) >= partitions * (each + 25)

        try:
            wait_until("every record read", everything_read, timeout_s=30)
        except AssertionError as timeout:
            read = (first.assignment(), spans_of(seen_first), second.assignment())
            details = f"first, second: {read}, {spans_of(seen_second)}"
            raise AssertionError(f"{timeout}; {details}") from None
        second_owned = sorted(second.assignment())
        handed_over = list(listener.revoked)  # close() revokes the rest: not part of the check
        consumed, committed = dict(listener.consumed), dict(listener.committed)
    assert sorted(handed_over) == second_owned, (handed_over, second_owned)
    for tp in handed_over:
        at = committed[tp]
        assert at is not None and at.offset == consumed[tp], (tp, at, consumed)
    first_keys = {(r.partition, r.offset) for r in seen_first}
    second_keys = {(r.partition, r.offset) for r in seen_second}
    assert not first_keys & second_keys, "records read by both members"
    assert len(first_keys) + len(second_keys) == len(seen_first) + len(seen_second)
    assert {(p, o) for p in range(partitions) for o in range(each + 25)} == first_keys | second_keys
    for _, partition in handed_over:
        starts = min(o for p, o in second_keys if p == partition)
        assert starts == consumed[(topic, partition)], "the second starts at the commit"
    assert {r.partition for r in seen_second} == {p for _, p in handed_over}
    # Kafka's pause(): the paused member hands out nothing while the group rebalances.
    assert spans_of(read_while_paused) == {}, "records of paused partitions were returned"


# --- 6. refusals ----------------------------------------------------------------------------------


def test_a_subscription_without_group_id_is_refused(cluster: LocalCluster) -> None:
    with Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers}) as consumer:
        with pytest.raises(KafkaError, match=r"group\.id"):
            consumer.subscribe(["static-orders"])
        with pytest.raises(KafkaError, match=r"group\.id"):
            consumer.subscribe(pattern="^rx-.*")
        assert consumer.assignment() == []
        assert consumer.poll(timeout=0.2) == []
