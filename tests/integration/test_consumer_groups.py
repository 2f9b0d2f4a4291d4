"""Goal: consumer groups through the SDK (`Consumer.subscribe`) do what a Kafka user expects: a
static member that restarts within its session gets exactly its partitions back without
disturbing the other member; a regex subscription picks up a topic created after joining; a
member that commits in on_partitions_revoked hands over exactly where it stopped; a subscription
without group.id is refused. (The SIGKILL tests are test_consumer_group_member_kill.py and
test_consumer_group_coordinator_kill.py.)

Method: one cluster for the module (1 controller, 2 brokers, 2 coordinators; real processes from
the launcher, stopped by PID also on failure) with short sessions (group_test_helpers.SETTINGS),
a topic and a group per test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cluster_helpers import local_cluster, wait_until
from group_test_helpers import SETTINGS, TopicPartition, consumer_config, create_topics, produce

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    Consumer,
    ConsumerRebalanceListener,
    KafkaError,
    NewTopic,
    OffsetAndMetadata,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("sdk-groups"), 1, 2, SETTINGS, 2) as running:
        yield running


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


def test_a_subscription_without_group_id_is_refused(cluster: LocalCluster) -> None:
    with Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers}) as consumer:
        with pytest.raises(KafkaError, match=r"group\.id"):
            consumer.subscribe(["static-orders"])
        with pytest.raises(KafkaError, match=r"group\.id"):
            consumer.subscribe(pattern="^rx-.*")
        assert consumer.assignment() == []
        assert consumer.poll(timeout=0.2) == []
