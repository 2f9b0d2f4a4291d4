"""Goal: a regex subscription resolves, for each member, to the matching topics its principal
(at its host) may DESCRIBE under the current ACLs. A member is never assigned a partition of a
topic it may not DESCRIBE, even when another member of the group, with the same regex, may and
is; a change of the ACLs bumps the group epoch at the next heartbeat and moves the partitions it
concerns through the usual revocation (never two owners); a member whose record carries no
principal (written before principals were recorded) is not filtered until it heartbeats again;
without any restriction the digest is the one it was before filtering; and DescribeGroups
(group_describe_access) then names none of the filtered topics.

Method: GroupHarness (every step compared with a replay of its records) with MemberAccess
values whose judge reads a mutable set of grants, the stand-in for the ACL image; members
heartbeat in rounds, reporting what they were told they own, until the group settles. After
every heartbeat the "never two owners" invariant and "nobody holds what it may not DESCRIBE"
are checked on the shard itself.
"""

from __future__ import annotations

from group_harness import GroupHarness, assignment_of

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_admin import STABLE_GROUP, group_state
from samsa.services.coordinator.group_assignment import (
    MemberAccess,
    group_digest,
    subscribed_topics,
    subscription_digest,
)
from samsa.services.coordinator.group_describe_access import shown_to
from samsa.services.coordinator.group_model import pairs, union

ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"
REGEX = r"orders\..*"
TOPICS = {"orders.eu": 1, "orders.us": 3, "audit": 1}  # uneven: a grant moves one


class Acls:
    """The stand-in for the ACL image: (principal, topic) pairs granted DESCRIBE."""

    def __init__(self, *grants: tuple[str, str]) -> None:
        self.grants = set(grants)

    def may_describe(self, principal: str, host: str, topic: str) -> bool:
        assert host == HOST, "each member is judged at the host it heartbeats from"
        return (principal, topic) in self.grants

    def access(self, principal: str) -> MemberAccess:
        return MemberAccess(principal, HOST, self.may_describe)


def check_invariants(h: GroupHarness, acls: Acls) -> None:
    """Never two owners; no judged member holds or is to hold a topic it may not DESCRIBE."""
    group = h.group()
    seen: set[tuple[str, int]] = set()
    for member in group.members.values():
        held = pairs(union(member.assigned, member.pending_revocation))
        assert not held & seen, f"two owners of {held & seen}"
        seen |= held
        if member.principal:
            mine = set(member.assigned) | set(group.target.get(member.member_id, {}))
            for topic in mine:
                assert acls.may_describe(member.principal, member.host, topic), (
                    f"{member.member_id} ({member.principal}) holds or is to hold {topic}"
                )


def settle(h: GroupHarness, acls: Acls, who: dict[str, str], rounds: int = 12) -> None:
    """Heartbeat every member in turn, reporting what it was last told it owns, until the group
    is stable at its group epoch."""
    for _ in range(rounds):
        for member_id, principal in who.items():
            member = h.member(member_id)
            owned = {t: list(p) for t, p in member.assigned.items()}
            answer = h.heartbeat(
                member_id, member.member_epoch, owned=owned, access=acls.access(principal)
            )
            assert answer.error_code == ErrorCode.NONE, answer.error_message
            check_invariants(h, acls)
        group = h.group()
        if group.assignment_epoch == group.group_epoch and group_state(group) == STABLE_GROUP:
            return
    raise AssertionError("the group did not settle")


def join_both(acls: Acls) -> GroupHarness:
    h = GroupHarness(TOPICS)
    for member_id, principal in (("a", ALICE), ("b", BOB)):
        answer = h.join(member_id, regex=REGEX, access=acls.access(principal))
        assert answer.error_code == ErrorCode.NONE, answer.error_message
        check_invariants(h, acls)
    settle(h, acls, {"a": ALICE, "b": BOB})
    return h


def test_a_member_is_assigned_only_the_matching_topics_its_principal_may_describe() -> None:
    acls = Acls((ALICE, "orders.eu"), (ALICE, "orders.us"), (BOB, "orders.eu"))
    h = join_both(acls)
    a, b = h.member("a"), h.member("b")
    assert (b.principal, b.host) == (BOB, HOST), "recorded in its member metadata"
    assert b.assigned == {"orders.eu": {0}}, "bob: only what he may see, though uneven"
    assert a.assigned == {"orders.us": {0, 1, 2}}, "alice takes what bob may not see"
    assert "audit" not in h.group().target["a"], "the regex still means what it matches"


