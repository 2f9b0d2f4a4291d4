"""Goal: unsubscribe() (and close(), which leaves through it) does not first take an assignment
whose on_partitions_assigned has not begun: it gives back only what the member owns, in one
on_partitions_revoked call, then leaves. Kafka's leaveGroup clears the pending assignment and
releases what is owned. (Before the fix the member ran on_partitions_assigned for the new
partitions, added them to the fetch state, then revoked them.)

Method: a pure GroupMember and FetchState; listener calls run as the facades' poll and close do
(rebalance.begin_step / end_step), with the heartbeats built and answered by hand.
"""

from __future__ import annotations

from rebalance_helpers import LostRecorder, T, answer, member

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_member import GroupMember, MemberState, Subscription
from samsa.client.rebalance import begin_step, end_step

CONFIG = {"bootstrap.servers": "x:1", "group.id": "g", "enable.auto.commit": False}


def run(m: GroupMember, state: FetchState, listener: LostRecorder, now: int) -> None:
    while (step := begin_step(m, state, False)) is not None:
        step.listener_method(listener)(step.partitions)
        end_step(m, state, step, now)


def test_leaving_does_not_first_take_a_pending_assignment() -> None:
    state, m, listener = FetchState(ConsumerConfig.from_dict(CONFIG)), member(), LostRecorder()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, 0), 0)
    run(m, state, listener, 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, 0), 0)
    assert m.state is MemberState.STABLE
    listener.calls.clear()

    assert m.heartbeat_request(2000) is not None
    m.on_heartbeat_answer(answer(2, 0, 1), 2000)  # partition 1 added; the app has not polled
    m.unsubscribe(2001)
    run(m, state, listener, 2001)
    assert listener.calls == [("revoked", [(T, 0)])], listener.calls
    assert state.assignment() == []
    leave = m.heartbeat_request(2001)
    assert leave is not None and leave.member_epoch == -1
    m.on_heartbeat_answer(answer(-1), 2002)
    assert m.state is MemberState.UNSUBSCRIBED and m.owned == frozenset()


def test_leaving_gives_back_owned_and_pending_revoked_partitions_in_one_call() -> None:
    state, m, listener = FetchState(ConsumerConfig.from_dict(CONFIG)), member(), LostRecorder()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, 0, 1), 0)
    run(m, state, listener, 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, 0, 1), 0)
    listener.calls.clear()

    assert m.heartbeat_request(2000) is not None
    m.on_heartbeat_answer(answer(2, 0), 2000)  # partition 1 to be revoked; not begun
    m.unsubscribe(2001)
    run(m, state, listener, 2001)
    assert listener.calls == [("revoked", [(T, 0), (T, 1)])], listener.calls
