"""Goal: a listener call that is still running when the member is fenced, goes stale (its
listener outlived max.poll.interval.ms) or fails for good ends without corrupting the member: the
partitions it handled are accounted for, every partition still in the fetch state after fencing
leaves it through on_partitions_lost before the member rejoins with epoch 0, and nothing raises an
internal assertion. (The listener runs outside the consumer's lock, on the application's thread,
while heartbeats go on on the loop, so these answers can arrive at any point of it.)

Method: a pure GroupMember and FetchState; each step is begun, interrupted by a heartbeat answer
or a poll-timer check as the group driver would deliver it, then ended the way the facades' poll
does (rebalance.begin_step / end_step), and the remaining steps are run to the end.
"""

from __future__ import annotations

from rebalance_helpers import LostRecorder, T, answer, member

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_member import (
    CallbackKind,
    GroupMember,
    MemberState,
    Subscription,
)
from samsa.client.rebalance import begin_step, end_step, member_error
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as cp

MAX_POLL_MS = 300_000


def fenced() -> cp.ConsumerGroupHeartbeatResponse:
    return cp.ConsumerGroupHeartbeatResponse(
        error_code=ErrorCode.UNKNOWN_MEMBER_ID, error_message="expired"
    )


def run_steps(m: GroupMember, state: FetchState, listener: LostRecorder, now: int) -> None:
    while (step := begin_step(m, state, auto_commit=False)) is not None:
        step.listener_method(listener)(step.partitions)
        end_step(m, state, step, now)


def joined(state: FetchState, *partitions: int) -> tuple[GroupMember, LostRecorder]:
    m, listener = member(MAX_POLL_MS, MAX_POLL_MS), LostRecorder()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, *partitions), 0)
    run_steps(m, state, listener, 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, *partitions), 0)
    assert m.state is MemberState.STABLE and state.assignment() == [(T, p) for p in partitions]
    return m, listener


def test_fenced_during_on_revoked_loses_what_is_left_before_rejoining() -> None:
    state = FetchState(ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "group.id": "g"}))
    m, listener = joined(state, 0, 1)
    m.heartbeat_request(1000)
    m.on_heartbeat_answer(answer(1, 1), 1000)  # give up partition 0
    step = begin_step(m, state, auto_commit=False)
    assert step is not None and step.callback.kind is CallbackKind.REVOKED
    m.heartbeat_request(2000)  # the listener is slow: the member is expired meanwhile
    m.on_heartbeat_answer(fenced(), 2000)
    step.listener_method(listener)(step.partitions)
    end_step(m, state, step, 3000)

    run_steps(m, state, listener, 3000)
    assert listener.calls[-2:] == [("revoked", [(T, 0)]), ("lost", [(T, 1)])]
    assert state.assignment() == [], "partition 1 may be another member's now"
    assert m.state is MemberState.JOINING and m.owned == frozenset()
    request = m.heartbeat_request(3000)
    assert request is not None and request.member_epoch == 0


def test_fenced_during_on_assigned_loses_the_new_partitions_too() -> None:
    state = FetchState(ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "group.id": "g"}))
    m, listener = joined(state)  # owns nothing yet
    m.heartbeat_request(1000)
    m.on_heartbeat_answer(answer(2, 0), 1000)
    step = begin_step(m, state, auto_commit=False)
    assert step is not None and step.callback.kind is CallbackKind.ASSIGNED
    assert state.assignment() == [(T, 0)]
    m.heartbeat_request(2000)
    m.on_heartbeat_answer(fenced(), 2000)
    assert m.heartbeat_request(2000) is None, "no rejoin while the listener still runs"
    step.listener_method(listener)(step.partitions)
    end_step(m, state, step, 3000)

    run_steps(m, state, listener, 3000)
    assert listener.calls[-2:] == [("assigned", [(T, 0)]), ("lost", [(T, 0)])]
    assert state.assignment() == [] and m.owned == frozenset()
    request = m.heartbeat_request(3000)
    assert request is not None and request.member_epoch == 0
    assert not request.owned_partitions.topics


def test_a_listener_outliving_max_poll_interval_ends_cleanly_and_the_rest_is_lost() -> None:
    state = FetchState(ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "group.id": "g"}))
    m, listener = joined(state, 0, 1)
    m.on_poll(1000)
    m.heartbeat_request(1000)
    m.on_heartbeat_answer(answer(1, 1), 1000)
    step = begin_step(m, state, auto_commit=False)
    assert step is not None
    m.check_poll_interval(1000 + MAX_POLL_MS + 1)  # the group driver's check, on the loop
    assert m.state is MemberState.STALE
    step.listener_method(listener)(step.partitions)
    end_step(m, state, step, 2000 + MAX_POLL_MS)  # no AssertionError out of poll()

    run_steps(m, state, listener, 2000 + MAX_POLL_MS)
    assert listener.calls[-2:] == [("revoked", [(T, 0)]), ("lost", [(T, 1)])]
    assert state.assignment() == [] and m.owned == frozenset()


def test_a_fatal_error_during_a_listener_is_what_poll_raises_next() -> None:
    state = FetchState(ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "group.id": "g"}))
    m, listener = joined(state, 0, 1)
    m.heartbeat_request(1000)
    m.on_heartbeat_answer(answer(1, 1), 1000)
    step = begin_step(m, state, auto_commit=False)
    assert step is not None
    m.heartbeat_request(2000)
    m.on_heartbeat_failed(ErrorCode.GROUP_MAX_SIZE_REACHED, "the group is full", 2000)
    step.listener_method(listener)(step.partitions)
    end_step(m, state, step, 3000)  # no AssertionError
    assert member_error(m) is None  # what it still owns is lost first (Kafka's transitionToFatal)
    listener.calls.clear()
    run_steps(m, state, listener, 3000)
    assert listener.calls == [("lost", [(T, 1)])] and state.assignment() == []
    error = member_error(m)
    assert error is not None and error.code == ErrorCode.GROUP_MAX_SIZE_REACHED
