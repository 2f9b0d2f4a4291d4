"""Goal: a static member's temporary leave (member epoch -2) is as strict as Kafka's
consumerGroupLeave. The member is found by its group.instance.id: when no member holds it (never
joined, expired, another group) the answer is UNKNOWN_MEMBER_ID; when another member id holds it
(a newer consumer took the instance id over, or the request mixes two consumers' ids) the answer
is FENCED_INSTANCE_ID, and the holder is left as it was. A repeated -2 from the holder is still
answered -2 without a write: the first answer may have been lost.

Method: GroupHarness scenarios (each write compared with a replay of the log); refusals must
write nothing.
"""

from __future__ import annotations

from group_harness import GroupHarness, assignment_of

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_model import GroupConfig


def settled(h: GroupHarness) -> None:
    """a (instance ia) and b (instance ib) joined and reconciled over topic t."""
    h.join("a", instance_id="ia")
    h.join("b", instance_id="ib")
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": range(h.topics["t"])}))["t"]
    h.heartbeat("a", 1, owned={"t": kept})
    h.heartbeat("b", 2, owned={})


def refused(h: GroupHarness, member_id: str, instance_id: str, code: ErrorCode) -> str:
    before = len(h.log)
    answer = h.heartbeat(member_id, -2, group_instance_id=instance_id)
    assert answer.error_code == code, answer
    assert len(h.log) == before, "a refused leave writes nothing"
    return answer.error_message


def test_an_unknown_instance_id_is_an_unknown_member() -> None:
    h = GroupHarness({"t": 4})
    settled(h)
    message = refused(h, "c", "ic", ErrorCode.UNKNOWN_MEMBER_ID)
    assert "instance id 'ic' is unknown" in message
    # A known member id with an instance id nobody holds: Kafka looks the member up by instance.
    refused(h, "a", "ic", ErrorCode.UNKNOWN_MEMBER_ID)
    assert h.member("a").member_epoch == 2


def test_a_group_that_does_not_exist_has_no_such_member() -> None:
    h = GroupHarness({"t": 4})
    refused(h, "a", "ia", ErrorCode.UNKNOWN_MEMBER_ID)
    assert h.state.groups == {}


def test_an_instance_id_held_by_another_member_is_fenced() -> None:
    h = GroupHarness({"t": 4})
    settled(h)
    message = refused(h, "a", "ib", ErrorCode.FENCED_INSTANCE_ID)
    assert "held by member 'b'" in message
    assert h.member("b").member_epoch == 2 and h.member("a").member_epoch == 2


def test_the_consumer_replaced_under_its_instance_id_is_fenced() -> None:
    h = GroupHarness({"t": 4})
    settled(h)
    assert h.heartbeat("a", -2, group_instance_id="ia").member_epoch == -2
    assert h.join("a2", instance_id="ia").error_code == ErrorCode.NONE
    # The old consumer's retried -2 must not send the new one away.
    refused(h, "a", "ia", ErrorCode.FENCED_INSTANCE_ID)
    assert h.member("a2").member_epoch == 2 and "a" not in h.group().members


def test_a_repeated_leave_is_answered_again_without_a_write() -> None:
    h = GroupHarness({"t": 4})
    settled(h)
    assert h.heartbeat("a", -2, group_instance_id="ia").member_epoch == -2
    before = len(h.log)
    answer = h.heartbeat("a", -2, group_instance_id="ia")
    assert answer.error_code == ErrorCode.NONE and answer.member_epoch == -2
    assert len(h.log) == before


def test_a_leave_after_the_session_expired_finds_no_member() -> None:
    h = GroupHarness({"t": 4}, GroupConfig(session_timeout_ms=30_000))
    settled(h)
    h.heartbeat("a", -2, group_instance_id="ia")
    h.now_ms += 30_000
    h.heartbeat("b", 2, owned={"t": []})
    h.expire()
    assert "a" not in h.group().members
    refused(h, "a", "ia", ErrorCode.UNKNOWN_MEMBER_ID)


def test_the_replaced_consumer_heartbeating_on_is_fenced_not_sent_to_rejoin() -> None:
    """Kafka's heartbeat of a static member: the member is found by its instance id, and a
    request from another member id than the one holding it is FENCED_INSTANCE_ID (fatal: two
    consumers share a group.instance.id). UNKNOWN_MEMBER_ID made the old consumer rejoin, and
    take the instance id back whenever the new one was between a -2 and its return."""
    h = GroupHarness({"t": 4})
    settled(h)
    assert h.heartbeat("a", -2, group_instance_id="ia").member_epoch == -2
    assert h.join("a2", instance_id="ia").error_code == ErrorCode.NONE
    before = len(h.log)
    answer = h.heartbeat("a", 2, owned={"t": []}, group_instance_id="ia")
    assert answer.error_code == ErrorCode.FENCED_INSTANCE_ID, answer
    assert "held by member 'a2'" in answer.error_message
    assert len(h.log) == before
