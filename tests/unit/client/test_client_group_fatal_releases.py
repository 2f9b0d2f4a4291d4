"""Goal: a member that hits a non-retriable heartbeat error (say FENCED_INSTANCE_ID: another
consumer took its group.instance.id over) releases what it owns as lost before poll() raises the
error: on_partitions_lost runs and the partitions leave the fetch state, so they are no longer
fetched nor returned. Kafka's transitionToFatal signals the partitions lost, then clears the
assignment. (Before the fix the member kept them, no listener ran, and the driver went on
fetching them.) A listener call running when the error comes ends first; what is left is lost.

Method: a pure GroupMember and FetchState; listener calls run as the facades' poll does
(rebalance.begin_step / end_step), and rebalance.member_error is what poll() raises.
"""

from __future__ import annotations

from rebalance_helpers import LostRecorder, T, answer, member

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_member import GroupMember, MemberState, Subscription
from samsa.client.rebalance import begin_step, end_step, member_error
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as cp

CONFIG = {"bootstrap.servers": "x:1", "group.id": "g", "enable.auto.commit": False}
REPLACED = cp.ConsumerGroupHeartbeatResponse(
    error_code=ErrorCode.FENCED_INSTANCE_ID, error_message="replaced"
)


def run(m: GroupMember, state: FetchState, listener: LostRecorder, now: int) -> None:
    while (step := begin_step(m, state, False)) is not None:
        step.listener_method(listener)(step.partitions)
        end_step(m, state, step, now)


def joined(*partitions: int) -> tuple[FetchState, GroupMember, LostRecorder]:
    state, m, listener = FetchState(ConsumerConfig.from_dict(CONFIG)), member(), LostRecorder()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, *partitions), 0)
    run(m, state, listener, 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, *partitions), 0)
    assert m.state is MemberState.STABLE
    listener.calls.clear()
    return state, m, listener


def test_a_fatal_heartbeat_error_releases_the_partitions_as_lost_then_raises() -> None:
    state, m, listener = joined(0, 1)
    assert m.heartbeat_request(2000) is not None
    m.on_heartbeat_answer(REPLACED, 2000)
    assert m.state is MemberState.FATAL
    assert member_error(m) is None, "raised only once the partitions were released"
    run(m, state, listener, 2001)
    assert listener.calls == [("lost", [(T, 0), (T, 1)])], listener.calls
    assert state.assignment() == [] and m.owned == frozenset()
    error = member_error(m)
    assert error is not None and error.code is ErrorCode.FENCED_INSTANCE_ID
    assert m.heartbeat_request(10_000) is None


def test_a_fatal_error_while_a_listener_runs_loses_the_rest_after_it() -> None:
    state, m, listener = joined(0)
    assert m.heartbeat_request(2000) is not None
    m.on_heartbeat_answer(answer(2, 0, 1), 2000)  # partition 1 added
    step = begin_step(m, state, False)
    assert step is not None and step.partitions == [(T, 1)]
    assert m.heartbeat_request(3000) is not None
    m.on_heartbeat_answer(REPLACED, 3000)  # while on_partitions_assigned([1]) runs
    step.listener_method(listener)(step.partitions)
    end_step(m, state, step, 3001)
    assert member_error(m) is None
    run(m, state, listener, 3001)
    assert listener.calls == [("assigned", [(T, 1)]), ("lost", [(T, 0), (T, 1)])]
    assert state.assignment() == [] and m.owned == frozenset()
    assert member_error(m) is not None


def test_a_fatal_error_owning_nothing_raises_at_once() -> None:
    _, m, _ = joined()
    assert m.heartbeat_request(2000) is not None
    m.on_heartbeat_answer(REPLACED, 2000)
    assert m.pending_callback() is None and member_error(m) is not None
