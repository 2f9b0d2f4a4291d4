"""Goal: the consumer's half of the group protocol (KIP-848) gives up partitions before it reports
them gone, takes new ones only after, acknowledges at once, drops everything without committing
when fenced, leaves cleanly (static members with epoch -2), leaves when the application stops
polling, and stops for good on a non-retriable error.

Method: drive the pure GroupMember with hand-made heartbeat answers and numbers for time, running
its callbacks the way the driver's poll would (on_callback_done), and check states, requests and
owned partitions exactly.
"""

from __future__ import annotations

import pytest

from samsa.client.group_member import (
    CallbackKind,
    GroupMember,
    MemberSettings,
    MemberState,
    Subscription,
    partitions_from_proto,
)
from samsa.client.heartbeat_fields import partitions_to_proto
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as cp

T = "orders"


def member(instance_id: str = "") -> GroupMember:
    return GroupMember(
        MemberSettings(
            group_id="g",
            member_id="m-1",
            instance_id=instance_id,
            client_id="c",
            rebalance_timeout_ms=30_000,
            max_poll_interval_ms=300_000,
            server_assignor="",
            retry_backoff_ms=100,
        )
    )


def answer(epoch: int, *partitions: int, interval: int = 1000) -> cp.ConsumerGroupHeartbeatResponse:
    return cp.ConsumerGroupHeartbeatResponse(
        member_id="m-1",
        member_epoch=epoch,
        heartbeat_interval_ms=interval,
        assignment=partitions_to_proto(frozenset((T, p) for p in partitions)),
    )


def error(code: ErrorCode) -> cp.ConsumerGroupHeartbeatResponse:
    return cp.ConsumerGroupHeartbeatResponse(error_code=code, error_message="why")


def run_callbacks(m: GroupMember, now: int) -> list[tuple[CallbackKind, set[int]]]:
    ran = []
    while (callback := m.begin_callback()) is not None:
        ran.append((callback.kind, {p for _, p in callback.partitions}))
        m.on_callback_done(now)
    return ran


def joined(m: GroupMember, *partitions: int, now: int = 0) -> None:
    m.subscribe(Subscription(topics=frozenset({T})), now)
    assert m.heartbeat_request(now) is not None
    m.on_heartbeat_answer(answer(1, *partitions), now)
    run_callbacks(m, now)
    if m.state is MemberState.ACKNOWLEDGING:
        assert m.heartbeat_request(now) is not None
        m.on_heartbeat_answer(answer(1, *partitions), now)


def test_join_sends_everything_a_new_member_needs() -> None:
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    request = m.heartbeat_request(0)
    assert request is not None
    assert (request.group_id, request.member_id, request.member_epoch) == ("g", "m-1", 0)
    assert request.rebalance_timeout_ms == 30_000
    assert list(request.subscription.topic_names) == [T]
    assert request.HasField("owned_partitions") and not request.owned_partitions.topics
    assert m.heartbeat_request(0) is None, "one heartbeat in flight at a time"


def test_an_assignment_is_taken_then_acknowledged_at_once_then_stable() -> None:
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, 0, 1), 5)
    assert m.state is MemberState.RECONCILING and m.owned == frozenset()
    assert run_callbacks(m, 5) == [(CallbackKind.ASSIGNED, {0, 1})]
    assert m.state is MemberState.ACKNOWLEDGING
    ack = m.heartbeat_request(5)
    assert ack is not None, "the acknowledgement goes at once, not after the interval"
    assert partitions_from_proto(ack.owned_partitions) == {(T, 0), (T, 1)}
    assert not ack.HasField("subscription"), "the subscription was already sent"
    m.on_heartbeat_answer(answer(1, 0, 1), 6)
    assert m.state is MemberState.STABLE
    assert m.heartbeat_request(6) is None and m.heartbeat_request(1006) is not None


