"""Goal: the group follows its members and the topics: a static member that leaves with -2 keeps
its partitions and takes them back under a new member id without moving any partition (an active
holder of the instance id refuses the join); a regex subscription picks up a new matching topic
(never an internal one) and new partitions join the assignment; the group uses the assignor most
of its members name (KIP-848), whatever order their choices came in; sessions and revocations
that run out remove the member like a leave; a loaded shard restarts its timers.

Method: GroupHarness scenarios with the manual clock and the topics view changed between
heartbeats; each checks answers and state and ends with a failover comparison.
"""

from __future__ import annotations

from group_harness import GroupHarness, assignment_of

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_model import UNREVOKED_PARTITIONS, GroupConfig


def settled_pair(h: GroupHarness, **join_b) -> tuple[set[int], set[int]]:
    """a and b joined and reconciled over topic t: (a's partitions, b's partitions)."""
    h.join("a", instance_id="ia")
    h.join("b", **join_b)
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": range(h.topics["t"])}))["t"]
    h.heartbeat("a", 1, owned={"t": kept})
    rest = assignment_of(h.heartbeat("b", 2, owned={}))["t"]
    return kept, rest


def test_static_leave_keeps_partitions_and_rejoin_moves_none() -> None:
    h = GroupHarness({"t": 4})
    kept, rest = settled_pair(h)
    group_epoch = h.group().group_epoch
    answer = h.heartbeat("a", -2, group_instance_id="ia")
    assert answer.error_code == ErrorCode.NONE and answer.member_epoch == -2
    assert h.member("a").member_epoch == -2 and h.member("a").assigned == {"t": frozenset(kept)}
    assert h.group().group_epoch == group_epoch  # nothing moves
    # b heartbeats meanwhile: a's partitions are not free.
    assert assignment_of(h.heartbeat("b", 2, owned={"t": rest})) == {"t": rest}
    answer = h.join("a2", instance_id="ia")
    assert answer.error_code == ErrorCode.NONE
    assert answer.member_epoch == 2 and assignment_of(answer) == {"t": kept}
    assert "a" not in h.group().members and "a" not in h.group().target
    assert h.group().target["a2"] == {"t": frozenset(kept)}
    assert h.group().group_epoch == group_epoch  # same subscription: no epoch bump
    h.assert_failover()


def test_static_rejoin_with_another_subscription_bumps_the_epoch() -> None:
    h = GroupHarness({"t": 4, "u": 2})
    settled_pair(h)
    h.heartbeat("a", -2, group_instance_id="ia")
    epoch = h.group().group_epoch
    h.join("a2", instance_id="ia", topics=["t", "u"])
    assert h.group().group_epoch == epoch + 1
    h.assert_failover()


def test_a_static_member_leaving_mid_revocation_frees_what_it_was_revoking() -> None:
    """A closing consumer gives everything up before its -2, so what it was revoking goes to its
    new owner at once (Kafka's consumerGroupStaticMemberGroupLeave); only its assigned
    partitions stay reserved, and no revocation deadline removes it before its session ends."""
    h = GroupHarness({"t": 4}, GroupConfig(session_timeout_ms=30_000))
    h.join("a", instance_id="ia", rebalance_timeout_ms=5_000)
    h.join("b")
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": range(4)}))["t"]
    assert h.member("a").state == UNREVOKED_PARTITIONS
    assert h.heartbeat("a", -2, group_instance_id="ia").member_epoch == -2
    assert not h.member("a").pending_revocation and h.member("a").assigned == {"t": kept}
    assert h.member("a").revocation_deadline_ms is None
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {"t": {0, 1, 2, 3} - kept}
    h.now_ms += 29_999  # past a's rebalance timeout, within its session
    h.heartbeat("b", 2, owned={"t": {0, 1, 2, 3} - kept})
    h.fail_over()
    h.now_ms += 5_000
    assert not h.expire().records
    answer = h.join("a2", instance_id="ia")
    assert (answer.member_epoch, assignment_of(answer)) == (2, {"t": kept})


def test_an_active_holder_keeps_its_instance_id() -> None:
    h = GroupHarness({"t": 4})
    settled_pair(h)
    answer = h.join("a2", instance_id="ia")
    assert answer.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert "held by active member 'a'" in answer.error_message
    assert "a2" not in h.group().members


