"""Goal: listener steps move partitions between the group member and the fetch state in the order
that keeps one owner per partition and at-least-once delivery: newly assigned partitions join the
fetch state before on_partitions_assigned and start at the group's committed offsets (else per
auto.offset.reset); revoked partitions are still fetched and committable during
on_partitions_revoked, with their consumed positions auto-committed first, and leave only after
it; lost partitions leave without a commit; the member learns of each step only after the
listener returned (so its acknowledgement follows). Also: subscribe()'s arguments are checked,
subscription() names the subscribed topics, and a member's fatal error becomes the error poll()
raises.

Method: a pure GroupMember and FetchState driven with hand-made heartbeat answers, fetch answers
and numbers for time; the listener calls are made the way the facades make them.
"""

from __future__ import annotations

import pytest
from rebalance_helpers import Recorder, T, answer, member

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import COMMITTED, EARLIEST, FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_member import (
    CallbackKind,
    GroupMember,
    MemberState,
    Subscription,
)
from samsa.client.rebalance import (
    ConsumerRebalanceListener,
    begin_step,
    end_step,
    member_error,
    subscribed_topics,
    subscription_of,
)
from samsa.common.errors import ErrorCode, OffsetOutOfRangeError
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2


def config(**settings: object) -> ConsumerConfig:
    given = {"bootstrap.servers": "localhost:9092", "group.id": "g"}
    given.update({key.replace("_", "."): value for key, value in settings.items()})
    return ConsumerConfig.from_dict(given)


def run_steps(m: GroupMember, state: FetchState, listener: ConsumerRebalanceListener) -> list:
    """As the facades' poll does; returns the offsets each step asked to auto-commit first."""
    commits = []
    while (step := begin_step(m, state, state.config.enable_auto_commit)) is not None:
        commits.append(step.commit_first)
        step.listener_method(listener)(step.partitions)
        end_step(m, state, step, now_ms=0)
    return commits


def joined(state: FetchState, *partitions: int) -> tuple[GroupMember, Recorder]:
    m, listener = member(), Recorder()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, *partitions), 0)
    run_steps(m, state, listener)
    return m, listener


def consumed_to(state: FetchState, tp: tuple[str, int], start: int, count: int) -> None:
    """Position `tp` at `start`, fetch `count` records and take them all."""
    state.seek(tp, start)
    plan = state.fetches_to_send({tp: 1}, 0)
    node, _ = plan.requests[0]
    data = build_batch([b"v"] * count, base_offset=start, partition_leader_epoch=3)
    response = broker_pb2.FetchResponse(
        topics=[
            broker_pb2.FetchResponse.TopicResponse(
                name=tp[0],
                partitions=[
                    broker_pb2.FetchResponse.PartitionResponse(
                        partition=tp[1], records=data, high_watermark=start + count
                    )
                ],
            )
        ]
    )
    state.on_fetch_answer(node, response)
    assert len(state.take(10_000)) == count


def test_assigned_partitions_join_before_the_listener_and_start_at_committed_offsets() -> None:
    state = FetchState(config(auto_offset_reset="earliest"))
    m, listener = member(), Recorder()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, 0, 1), 0)

    step = begin_step(m, state, auto_commit=True)
    assert step is not None and step.callback.kind is CallbackKind.ASSIGNED
    assert state.assignment() == [(T, 0), (T, 1)]  # already there when the listener runs
    assert m.owned == frozenset()  # ... but not yet reported as owned
    step.listener_method(listener)(step.partitions)
    end_step(m, state, step, now_ms=0)
    assert m.owned == {(T, 0), (T, 1)} and m.state is MemberState.ACKNOWLEDGING
    assert listener.calls == [("assigned", [(T, 0), (T, 1)])]

    state.request_resets()
    lookups = state.offsets_to_look_up()
    assert {tp: spec for tp, (spec, _) in lookups.items()} == {(T, 0): COMMITTED, (T, 1): COMMITTED}
    state.on_offsets_found({(T, 0): (lookups[(T, 0)][1], 42)})
    state.on_committed_missing({(T, 1): lookups[(T, 1)][1]})
    assert state.position((T, 0)) == 42
    assert state.position((T, 1)) is None  # falls back to auto.offset.reset, due at once
    again = state.offsets_to_look_up()
    assert {tp: spec for tp, (spec, _) in again.items()} == {(T, 1): EARLIEST}


def test_no_committed_offset_with_reset_none_is_raised_by_the_next_poll() -> None:
    state = FetchState(config(auto_offset_reset="none"))
    state.assign([(T, 0)])
    state.request_resets()
    ((spec, token),) = state.offsets_to_look_up().values()
    assert spec == COMMITTED  # with a group, even reset=none asks for the committed offset first
    state.on_committed_missing({(T, 0): token})
    with pytest.raises(OffsetOutOfRangeError, match="no committed offset"):
        state.request_resets()


def test_without_a_group_new_partitions_start_per_auto_offset_reset() -> None:
    state = FetchState(
        ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "auto.offset.reset": "none"})
    )
    state.assign([(T, 0)])
    with pytest.raises(OffsetOutOfRangeError, match=r"auto\.offset\.reset=none"):
        state.request_resets()


