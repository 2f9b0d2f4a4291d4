"""Goal: ConsumerGroupHeartbeat follows KIP-848 for dynamic members: the first member gets
everything; a second member makes the first revoke (its assignment shrinks, its epoch stays) and
gets those partitions only once the first reports them gone; leaving hands partitions over; a
stale or future epoch is fenced, a lost answer is forgiven only when the member owns nothing it
should not; bad requests are refused with a message saying what to fix and write nothing.

Method: a GroupHarness (manual clock, topics view) drives the pure shard with requests as a client
would send them; answers, the group's state and the records are checked, and every scenario ends
by rebuilding a shard from the encoded records and comparing (failover equality).
"""

from __future__ import annotations

import pytest
from group_harness import GroupHarness, assignment_of

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_model import (
    STABLE,
    UNREVOKED_PARTITIONS,
    GroupConfig,
)
from samsa.v1 import coordinator_pb2 as c


def test_first_member_gets_every_partition() -> None:
    h = GroupHarness({"t": 4})
    answer = h.join("a")
    assert answer.error_code == ErrorCode.NONE
    assert answer.member_epoch == 1
    assert answer.heartbeat_interval_ms == 5000
    assert assignment_of(answer) == {"t": {0, 1, 2, 3}}
    group = h.group()
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    h.assert_failover()


def test_second_member_waits_for_the_first_to_revoke() -> None:
    h = GroupHarness({"t": 4})
    h.join("a")
    answer_b = h.join("b")
    assert answer_b.member_epoch == 2 and assignment_of(answer_b) == {}
    # a is told to revoke half: its assignment shrinks, its epoch stays 1.
    answer_a = h.heartbeat("a", 1, owned={"t": [0, 1, 2, 3]})
    assert answer_a.member_epoch == 1
    kept = assignment_of(answer_a)["t"]
    assert len(kept) == 2
    assert h.member("a").state == UNREVOKED_PARTITIONS
    # b still gets nothing: the revoked partitions are pending on a.
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {}
    # a confirms; its epoch moves.
    answer_a = h.heartbeat("a", 1, owned={"t": kept})
    assert answer_a.member_epoch == 2 and assignment_of(answer_a) == {"t": kept}
    answer_b = h.heartbeat("b", 2, owned={})
    assert assignment_of(answer_b) == {"t": {0, 1, 2, 3} - kept}
    assert all(m.state == STABLE for m in h.group().members.values())
    h.assert_failover()


def test_heartbeat_without_owned_partitions_does_not_end_revocation() -> None:
    h = GroupHarness({"t": 2})
    h.join("a")
    h.join("b")
    h.heartbeat("a", 1, owned={"t": [0, 1]})
    assert h.member("a").state == UNREVOKED_PARTITIONS
    h.heartbeat("a", 1)  # owned unset: proves nothing
    assert h.member("a").state == UNREVOKED_PARTITIONS
    h.heartbeat("a", 1, owned={"t": [0, 1]})  # still owns the pending one
    assert h.member("a").state == UNREVOKED_PARTITIONS


def test_leave_hands_partitions_to_the_others() -> None:
    h = GroupHarness({"t": 4})
    h.join("a")
    h.join("b")
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": [0, 1, 2, 3]}))["t"]
    h.heartbeat("a", 1, owned={"t": kept})
    h.heartbeat("b", 2, owned={})
    epoch_before = h.group().group_epoch
    answer = h.heartbeat("a", -1)
    assert answer.error_code == ErrorCode.NONE and answer.member_epoch == -1
    assert "a" not in h.group().members and "a" not in h.group().target
    assert h.group().group_epoch == epoch_before + 1
    answer_b = h.heartbeat("b", 2, owned={"t": {0, 1, 2, 3} - kept})
    assert answer_b.member_epoch == epoch_before + 1
    assert assignment_of(answer_b) == {"t": {0, 1, 2, 3}}
    h.assert_failover()