def test_a_static_member_at_minus_two_is_fenced_on_heartbeat() -> None:
    h = GroupHarness({"t": 4})
    settled_pair(h)
    h.heartbeat("a", -2, group_instance_id="ia")
    assert h.heartbeat("a", 2, owned={}).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # Its own member id may come back with epoch 0 and gets its partitions again.
    answer = h.join("a", instance_id="ia")
    assert answer.member_epoch == 2 and len(assignment_of(answer)["t"]) == 2


def test_regex_subscription_picks_up_new_matching_topics_only() -> None:
    h = GroupHarness({"orders.eu": 2, "audit": 1})
    answer = h.join("a", regex=r"orders\..*")
    assert assignment_of(answer) == {"orders.eu": {0, 1}}
    h.topics["orders.us"] = 1
    h.topics["__orders.internal"] = 1  # internal topics never match
    h.topics["__consumer_offsets"] = 50
    answer = h.heartbeat("a", 1, owned={"orders.eu": [0, 1]})
    assert h.group().group_epoch == 2
    assert answer.member_epoch == 2
    assert assignment_of(answer) == {"orders.eu": {0, 1}, "orders.us": {0}}
    h.assert_failover()


def test_new_partitions_join_the_assignment() -> None:
    h = GroupHarness({"t": 2})
    h.join("a")
    h.topics["t"] = 3
    answer = h.heartbeat("a", 1, owned={"t": [0, 1]})
    assert answer.member_epoch == 2 and assignment_of(answer) == {"t": {0, 1, 2}}


def test_range_assignor_by_name() -> None:
    h = GroupHarness({"t": 5})
    h.join("m1", assignor="range", instance_id="i2")
    h.join("m2", assignor="range", instance_id="i1")
    h.heartbeat("m1", 1, owned={"t": range(5)})
    # range sorts by instance id: i1 (m2) gets 0-2, i2 (m1) gets 3-4.
    assert h.group().target == {"m1": {"t": frozenset({3, 4})}, "m2": {"t": frozenset({0, 1, 2})}}
    assert h.coordinator.describe_groups(["g"]).groups[0].assignor_name == "range"


def test_roundrobin_assignor_by_name() -> None:
    h = GroupHarness({"t": 5})
    h.join("m1", assignor="roundrobin", instance_id="i2")
    h.join("m2", assignor="roundrobin", instance_id="i1")
    h.heartbeat("m1", 1, owned={"t": range(5)})
    # roundrobin deals by instance id: i1 (m2) gets 0, 2, 4; i2 (m1) gets 1, 3.
    assert h.group().target == {"m1": {"t": frozenset({1, 3})}, "m2": {"t": frozenset({0, 2, 4})}}
    assert h.coordinator.describe_groups(["g"]).groups[0].assignor_name == "roundrobin"


def assignor_in_use(h: GroupHarness) -> str:
    name = h.coordinator.describe_groups(["g"]).groups[0].assignor_name
    assert h.rebuilt().describe_groups(["g"]).groups[0].assignor_name == name, "replay agrees"
    return name


def test_the_assignor_most_members_name_wins() -> None:
    # KIP-848: the most common server assignor; members that name none do not count.
    h = GroupHarness({"t": 2})

    def change(member_id: str, **fields) -> None:
        answer = h.heartbeat(member_id, h.member(member_id).member_epoch, **fields)
        assert answer.error_code == ErrorCode.NONE, answer

    h.join("a", assignor="range")
    h.join("b")
    assert assignor_in_use(h) == "range", "b names none: not a vote for the default"
    h.join("c", assignor="roundrobin")
    h.join("d", assignor="roundrobin")
    assert assignor_in_use(h) == "roundrobin"
    change("b", client_id="moved-to-the-end")  # a newer metadata record decides nothing
    assert assignor_in_use(h) == "roundrobin"
    change("a", server_assignor="range", client_id="again")
    assert assignor_in_use(h) == "roundrobin", "the most recent choice does not flip the group"
    change("d", server_assignor="range")
    assert assignor_in_use(h) == "range"
    h.heartbeat("a", -1)
    h.heartbeat("d", -1)
    assert assignor_in_use(h) == "roundrobin", "the leavers' votes are gone"


