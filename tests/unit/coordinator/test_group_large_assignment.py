"""Goal: a member's target assignment too large for one record of `__consumer_offsets` fails its
group's heartbeats, not the partition. A member's target (and its current assignment, which can
hold its old and new targets' partitions) is one record; a regex matching thousands of topics
with long names made it larger than the topic's max.message.bytes, which the broker refuses
(MESSAGE_TOO_LARGE): that failed the writer of the partition, every group on it answered
NOT_COORDINATOR while it reloaded, and the member's next heartbeat did it again. A member whose
target would be over TARGET_RECORD_BYTES_MAX (half of what a heartbeat, which reports what the
member owns, may carry) is now assigned nothing (the other members share its partitions) and
each of its heartbeats is answered MESSAGE_TOO_LARGE, saying how large and what to change; every
record stays within the limit.

Method: GroupHarness heartbeats (each compared with a replay of its records).
"""

from __future__ import annotations

from group_harness import GroupHarness

from samsa.common import limits
from samsa.common.errors import ErrorCode

LONG = "x" * 230
# 5,000 topics of one partition with 240-character names: about 1.2 MB of topic names.
MANY_TOPICS = {f"{LONG}{number:06d}": 1 for number in range(5_000)}


def largest_record(h: GroupHarness) -> int:
    return max(len(key) + len(value or b"") for key, value in h.log)


def test_a_member_whose_target_would_not_fit_one_record_is_assigned_nothing() -> None:
    h = GroupHarness(MANY_TOPICS)
    response = h.join("a", regex=f"{LONG}.*")
    assert response.error_code == ErrorCode.MESSAGE_TOO_LARGE, response
    assert "'a'" in response.error_message
    assert largest_record(h) < limits.max_message_bytes_default // 2
    assert h.group().target == {}, "it is assigned nothing"
    assert h.group().assignment_epoch == h.group().group_epoch


def test_only_the_member_too_large_is_refused_the_others_share_its_partitions() -> None:
    topics = {**MANY_TOPICS, "small": 2}
    h = GroupHarness(topics)
    joined = h.join("b", topics=("small",))
    assert h.join("a", regex=f"{LONG}.*").error_code == ErrorCode.MESSAGE_TOO_LARGE
    again = h.heartbeat("a", h.member("a").member_epoch, owned={})
    assert again.error_code == ErrorCode.MESSAGE_TOO_LARGE, "each heartbeat says why"
    response = h.heartbeat("b", joined.member_epoch, owned={"small": [0, 1]})
    assert response.error_code == ErrorCode.NONE, response
    assert {t.topic: list(t.partitions) for t in response.assignment.topics} == {"small": [0, 1]}
    h.heartbeat("a", -1)
    assert h.join("c", topics=("small",)).error_code == ErrorCode.NONE