def test_revocation_runs_before_anything_new_and_is_reported_before_more_arrives() -> None:
    m = member()
    joined(m, 0, 1, 2)
    m.heartbeat_request(2000)
    m.on_heartbeat_answer(answer(1, 0), 2000)  # told to give up 1 and 2, epoch unchanged
    assert m.pending_callback() is not None
    assert m.pending_callback().kind is CallbackKind.REVOKED  # type: ignore[union-attr]
    assert m.owned == {(T, 0), (T, 1), (T, 2)}, "still owned until on_revoked returned"
    assert run_callbacks(m, 2001) == [
        (CallbackKind.REVOKED, {1, 2}),
        (CallbackKind.ASSIGNED, set()),  # as Kafka's: told after every new assignment
    ]
    ack = m.heartbeat_request(2001)
    assert ack is not None and partitions_from_proto(ack.owned_partitions) == {(T, 0)}
    m.on_heartbeat_answer(answer(2, 0, 3), 2002)
    assert run_callbacks(m, 2002) == [(CallbackKind.ASSIGNED, {3})]
    assert m.member_epoch == 2 and m.owned == {(T, 0), (T, 3)}


def test_an_answer_during_a_callback_is_reconciled_after_it() -> None:
    m = member()
    joined(m, 0, 1)
    m.heartbeat_request(2000)
    m.on_heartbeat_answer(answer(1, 0), 2000)
    running = m.begin_callback()  # on_revoked([1]) runs
    assert running is not None and running.partitions == {(T, 1)}
    m.heartbeat_request(3000)
    m.on_heartbeat_answer(answer(1), 3000)  # a newer target arrives meanwhile
    m.on_callback_done(3001)
    assert run_callbacks(m, 3001) == [(CallbackKind.REVOKED, {0}), (CallbackKind.ASSIGNED, set())]
    assert m.owned == frozenset() and m.state is MemberState.ACKNOWLEDGING


def test_a_listener_call_not_begun_is_recomputed_from_a_newer_answer() -> None:
    """As Kafka's consumer, which reconciles the latest target: on_revoked once, with both."""
    m = member()
    joined(m, 0, 1)
    m.heartbeat_request(2000)
    m.on_heartbeat_answer(answer(1, 0), 2000)
    m.heartbeat_request(3000)
    m.on_heartbeat_answer(answer(1), 3000)  # newer target arrives before on_revoked ran
    assert run_callbacks(m, 3001) == [
        (CallbackKind.REVOKED, {0, 1}),
        (CallbackKind.ASSIGNED, set()),
    ]
    assert m.owned == frozenset() and m.state is MemberState.ACKNOWLEDGING


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_a_fenced_member_loses_everything_without_revoking_and_rejoins(code: ErrorCode) -> None:
    m = member()
    joined(m, 0, 1)
    m.heartbeat_request(2000)
    m.on_heartbeat_answer(error(code), 2000)
    assert m.state is MemberState.FENCED
    assert run_callbacks(m, 2001) == [(CallbackKind.LOST, {0, 1})]
    assert m.state is MemberState.JOINING and m.owned == frozenset()
    rejoin = m.heartbeat_request(2001)
    assert rejoin is not None and rejoin.member_epoch == 0 and rejoin.HasField("subscription")
    assert rejoin.member_id == "m-1", "the member keeps its id"


@pytest.mark.parametrize(
    ("code", "find_again"),
    [
        (ErrorCode.NOT_COORDINATOR, True),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, True),
        (ErrorCode.NETWORK_EXCEPTION, True),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, False),
    ],
)
def test_retriable_answers_back_off_and_keep_the_partitions(
    code: ErrorCode, find_again: bool
) -> None:
    m = member()
    joined(m, 0)
    m.heartbeat_request(2000)
    m.on_heartbeat_failed(code, "moved", 2000)
    assert m.state is MemberState.STABLE and m.owned == {(T, 0)}
    assert m.coordinator_needed is find_again
    assert m.heartbeat_request(2099) is None and m.heartbeat_request(2100) is not None