def test_leaving_twice_or_unknown_is_a_success_without_records() -> None:
    h = GroupHarness()
    h.join("a")
    h.heartbeat("a", -1)
    log_size = len(h.log)
    for member_id in ("a", "never-there"):
        answer = h.heartbeat(member_id, -1)
        assert answer.error_code == ErrorCode.NONE and answer.member_epoch == -1
    assert len(h.log) == log_size


def test_unknown_member_is_told_to_rejoin() -> None:
    h = GroupHarness()
    answer = h.heartbeat("ghost", 3, owned={})
    assert answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert "rejoin" in answer.error_message
    assert not answer.HasField("assignment")
    assert h.state.groups == {}


def test_future_and_old_epochs_are_fenced() -> None:
    h = GroupHarness({"t": 2})
    h.join("a")
    h.join("b")  # group epoch 2
    h.heartbeat("a", 1, owned={"t": [0, 1]})
    h.heartbeat("a", 1, owned={"t": [0]})  # a at epoch 2 now (previous 1)
    assert h.member("a").member_epoch == 2
    for epoch in (3, 7):
        assert h.heartbeat("a", epoch, owned={}).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # Epoch 1 is the previous one; with more than a owns, it is fenced too.
    answer = h.heartbeat("a", 1, owned={"t": [0, 1]})
    assert answer.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "rejoin" in answer.error_message
    assert h.member("a").member_epoch == 2  # a fenced heartbeat changes nothing


