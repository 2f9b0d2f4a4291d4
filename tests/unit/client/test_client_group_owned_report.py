"""Goal: a partition is never taken by a member after the coordinator gave it to another. A member
whose on_partitions_assigned is still to run must not report, in a heartbeat, an owned set
without the partitions it is about to take: the coordinator (Kafka's ownsRevokedPartitions rule)
takes such a report as "already given up" and hands them on at once. As Kafka's consumer, the
member reports its owned partitions only when they changed since it last said ("unset means
unchanged", coordinator.proto): on join, after a failed heartbeat, and when a reconciliation ends
(the acknowledging heartbeat) — so the coordinator keeps a partition it moves away pending
revocation until the member really gave it up. And a listener call not yet begun is recomputed
from the latest assignment: partitions moved away meanwhile are not taken first. (Before the fix
every heartbeat reported the owned set: m-1 ran on_partitions_assigned([1]) and auto-committed
partition 1 while n-1 owned it.)

Method: a pure GroupMember and FetchState against the real coordinator core (group_harness.py,
beside the coordinator tests) on a manual clock, listener calls run as the facades' poll does
(rebalance.begin_step / end_step); a listener that records, at each call, who the coordinator
says owns each partition.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "coordinator"))

from group_harness import GroupHarness, assignment_of

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_commit import CommitStart, commit_request
from samsa.client.group_member import GroupMember, MemberSettings, MemberState, Subscription
from samsa.client.rebalance import ConsumerRebalanceListener, begin_step, end_step
from samsa.common.errors import ErrorCode

T = "t"
TopicPartition = tuple[str, int]


class OwnersListener(ConsumerRebalanceListener):
    def __init__(self, harness: GroupHarness) -> None:
        self.harness = harness
        self.calls: list[tuple[str, list[TopicPartition], dict[TopicPartition, str | None]]] = []

    def owners(self, partitions: list[TopicPartition]) -> dict[TopicPartition, str | None]:
        owners = {}
        for member_id, member in self.harness.group().members.items():
            for topic, numbers in member.assigned.items():
                owners.update({(topic, n): member_id for n in numbers})
        return {tp: owners.get(tp) for tp in partitions}

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions, self.owners(partitions)))

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions, self.owners(partitions)))


class Setup:
    def __init__(self) -> None:
        self.harness = GroupHarness(topics={T: 1})
        self.member = GroupMember(MemberSettings("g", "m-1", "", "c", 10_000, 300_000, "", 100))
        config = {"bootstrap.servers": "x:1", "group.id": "g", "enable.auto.commit": True}
        self.state = FetchState(ConsumerConfig.from_dict(config))
        self.listener = OwnersListener(self.harness)
        self.commits: list[tuple[dict, int]] = []
        self.sent = []

    def beat(self) -> None:
        h, m = self.harness, self.member
        h.now_ms = max(h.now_ms, m.heartbeat_due_ms() or h.now_ms)
        request = m.heartbeat_request(h.now_ms)
        assert request is not None
        self.sent.append(request)
        result = h.keep(h.coordinator.heartbeat(request, h.now_ms, h.topics))
        m.on_heartbeat_answer(result.response, h.now_ms)

    def poll(self) -> None:
        m, state = self.member, self.state
        while (step := begin_step(m, state, True)) is not None:
            if step.commit_first:  # what the facade commits before on_partitions_revoked
                request = commit_request(m, "g", step.commit_first, CommitStart.of(m))
                self.commits.append((dict(step.commit_first), request.member_epoch))
            step.listener_method(self.listener)(step.partitions)
            end_step(m, state, step, self.harness.now_ms)

    def joined_with_a_second_partition_due(self) -> None:
        h, m = self.harness, self.member
        m.subscribe(Subscription(topics=frozenset({T})), h.now_ms)
        self.beat()
        self.poll()
        self.beat()  # acknowledge
        assert m.state is MemberState.STABLE and m.owned == {(T, 0)}
        h.topics[T] = 2  # the topic grows: m-1 is given partition 1 too
        h.now_ms += 1000
        self.beat()
        assert m.target == {(T, 0), (T, 1)} and m.pending_callback() is not None


def test_a_member_never_takes_a_partition_the_coordinator_gave_to_another() -> None:
    s = Setup()
    h, m = s.harness, s.member
    s.joined_with_a_second_partition_due()
    h.join("n-1")  # another member joins before m-1's application polls
    h.now_ms += 1000
    s.beat()  # m-1's regular heartbeat, on_partitions_assigned([1]) not run yet
    h.heartbeat("n-1", h.member("n-1").member_epoch, owned={})
    s.poll()  # m-1's application polls now
    s.beat()  # m-1 acknowledges what it owns
    wrongly = [c for c in s.listener.calls if any(o not in (None, "m-1") for o in c[2].values())]
    taken = [c for c in s.listener.calls if c[0] == "assigned" and (T, 1) in c[1]]
    assert not wrongly and not taken and not s.commits, (s.listener.calls, s.commits)
    answer_n = h.heartbeat("n-1", h.member("n-1").member_epoch, owned={})
    assert assignment_of(answer_n) == {T: {1}}, "once m-1 acknowledged, n-1 takes partition 1"
    assert m.state is MemberState.STABLE and m.owned == {(T, 0)}
    assert s.state.assignment() == [(T, 0)]


def test_owned_partitions_are_reported_on_join_on_acknowledging_and_after_a_failure() -> None:
    s = Setup()
    m = s.member
    s.joined_with_a_second_partition_due()
    join, ack, given = s.sent
    assert join.HasField("owned_partitions") and ack.HasField("owned_partitions")
    assert not given.HasField("owned_partitions"), "a stable member's owned set is unchanged"
    s.beat()  # on_partitions_assigned([1]) still due: not reported
    assert not s.sent[-1].HasField("owned_partitions")
    due = m.heartbeat_due_ms()
    assert due is not None and m.heartbeat_request(due) is not None
    m.on_heartbeat_failed(ErrorCode.REQUEST_TIMED_OUT, "lost", due)
    s.beat()  # after a failure everything is said again, the partition about to be taken too
    reported = s.sent[-1].owned_partitions
    assert s.sent[-1].HasField("owned_partitions")
    assert {(t.topic, p) for t in reported.topics for p in t.partitions} == {(T, 0), (T, 1)}
    s.poll()
    s.beat()
    assert s.sent[-1].HasField("owned_partitions") and m.owned == {(T, 0), (T, 1)}
    assert m.state is MemberState.STABLE


def test_the_end_of_a_reconciliation_is_reported_when_a_heartbeat_was_in_flight() -> None:
    """The reconciliation ends while a regular heartbeat is in flight; its answer (same target)
    makes the member STABLE before the acknowledging heartbeat goes out: that one still says
    what the member owns, or the coordinator would wait for it until the rebalance timeout."""
    s = Setup()
    h, m = s.harness, s.member
    s.joined_with_a_second_partition_due()
    h.join("n-1")
    h.now_ms += 1000
    s.beat()  # partition 1 now pending revocation at the coordinator; on_assigned([]) due
    due = m.heartbeat_due_ms()
    assert due is not None
    h.now_ms = due
    in_flight = m.heartbeat_request(h.now_ms)
    assert in_flight is not None and not in_flight.HasField("owned_partitions")
    s.poll()  # on_partitions_assigned([]): the reconciliation ends, the heartbeat is in flight
    result = h.keep(h.coordinator.heartbeat(in_flight, h.now_ms, h.topics))
    m.on_heartbeat_answer(result.response, h.now_ms)
    assert m.state is MemberState.STABLE
    s.beat()
    assert s.sent[-1].HasField("owned_partitions"), "the end of the reconciliation is said"
    answer_n = h.heartbeat("n-1", h.member("n-1").member_epoch, owned={})
    assert assignment_of(answer_n) == {T: {1}}