def test_a_tie_goes_to_the_default_else_to_the_first_name() -> None:
    h = GroupHarness({"t": 2})
    h.join("a", assignor="roundrobin")
    h.join("b", assignor="range")
    assert assignor_in_use(h) == "range", "uniform, the default, is not in the tie"
    h.join("c", assignor="uniform")
    assert assignor_in_use(h) == "uniform", "the default is in the tie"
    h.join("d", assignor="range")
    assert assignor_in_use(h) == "range"


def test_the_target_is_computed_by_the_majority_assignor() -> None:
    h = GroupHarness({"t": 5})
    h.join("m1", assignor="range", instance_id="i2")
    h.join("m2", assignor="range", instance_id="i1")
    h.join("m3", assignor="roundrobin", instance_id="i3")  # the latest choice, outvoted
    h.heartbeat("m1", 1, owned={"t": range(5)})
    # range over i1 (m2), i2 (m1), i3 (m3): runs of 2, 2 and 1.
    assert h.group().target == {
        "m2": {"t": frozenset({0, 1})},
        "m1": {"t": frozenset({2, 3})},
        "m3": {"t": frozenset({4})},
    }


def test_session_expiry_removes_the_member_like_a_leave() -> None:
    h = GroupHarness({"t": 2}, GroupConfig(session_timeout_ms=30_000))
    h.join("a")
    h.join("b")
    h.now_ms += 20_000
    h.heartbeat("b", 2, owned={})
    assert h.coordinator.next_deadline_ms() == h.now_ms - 20_000 + 30_000
    h.now_ms += 10_000  # a's session is over, b's is not
    result = h.expire()
    assert result.records
    assert set(h.group().members) == {"b"}
    epoch = h.group().group_epoch
    assert epoch == 3
    answer = h.heartbeat("b", 2, owned={})
    assert answer.member_epoch == 3 and assignment_of(answer) == {"t": {0, 1}}
    h.assert_failover()


def test_a_static_member_that_does_not_come_back_expires() -> None:
    h = GroupHarness({"t": 4}, GroupConfig(session_timeout_ms=30_000))
    settled_pair(h)
    h.heartbeat("a", -2, group_instance_id="ia")
    h.now_ms += 29_999
    h.heartbeat("b", 2, owned={"t": []})
    assert not h.expire().records
    h.now_ms += 1
    h.expire()
    assert set(h.group().members) == {"b"}


def test_a_member_that_does_not_revoke_in_time_is_removed() -> None:
    h = GroupHarness({"t": 2})
    h.join("a", rebalance_timeout_ms=5_000)
    h.join("b")
    h.heartbeat("a", 1, owned={"t": [0, 1]})
    assert h.member("a").state == UNREVOKED_PARTITIONS
    assert h.member("a").revocation_deadline_ms == h.now_ms + 5_000
    h.now_ms += 4_000
    h.heartbeat("a", 1, owned={"t": [0, 1]})  # heartbeats, but does not revoke
    h.heartbeat("b", 2, owned={})
    h.now_ms += 1_000
    h.expire()
    assert set(h.group().members) == {"b"}
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {"t": {0, 1}}


def test_loaded_members_get_fresh_timers() -> None:
    h = GroupHarness({"t": 2})
    h.join("a", rebalance_timeout_ms=5_000)
    h.join("b")
    h.heartbeat("a", 1, owned={"t": [0, 1]})
    h.now_ms += 40_000
    h.fail_over()
    assert h.member("a").session_deadline_ms == h.now_ms + 45_000
    assert h.member("a").revocation_deadline_ms == h.now_ms + 5_000
    assert h.member("b").revocation_deadline_ms is None
    assert not h.expire().records  # 40 s after the join, but just loaded: nobody expires


def test_an_emptied_group_without_offsets_is_deleted_on_expiry() -> None:
    h = GroupHarness()
    h.join("a")
    h.heartbeat("a", -1)
    assert "g" in h.state.groups
    h.expire()
    assert h.state.groups == {}
    h.assert_failover()