def test_a_non_retriable_answer_is_fatal_and_kept_for_poll_to_raise() -> None:
    m = member()
    m.subscribe(Subscription(pattern="orders.*"), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(error(ErrorCode.UNSUPPORTED_ASSIGNOR), 0)
    assert m.state is MemberState.FATAL
    assert m.error == (ErrorCode.UNSUPPORTED_ASSIGNOR, "why")
    assert m.heartbeat_request(10_000) is None


def test_an_error_code_this_client_does_not_know_is_fatal_not_a_crash() -> None:
    """A newer coordinator's code: UNKNOWN_SERVER_ERROR with its number kept, as Kafka's
    clients read one (ErrorCode(999) raised ValueError in the driver, every heartbeat)."""
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    unknown = cp.ConsumerGroupHeartbeatResponse(error_message="why")
    unknown.error_code = 999  # type: ignore[assignment]
    m.on_heartbeat_answer(unknown, 0)
    assert m.state is MemberState.FATAL
    assert m.error == (ErrorCode.UNKNOWN_SERVER_ERROR, "error code 999: why")


@pytest.mark.parametrize(("instance_id", "leave_epoch"), [("", -1), ("static-1", -2)])
def test_leaving_revokes_everything_first_then_sends_the_leave_epoch(
    instance_id: str, leave_epoch: int
) -> None:
    m = member(instance_id)
    joined(m, 0, 1)
    m.unsubscribe(2000)
    assert m.heartbeat_request(2000) is None, "on_revoked runs before the leave heartbeat"
    assert run_callbacks(m, 2000) == [(CallbackKind.REVOKED, {0, 1})]
    leave = m.heartbeat_request(2000)
    assert leave is not None and leave.member_epoch == leave_epoch
    m.on_heartbeat_answer(answer(leave_epoch), 2001)
    assert m.state is MemberState.UNSUBSCRIBED and m.owned == frozenset()


def test_an_application_that_stops_polling_leaves_and_rejoins_at_its_next_poll() -> None:
    m = member()
    m.on_poll(0)
    joined(m, 0)
    m.check_poll_interval(300_000)
    assert m.state is MemberState.STABLE, "exactly max.poll.interval.ms is still in time"
    m.check_poll_interval(300_001)
    assert m.state is MemberState.STALE
    leave = m.heartbeat_request(300_001)
    assert leave is not None and leave.member_epoch == -1
    m.on_heartbeat_answer(answer(-1), 300_002)
    m.on_poll(400_000)
    assert run_callbacks(m, 400_000) == [(CallbackKind.LOST, {0})]
    rejoin = m.heartbeat_request(400_000)
    assert rejoin is not None and rejoin.member_epoch == 0


def test_a_changed_subscription_is_sent_once() -> None:
    m = member()
    joined(m, 0)
    m.subscribe(Subscription(topics=frozenset({T, "refunds"})), 5000)
    request = m.heartbeat_request(5000)
    assert request is not None and sorted(request.subscription.topic_names) == ["orders", "refunds"]
    m.on_heartbeat_answer(answer(1, 0), 5001)
    later = m.heartbeat_request(6001)
    assert later is not None and not later.HasField("subscription")


def test_an_answer_to_a_heartbeat_sent_before_leaving_does_not_end_the_leave() -> None:
    m = member()
    joined(m, 0)
    assert m.heartbeat_request(1000) is not None  # a routine heartbeat is in flight
    m.unsubscribe(1000)
    assert run_callbacks(m, 1000) == [(CallbackKind.REVOKED, {0})]
    assert m.heartbeat_request(1000) is None, "the routine heartbeat is still in flight"
    m.on_heartbeat_answer(answer(1, 0, 1), 1001)
    assert m.state is MemberState.LEAVING and m.owned == frozenset()
    leave = m.heartbeat_request(1001)
    assert leave is not None and leave.member_epoch == -1
    m.on_heartbeat_answer(answer(-1), 1002)
    assert m.state is MemberState.UNSUBSCRIBED


@pytest.mark.parametrize("leave_answered", [True, False])
def test_subscribing_again_while_the_leave_is_under_way_joins_once_it_ended(
    leave_answered: bool,
) -> None:
    """unsubscribe() waits LEAVE_TIMEOUT_S for the leave's answer, then goes on: a subscribe()
    that follows while the member still leaves must join once the leave ends (answered, or
    failed: best effort), not leave the member unsubscribed with a subscription it never sends
    (the consumer then read nothing, for ever)."""
    m = member()
    joined(m, 0)
    m.unsubscribe(1000)
    assert run_callbacks(m, 1000) == [(CallbackKind.REVOKED, {0})]
    leave = m.heartbeat_request(1000)
    assert leave is not None and leave.member_epoch == -1
    m.subscribe(Subscription(topics=frozenset({"refunds"})), 6000)  # the leave is unanswered
    if leave_answered:
        m.on_heartbeat_answer(answer(-1), 6001)
    else:
        m.on_heartbeat_failed(ErrorCode.NETWORK_EXCEPTION, "unreachable", 6001)
    assert m.state is MemberState.JOINING
    join = m.heartbeat_request(6001)
    assert join is not None and join.member_epoch == 0
    assert list(join.subscription.topic_names) == ["refunds"]


def test_unsubscribing_again_while_leaving_takes_back_a_subscribe_made_meanwhile() -> None:
    m = member()
    joined(m, 0)
    m.unsubscribe(1000)
    run_callbacks(m, 1000)
    assert m.heartbeat_request(1000) is not None
    m.subscribe(Subscription(topics=frozenset({"refunds"})), 2000)
    m.unsubscribe(3000)  # close(): the member must not join again once the leave ends
    m.on_heartbeat_answer(answer(-1), 3001)
    assert m.state is MemberState.UNSUBSCRIBED and m.heartbeat_request(3001) is None


@pytest.mark.parametrize("how", ["fenced", "stale"])
def test_leaving_after_being_fenced_tells_the_listener_what_was_lost(how: str) -> None:
    """As Kafka's close() does (onPartitionsLost when the member was fenced or went stale): the
    partitions are neither kept silently nor revoked in order, they are reported lost."""
    m = member()
    m.on_poll(0)
    joined(m, 0, 1)
    if how == "fenced":
        m.heartbeat_request(1000)
        m.on_heartbeat_failed(ErrorCode.FENCED_MEMBER_EPOCH, "fenced", 1000)
    else:
        m.check_poll_interval(400_000)
    m.unsubscribe(500_000)
    assert run_callbacks(m, 500_000) == [(CallbackKind.LOST, {0, 1})]
    leave = m.heartbeat_request(500_000)
    assert leave is not None and leave.member_epoch == -1
    m.on_heartbeat_failed(ErrorCode.UNKNOWN_MEMBER_ID, "gone", 500_001)
    assert m.state is MemberState.UNSUBSCRIBED and m.owned == frozenset()


def test_on_assigned_is_told_of_every_new_assignment_even_an_empty_one() -> None:
    """Kafka's consumer calls onPartitionsAssigned after every new assignment, the first after
    joining included, even with nothing new (applications take it as "the group answered"); a
    repeated answer with the same assignment calls nothing."""
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1), 0)  # more members than partitions: nothing for this one
    assert run_callbacks(m, 0) == [(CallbackKind.ASSIGNED, set())]
    assert m.state is MemberState.ACKNOWLEDGING
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1), 1)
    assert m.state is MemberState.STABLE and run_callbacks(m, 1) == []
    m.heartbeat_request(1001)
    m.on_heartbeat_answer(answer(1), 1001)
    assert run_callbacks(m, 1001) == [], "the same assignment again is no news"


