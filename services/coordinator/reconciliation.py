"""KIP-848's current-assignment builder: one member's next step towards its target assignment.

Theory of operation. The target assignment says who should own what at `assignment_epoch`; a
member moves towards its part of it one heartbeat at a time, and the hand-over is cooperative: a
partition goes to its new member only once the old one has confirmed it gave it up. The member's
state says where it stands (states, and where each can go):

- STABLE at epoch e. When e == t (the assignment epoch) there is nothing to do. Else the member
  computes the next step from its assigned set (`_next_step`):
    * some assigned partitions are no longer in its target and the heartbeat does not show them
      already gone (owned unset, or holding some of them) → UNREVOKED_PARTITIONS at epoch e:
      assigned shrinks to assigned ∩ target, the rest is pending revocation;
    * else the epoch moves to t, assigned shrinks to assigned ∩ target, and the member takes
      every target partition nobody else owns → STABLE when that is its whole target,
      UNRELEASED_PARTITIONS otherwise.
  The first rule's exception is Kafka's (CurrentAssignmentBuilder.ownsRevokedPartitions): a
  member whose lost answer moved its epoch reports, at its previous epoch, what it really owns;
  when that already excludes what it must now give up, asking it to revoke would wait for an
  owned set it has no reason to send again ("unset means unchanged") until its rebalance timeout
  removed it.
- UNREVOKED_PARTITIONS. Stays until a heartbeat reports owned partitions holding none of the
  pending ones (an unset `owned` proves nothing); then pending empties and the STABLE rule runs
  again from the member's epoch — which may revoke again if the target moved meanwhile.
- UNRELEASED_PARTITIONS at epoch e. When e == t: takes target partitions freed since, STABLE once
  complete. When the target moved on (e != t): the STABLE rule from the current sets.

Invariant: the partitions handed to the member are free — in no other member's assigned ∪
pending — so no partition ever has two owners. `next_assignment` asserts it.

Pure: sets in, sets out. The caller (group_heartbeat) supplies the other members' partitions and
writes the result as a current_assignment record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.services.coordinator.group_model import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Partitions,
    TopicPartition,
    difference,
    from_pairs,
    intersection,
    pairs,
)


@dataclass(frozen=True)
class MemberAssignment:
    """A member's reconciliation state: what a current_assignment record holds."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Partitions
    pending_revocation: Partitions


def next_assignment(
    current: MemberAssignment,
    target: Partitions,
    assignment_epoch: int,
    owners: Mapping[TopicPartition, str],
    member_id: str,
    reported_owned: Partitions | None,
) -> MemberAssignment:
    """The member's next state. `owners` maps every partition in any member's assigned ∪ pending
    (this member's included) to that member; `reported_owned` is what the heartbeat says the
    member owns (None when the request did not say)."""
    if current.state == UNREVOKED_PARTITIONS:
        if reported_owned is None or pairs(
            intersection(reported_owned, current.pending_revocation)
        ):
            return current
        following = _next_step(current, target, assignment_epoch, owners, member_id, reported_owned)
    elif current.state == STABLE and current.member_epoch == assignment_epoch:
        return current
    else:
        assert current.state in (STABLE, UNRELEASED_PARTITIONS), current.state
        following = _next_step(current, target, assignment_epoch, owners, member_id, reported_owned)
    owned_after = pairs(following.assigned) | pairs(following.pending_revocation)
    assert all(owners.get(tp, member_id) == member_id for tp in owned_after), "two owners"
    return following


def _next_step(
    current: MemberAssignment,
    target: Partitions,
    assignment_epoch: int,
    owners: Mapping[TopicPartition, str],
    member_id: str,
    reported_owned: Partitions | None,
) -> MemberAssignment:
    """Kafka's computeNextAssignment, from the member's assigned set (pending is given up)."""
    kept = intersection(current.assigned, target)
    revoke = difference(current.assigned, target)
    if revoke and (reported_owned is None or pairs(intersection(reported_owned, revoke))):
        return _moved(current, current.member_epoch, UNREVOKED_PARTITIONS, kept, revoke)
    wanted = difference(target, kept)
    free = from_pairs(tp for tp in pairs(wanted) if owners.get(tp, member_id) == member_id)
    assigned = {**kept}
    for topic, numbers in free.items():
        assigned[topic] = assigned.get(topic, frozenset()) | numbers
    state = STABLE if assigned == target else UNRELEASED_PARTITIONS
    return _moved(current, assignment_epoch, state, assigned, {})


def _moved(
    current: MemberAssignment,
    member_epoch: int,
    state: int,
    assigned: Partitions,
    pending: Partitions,
) -> MemberAssignment:
    previous = current.member_epoch if member_epoch != current.member_epoch else None
    return MemberAssignment(
        member_epoch=member_epoch,
        previous_member_epoch=current.previous_member_epoch if previous is None else previous,
        state=state,
        assigned=assigned,
        pending_revocation=pending,
    )