def test_an_acl_change_bumps_the_epoch_and_moves_partitions_by_revocation() -> None:
    acls = Acls((ALICE, "orders.eu"), (ALICE, "orders.us"), (BOB, "orders.eu"))
    h = join_both(acls)
    epoch = h.group().group_epoch
    acls.grants.add((BOB, "orders.us"))  # granted: bob may now be given orders.us
    a = h.member("a")
    h.heartbeat("a", a.member_epoch, owned=a.assigned, access=acls.access(ALICE))
    assert h.group().group_epoch > epoch, "alice's heartbeat saw the ACLs change"
    assert "orders.us" in h.member("a").pending_revocation, "alice gives one up first"
    assert "orders.us" not in h.member("b").assigned, "bob waits for it"
    settle(h, acls, {"a": ALICE, "b": BOB})
    assert h.group().group_epoch > epoch, "the digest moved with the ACLs"
    assert "orders.us" in h.member("b").assigned, "the sticky share moved to bob"
    epoch = h.group().group_epoch
    acls.grants.discard((BOB, "orders.us"))  # revoked: bob must give orders.us back
    b = h.member("b")
    answer = h.heartbeat("b", b.member_epoch, owned=b.assigned, access=acls.access(BOB))
    assert h.group().group_epoch > epoch
    assert "orders.us" not in assignment_of(answer), "no longer his to fetch"
    assert "orders.us" in h.member("b").pending_revocation, "revoked, not simply reassigned"
    check_invariants(h, acls)
    settle(h, acls, {"a": ALICE, "b": BOB})
    assert "orders.us" not in h.member("b").assigned
    assert h.member("a").assigned == {"orders.us": {0, 1, 2}}


def test_a_record_without_principal_is_unfiltered_until_its_member_heartbeats() -> None:
    acls = Acls((ALICE, "orders.eu"), (ALICE, "orders.us"), (BOB, "orders.eu"))
    h = GroupHarness(TOPICS)
    h.join("b", regex=REGEX)  # an older coordinator: no principal recorded
    h.fail_over()
    assert h.member("b").principal == ""
    h.join("a", regex=REGEX, access=acls.access(ALICE))  # the new one judges alice's heartbeats
    group = h.group()
    assert "orders.us" in group.target["b"], "bob's old record is not judged"
    epoch = group.group_epoch
    b = h.member("b")
    h.heartbeat("b", b.member_epoch, owned=b.assigned, access=acls.access(BOB))
    assert h.member("b").principal == BOB, "rewritten with who heartbeats"
    assert h.group().group_epoch > epoch
    assert "orders.us" not in h.group().target["b"]
    settle(h, acls, {"a": ALICE, "b": BOB})


def test_names_are_not_filtered_and_nothing_hidden_keeps_the_old_digest() -> None:
    acls = Acls((BOB, "orders.eu"))
    h = GroupHarness(TOPICS)
    h.join("b", topics=["orders.us"], access=acls.access(BOB))  # the servicer refuses this
    assert set(h.member("b").assigned) == {"orders.us"}, "names: the core filters nothing"
    h2 = join_both(Acls(*((p, t) for p in (ALICE, BOB) for t in ("orders.eu", "orders.us"))))
    members = h2.group().members.values()
    assert h2.group().subscription_digest == subscription_digest(
        subscribed_topics(members, TOPICS)
    ), "every matching topic granted: the digest is the unfiltered one"
    assert group_digest(members, TOPICS, acls.may_describe) != h2.group().subscription_digest


def test_describe_groups_names_no_topic_filtered_out() -> None:
    acls = Acls((BOB, "orders.eu"))
    h = GroupHarness(TOPICS)
    h.join("b", regex=REGEX, access=acls.access(BOB))
    settle(h, acls, {"b": BOB})
    described = h.coordinator.describe_groups(["g"]).groups[0]
    bob_sees = shown_to(described, lambda topic: acls.may_describe(BOB, HOST, topic), BOB)
    assert bob_sees.error_code == ErrorCode.NONE, "bob may describe his own group"
    text = str(described)
    assert "orders.us" not in text and "orders.eu" in text
