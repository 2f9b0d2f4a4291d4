"""Goal: the hand-over cases a Kafka user meets around KIP-848's rules hold: a deleted subscribed
topic is revoked and its commits refused; a revoking member commits at its unchanged epoch while
the next owner waits, and once the epoch moved its old epoch is stale; a static consumer back
under its own member id after -2 does not get a partition the target moved meanwhile, which its
new owner gets at once; a retried join while revoking frees the pending partitions; ListGroups
filters on several states at once.

Method: GroupHarness scenarios (every write is compared with a replay of the log); at each step
no partition is in two members' assigned ∪ pending.
"""

from __future__ import annotations

from group_harness import GroupHarness, assignment_of

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_model import (
    STABLE,
    UNREVOKED_PARTITIONS,
    GroupConfig,
    pairs,
)
from samsa.v1 import coordinator_pb2 as c


def assert_one_owner(h: GroupHarness) -> None:
    seen: set[tuple[str, int]] = set()
    for member in h.group().members.values():
        owned = pairs(member.assigned) | pairs(member.pending_revocation)
        assert not owned & seen, owned & seen
        seen |= owned


def codes(response: c.OffsetCommitResponse) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partitions]


def test_a_deleted_topic_is_revoked_and_its_commits_refused() -> None:
    h = GroupHarness({"t": 2, "u": 2})
    assert assignment_of(h.join("a", topics=["t", "u"])) == {"t": {0, 1}, "u": {0, 1}}
    del h.topics["u"]
    answer = h.heartbeat("a", 1, owned={"t": [0, 1], "u": [0, 1]})
    assert (answer.member_epoch, assignment_of(answer)) == (1, {"t": {0, 1}})
    assert h.member("a").state == UNREVOKED_PARTITIONS and h.group().group_epoch == 2
    assert codes(h.commit("a", 1, {("u", 0): 3})) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    answer = h.heartbeat("a", 1, owned={"t": [0, 1]})
    assert (answer.member_epoch, h.member("a").state) == (2, STABLE)
    h.topics["u"] = 1  # created again: the subscription by name picks it up
    assert assignment_of(h.heartbeat("a", 2)) == {"t": {0, 1}, "u": {0}}


def test_a_revoking_member_commits_at_its_epoch_and_the_next_owner_waits() -> None:
    h = GroupHarness({"t": 2})
    h.join("a")
    h.join("b")
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": [0, 1]}))["t"]
    (moved,) = {0, 1} - kept
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {}
    # a commits what it revokes at the epoch of its last answer, unchanged by the revocation.
    assert codes(h.commit("a", 1, {("t", moved): 9})) == [ErrorCode.NONE]
    assert codes(h.commit("b", 2, {("t", moved): 1})) == [ErrorCode.NONE]  # epoch, not owner
    h.heartbeat("a", 1, owned={"t": kept})
    assert codes(h.commit("a", 1, {("t", moved): 10})) == [ErrorCode.STALE_MEMBER_EPOCH]
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {"t": {moved}}
    assert_one_owner(h)


def test_a_static_consumer_back_under_its_member_id_does_not_get_what_moved() -> None:
    h = GroupHarness({"t": 4})
    h.join("a", instance_id="ia")
    assert h.heartbeat("a", -2, group_instance_id="ia").member_epoch == -2
    h.join("b")  # the target moves half of a's partitions to b, which must wait for them
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {}
    moved = h.group().target["b"]["t"]
    answer = h.join("a", instance_id="ia")  # the same consumer, back within its session
    assert answer.error_code == ErrorCode.NONE and answer.member_epoch == 2
    assert assignment_of(answer) == {"t": {0, 1, 2, 3} - moved}
    assert_one_owner(h)
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {"t": moved}
    assert_one_owner(h)


def test_a_retried_join_while_revoking_frees_the_pending_partitions() -> None:
    h = GroupHarness({"t": 2})
    h.join("a")
    h.join("b")
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": [0, 1]}))["t"]
    assert h.member("a").state == UNREVOKED_PARTITIONS
    answer = h.join("a")  # a was restarted with its member id: it owns nothing
    assert (answer.member_epoch, assignment_of(answer)) == (2, {"t": kept})
    assert h.member("a").state == STABLE
    assert assignment_of(h.heartbeat("b", 2, owned={})) == {"t": {0, 1} - kept}


def test_list_groups_filters_on_several_states() -> None:
    h = GroupHarness({"t": 2}, GroupConfig())
    h.join("a", group_id="stable")
    h.commit("", -1, {("t", 0): 1})  # group "g": empty, offsets only
    h.join("x", group_id="reconciling")
    h.join("y", group_id="reconciling")
    wanted = [c.CONSUMER_GROUP_STATE_EMPTY, c.CONSUMER_GROUP_STATE_STABLE]
    listed = h.coordinator.list_groups(wanted).groups
    assert [(g.group_id, g.state) for g in listed] == [
        ("g", c.CONSUMER_GROUP_STATE_EMPTY),
        ("stable", c.CONSUMER_GROUP_STATE_STABLE),
    ]
    everything = h.coordinator.list_groups().groups
    assert [g.group_id for g in everything] == ["g", "reconciling", "stable"]
    assert everything[1].state == c.CONSUMER_GROUP_STATE_RECONCILING