def test_revoked_partitions_stay_committable_during_the_listener_and_leave_after() -> None:
    state = FetchState(config())
    m, listener = joined(state, 0, 1)
    consumed_to(state, (T, 0), 10, 5)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(2, 1), 0)  # partition 0 moves away

    step = begin_step(m, state, auto_commit=True)
    assert step is not None and step.callback.kind is CallbackKind.REVOKED
    assert step.commit_first == {(T, 0): OffsetAndMetadata(15, 3)}  # position, last epoch
    assert (T, 0) in state.assignment()  # still there while the listener commits
    assert state.consumed([(T, 0)]) == {(T, 0): (15, 3)}
    step.listener_method(listener)(step.partitions)
    end_step(m, state, step, now_ms=5)
    assert state.assignment() == [(T, 1)]
    assert m.owned == {(T, 1)}
    assigned = begin_step(m, state, auto_commit=True)  # on_assigned([]), as Kafka's
    assert assigned is not None and assigned.partitions == []
    end_step(m, state, assigned, now_ms=5)
    assert m.heartbeat_request(5) is not None  # the acknowledgement goes at once


def test_without_auto_commit_nothing_is_committed_before_revocation() -> None:
    state = FetchState(config(enable_auto_commit=False))
    m, _ = joined(state, 0)
    consumed_to(state, (T, 0), 0, 3)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(2), 0)
    assert run_steps(m, state, Recorder()) == [{}, {}]  # revoked, then assigned([])
    assert state.assignment() == []


def test_lost_partitions_leave_before_the_listener_without_a_commit() -> None:
    state = FetchState(config())
    m, listener = joined(state, 0, 1)
    consumed_to(state, (T, 0), 0, 3)
    m.heartbeat_request(0)
    m.on_heartbeat_failed(ErrorCode.FENCED_MEMBER_EPOCH, "fenced", 0)

    step = begin_step(m, state, auto_commit=True)
    assert step is not None and step.callback.kind is CallbackKind.LOST
    assert step.commit_first == {} and state.assignment() == []
    step.listener_method(listener)(step.partitions)  # default: on_partitions_revoked
    end_step(m, state, step, now_ms=0)
    assert listener.calls[-1] == ("revoked", [(T, 0), (T, 1)])
    assert m.state is MemberState.JOINING and m.owned == frozenset()


def test_a_listener_that_raises_still_completes_the_step() -> None:
    class Broken(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
            raise RuntimeError("application bug")

    state = FetchState(config())
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    m.heartbeat_request(0)
    m.on_heartbeat_answer(answer(1, 0), 0)
    step = begin_step(m, state, auto_commit=True)
    assert step is not None
    with pytest.raises(RuntimeError):
        step.listener_method(Broken())(step.partitions)
    end_step(m, state, step, now_ms=0)
    assert m.owned == {(T, 0)} and state.assignment() == [(T, 0)]


def test_a_fatal_member_error_is_what_poll_raises() -> None:
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    assert member_error(m) is None
    m.heartbeat_request(0)
    m.on_heartbeat_failed(ErrorCode.GROUP_MAX_SIZE_REACHED, "the group is full", 0)
    error = member_error(m)
    assert error is not None and error.code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "the group is full" in str(error) and "'g'" in str(error)


def test_subscribe_arguments_are_checked() -> None:
    assert subscription_of("orders", None) == Subscription(topics=frozenset({"orders"}))
    assert subscription_of(["a", "b"], None).topics == {"a", "b"}
    assert subscription_of((), "orders-.*") == Subscription(pattern="orders-.*")
    with pytest.raises(ValueError, match="not both"):
        subscription_of(["a"], "a.*")
    with pytest.raises(ValueError, match="needs topics or a pattern"):
        subscription_of([], None)
    with pytest.raises(ValueError, match="not a valid regex"):
        subscription_of((), "orders-(")
    # The coordinator's syntax (RE2, as Kafka's RE2/J): no lookaround or backreferences.
    with pytest.raises(ValueError, match="RE2 syntax"):
        subscription_of((), "(?!audit).*")
    with pytest.raises(ValueError, match="RE2 syntax"):
        subscription_of((), r"(o)\1rders")
    with pytest.raises(ValueError, match="is empty"):
        subscription_of((), "")
    with pytest.raises(ValueError, match="over the coordinator's 255"):
        subscription_of((), "x" * 256)


def test_subscription_names_the_topics_given_or_those_a_pattern_was_assigned() -> None:
    assignment = [("orders-eu", 1), ("orders-us", 0), ("orders-eu", 0)]
    topics = subscription_of(["b", "a"], None)
    assert subscribed_topics(topics, assignment) == ["a", "b"], "what was given, not assigned"
    assert subscribed_topics(topics, []) == ["a", "b"], "before any assignment too"
    pattern = subscription_of((), "orders-.*")
    assert subscribed_topics(pattern, assignment) == ["orders-eu", "orders-us"]
    assert subscribed_topics(pattern, []) == []
    assert subscribed_topics(None, assignment) == [], "assign() is not a subscription"