def test_a_lost_answer_is_forgiven_when_owned_is_within_the_assignment() -> None:
    h = GroupHarness({"t": 4})
    h.join("a")
    h.join("b")
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": [0, 1, 2, 3]}))["t"]
    h.heartbeat("a", 1, owned={"t": kept})  # this answer (epoch 2) is "lost"
    answer = h.heartbeat("a", 1, owned={"t": kept})
    assert answer.error_code == ErrorCode.NONE and answer.member_epoch == 2
    # Without owned partitions the coordinator cannot tell: fenced.
    h.heartbeat("a", 2, owned={"t": kept})
    h.heartbeat("b", 2, owned={})
    assert h.heartbeat("a", 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_a_lost_answer_then_a_revocation_of_what_the_member_never_got() -> None:
    """a's answer that added t-2 (epoch 2) is lost, then b's join moves t-2 to b. a's retry at its
    previous epoch reports {0, 1}: it never had t-2, so it must not be asked to revoke it (it
    would never report its unchanged owned set again, and b would wait for a's rebalance
    timeout, which then removes a): a moves to epoch 3 and b gets t-2 at once."""
    h = GroupHarness({"t": 2})
    h.join("a")
    h.topics["t"] = 3
    h.heartbeat("a", 1, owned={"t": [0, 1]})  # answer lost: a is at epoch 2 with {0, 1, 2}
    assert h.member("a").member_epoch == 2 and h.member("a").assigned == {"t": {0, 1, 2}}
    h.join("b")
    assert h.group().target["b"] == {"t": {2}}
    answer = h.heartbeat("a", 1, owned={"t": [0, 1]})  # the full request after a lost answer
    assert answer.error_code == ErrorCode.NONE
    assert (answer.member_epoch, assignment_of(answer)) == (3, {"t": {0, 1}})
    assert h.member("a").state == STABLE and not h.member("a").pending_revocation
    assert assignment_of(h.heartbeat("b", 3)) == {"t": {2}}
    h.assert_failover()


def test_a_retried_join_answers_the_current_state() -> None:
    h = GroupHarness({"t": 4})
    first = h.join("a")
    records_before = len(h.log)
    again = h.join("a")
    assert again.member_epoch == first.member_epoch
    assert assignment_of(again) == assignment_of(first)
    assert len(h.log) == records_before  # nothing changed, nothing written
    assert len(h.group().members) == 1


def test_group_max_size() -> None:
    h = GroupHarness(config=GroupConfig(max_size=2))
    h.join("a")
    h.join("b")
    answer = h.join("c")
    assert answer.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "maximum of 2" in answer.error_message
    assert "c" not in h.group().members
    assert h.join("a").error_code == ErrorCode.NONE  # a retried join is no new member


def test_subscription_change_bumps_the_epoch_and_moves_partitions() -> None:
    h = GroupHarness({"t": 2, "u": 2})
    h.join("a", topics=["t"])
    assert assignment_of(h.heartbeat("a", 1, owned={"t": [0, 1]})) == {"t": {0, 1}}
    subscription = c.ConsumerGroupSubscription(topic_names=["u"])
    answer = h.heartbeat("a", 1, owned={"t": [0, 1]}, subscription=subscription)
    assert h.group().group_epoch == 2
    assert answer.member_epoch == 1 and assignment_of(answer) == {}  # revoke t first
    answer = h.heartbeat("a", 1, owned={})
    assert answer.member_epoch == 2 and assignment_of(answer) == {"u": {0, 1}}
    h.assert_failover()


def test_unchanged_metadata_writes_nothing() -> None:
    h = GroupHarness({"t": 2})
    h.join("a", client_id="c1")
    before = len(h.log)
    subscription = c.ConsumerGroupSubscription(topic_names=["t", "t"])
    h.heartbeat("a", 1, owned={"t": [0, 1]}, subscription=subscription, client_id="c1")
    assert len(h.log) == before
    h.heartbeat("a", 1, client_id="c2")
    assert len(h.log) == before + 1 and h.member("a").client_id == "c2"
    assert h.group().group_epoch == 1  # the client id is no subscription change


SUBSCRIPTION = c.ConsumerGroupSubscription(topic_names=["t"])

INVALID = [
    (dict(group_id=""), ErrorCode.INVALID_GROUP_ID, "group_id must be 1 to 255"),
    (dict(group_id="g" * 256), ErrorCode.INVALID_GROUP_ID, "group_id must be 1 to 255"),
    (dict(member_id=""), ErrorCode.INVALID_REQUEST, "member_id must be 1 to 64"),
    (dict(member_id="m" * 65), ErrorCode.INVALID_REQUEST, "member_id must be 1 to 64"),
    (dict(member_epoch=-3), ErrorCode.INVALID_REQUEST, "member_epoch -3 is invalid"),
    (dict(member_epoch=-2), ErrorCode.INVALID_REQUEST, "needs group_instance_id"),
    (dict(subscription=None), ErrorCode.INVALID_REQUEST, "needs a subscription"),
    (dict(rebalance_timeout_ms=0), ErrorCode.INVALID_REQUEST, "rebalance_timeout_ms > 0"),
    (
        dict(subscription=c.ConsumerGroupSubscription()),
        ErrorCode.INVALID_REQUEST,
        "exactly one of topic_names and topic_regex",
    ),
    (
        dict(subscription=c.ConsumerGroupSubscription(topic_names=["t"], topic_regex="t")),
        ErrorCode.INVALID_REQUEST,
        "exactly one of topic_names and topic_regex",
    ),
    (
        dict(subscription=c.ConsumerGroupSubscription(topic_regex="(")),
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        "is not a valid regular expression",
    ),
    (
        dict(subscription=c.ConsumerGroupSubscription(topic_regex="x" * 256)),
        ErrorCode.INVALID_REQUEST,
        "over 255 characters",
    ),
    (dict(server_assignor="sticky"), ErrorCode.UNSUPPORTED_ASSIGNOR, "'sticky' is not one of"),
]


@pytest.mark.parametrize("change,code,message", INVALID, ids=[i[2] for i in INVALID])
def test_invalid_requests_are_refused_with_what_to_fix(change, code, message) -> None:
    h = GroupHarness()
    fields = dict(
        group_id="g",
        member_id="m",
        member_epoch=0,
        subscription=SUBSCRIPTION,
        rebalance_timeout_ms=1000,
    )
    fields.update(change)
    if fields["subscription"] is None:
        del fields["subscription"]
    request = c.ConsumerGroupHeartbeatRequest(**fields)
    result = h.coordinator.heartbeat(request, h.now_ms, h.topics)
    assert result.response.error_code == code
    assert message in result.response.error_message
    assert result.records == [] and h.state.groups == {}
