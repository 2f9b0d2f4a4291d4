"""Goal: a member that missed max.poll.interval.ms rejoins the group at its next poll, even when
that poll comes before the coordinator answered its leave heartbeat. The late answer to the leave
(member epoch -1, no assignment) is not the answer to the join that follows: as in Kafka, the
answer to a leave heartbeat is ignored once the member is no longer leaving. (Before the fix the
member took it as the join's answer and settled STABLE at epoch -1, owning nothing and sending
leave heartbeats, for good, without an error.)

Method: a pure GroupMember against the real coordinator core (group_harness.py, beside the
coordinator tests), with a manual clock: the member joins and owns both partitions, misses the
poll interval, sends its leave, the application polls (on_partitions_lost, JOINING), then the
leave's answer arrives; the member heartbeats and polls until nothing is due.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "coordinator"))

from group_harness import GroupHarness

from samsa.client.group_member import (
    GroupMember,
    MemberSettings,
    MemberState,
    Subscription,
)
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as cp

MAX_POLL_MS = 60_000


class Driver:
    """The member and the coordinator, joined by hand: send, answer, poll."""

    def __init__(self) -> None:
        self.harness = GroupHarness(topics={"t": 2})
        self.member = GroupMember(MemberSettings("g", "m-1", "", "c", 10_000, MAX_POLL_MS, "", 100))

    def send(self) -> cp.ConsumerGroupHeartbeatRequest:
        h, m = self.harness, self.member
        h.now_ms = max(h.now_ms, m.heartbeat_due_ms() or h.now_ms)
        request = m.heartbeat_request(h.now_ms)
        assert request is not None
        return request

    def answer(self, request: cp.ConsumerGroupHeartbeatRequest) -> None:
        h = self.harness
        result = h.keep(h.coordinator.heartbeat(request, h.now_ms, h.topics))
        self.member.on_heartbeat_answer(result.response, h.now_ms)

    def poll(self) -> None:
        m = self.member
        m.on_poll(self.harness.now_ms)
        while m.begin_callback() is not None:
            m.on_callback_done(self.harness.now_ms)

    def join_and_go_stale(self) -> None:
        """Join and own both partitions, then miss max.poll.interval.ms (the member leaves)."""
        m, h = self.member, self.harness
        m.subscribe(Subscription(topics=frozenset({"t"})), h.now_ms)
        self.poll()
        self.answer(self.send())
        self.poll()
        self.answer(self.send())
        assert m.state is MemberState.STABLE and len(m.owned) == 2
        h.now_ms += MAX_POLL_MS + 1  # the application spent longer than max.poll.interval.ms
        m.check_poll_interval(h.now_ms)
        assert m.state is MemberState.STALE


def test_a_stale_member_rejoins_when_its_leave_is_answered_after_the_next_poll() -> None:
    d = Driver()
    m, h = d.member, d.harness
    d.join_and_go_stale()
    leave = d.send()
    assert leave.member_epoch == -1
    d.poll()  # the application polls again before the leave is answered
    assert m.state is MemberState.JOINING and not m.owned
    d.answer(leave)  # the leave's answer arrives late: ignored
    assert m.state is MemberState.JOINING
    for _ in range(20):
        d.poll()
        if m.heartbeat_due_ms() is None:
            break
        d.answer(d.send())
    assert m.state is MemberState.STABLE and m.member_epoch > 0 and len(m.owned) == 2, (
        f"state {m.state}, epoch {m.member_epoch}, owns {sorted(m.owned)}, group members "
        f"{list(h.group().members)}"
    )


def test_a_stale_member_rejoins_when_its_leave_fails_after_the_next_poll() -> None:
    """The same race with the leave's answer lost (a transport error): the join goes out."""
    d = Driver()
    m, h = d.member, d.harness
    d.join_and_go_stale()
    leave = d.send()
    d.answer(leave)  # the coordinator removes the member; its answer is lost:
    d.poll()
    m.on_heartbeat_failed(ErrorCode.NETWORK_EXCEPTION, "lost", h.now_ms)
    join = d.send()
    assert join.member_epoch == 0
    d.answer(join)
    d.poll()
    d.answer(d.send())
    assert m.state is MemberState.STABLE and m.member_epoch > 0 and len(m.owned) == 2