@pytest.mark.parametrize("meanwhile", ["nothing", "a new assignment", "fenced"])
def test_a_callback_is_not_begun_while_one_runs(meanwhile: str) -> None:
    """One listener call at a time: a second begin_callback() while one runs (close()'s leave
    on another thread runs steps too) is refused and changes nothing. It used to replace the
    running call with None, so the running call's on_callback_done failed ("no callback is
    running") and what it revoked or assigned was never recorded."""
    m = member()
    joined(m, 0, 1)
    m.heartbeat_request(2000)
    m.on_heartbeat_answer(answer(2, 0), 2000)
    running = m.begin_callback()
    assert running is not None and running.kind is CallbackKind.REVOKED
    if meanwhile == "a new assignment":
        m.heartbeat_request(3000)
        m.on_heartbeat_answer(answer(3, 0, 2), 3000)
    elif meanwhile == "fenced":
        m.heartbeat_request(3000)
        m.on_heartbeat_failed(ErrorCode.FENCED_MEMBER_EPOCH, "fenced", 3000)
    state, owned, pending = m.state, m.owned, m.pending_callback()
    assert pending is None, "nothing is pending while a call runs"
    with pytest.raises(AssertionError, match=r"begin_callback\(\) while .*revoked"):
        m.begin_callback()
    assert (m.state, m.owned, m.pending_callback()) == (state, owned, pending)
    m.on_callback_done(3001)  # the running call still ends, and what it did is recorded
    if meanwhile == "fenced":
        assert run_callbacks(m, 3002) == [(CallbackKind.LOST, {0})]
        assert m.state is MemberState.JOINING and m.owned == frozenset()
    elif meanwhile == "a new assignment":
        assert run_callbacks(m, 3002) == [(CallbackKind.ASSIGNED, {2})]
        assert m.owned == {(T, 0), (T, 2)}
    else:
        assert run_callbacks(m, 3002) == [(CallbackKind.ASSIGNED, set())]
        assert m.owned == {(T, 0)}
