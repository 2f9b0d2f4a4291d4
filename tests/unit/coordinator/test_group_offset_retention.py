"""Goal: offsets.retention.minutes counts from the moment a group was left empty (Kafka's
KIP-211, and what the setting's documentation promises), not from the commit: a group whose
members stopped committing a partition long ago (nothing new to read there) keeps that offset for
the whole retention period after its last member leaves, so a deploy that stops every consumer
for a minute does not send them back to auto.offset.reset. An offset committed while the group
is empty (an admin reset) counts from its commit. A coordinator that loads the partition goes on
from when the group was left empty, which the group_metadata record written then says.

Method: GroupHarness scenarios with a manual clock; `expire` is called as the runtime's timer
loop calls it, and the group's offsets are inspected.
"""

from __future__ import annotations

from group_harness import GroupHarness

from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.group_records import encode
from samsa.services.coordinator.group_shard import EXPIRE_RECORDS_MAX, GroupCoordinatorShard
from samsa.v1 import coordinator_pb2 as c

RETENTION_MS = 10_000


def committed(h: GroupHarness) -> dict[tuple[str, int], int]:
    group = h.state.groups.get(h.group_id)
    return {} if group is None else {tp: v.committed_offset for tp, v in group.offsets.items()}


def test_an_old_offset_is_kept_for_the_retention_period_after_the_group_empties() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.join("a")
    h.commit("a", 1, {("t", 0): 7})
    h.now_ms += 5 * RETENTION_MS  # nothing new on t-0: the member never commits it again
    h.heartbeat("a", 1, owned={"t": [0]})
    h.expire()
    h.heartbeat("a", -1)  # the last member leaves (a restart, say)
    h.now_ms += 1
    h.expire()
    assert committed(h) == {("t", 0): 7}, "the group has been empty for 1 ms only"
    h.now_ms += RETENTION_MS - 1
    h.expire()
    assert committed(h) == {("t", 0): 7}
    h.now_ms += 2
    h.expire()
    assert h.state.groups == {}, "empty for longer than the retention: offsets and group go"
    h.assert_failover()


def test_a_member_that_rejoins_in_time_restarts_the_clock() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.join("a")
    h.commit("a", 1, {("t", 0): 7})
    h.heartbeat("a", -1)
    h.now_ms += RETENTION_MS // 2
    h.expire()
    h.join("b")
    h.now_ms += RETENTION_MS
    h.expire()
    h.heartbeat("b", -1)
    h.now_ms += RETENTION_MS // 2
    h.expire()
    assert committed(h) == {("t", 0): 7}


def test_an_offset_committed_while_the_group_is_empty_counts_from_its_commit() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.commit("", -1, {("t", 0): 3})
    h.expire()
    h.now_ms += RETENTION_MS // 2
    h.commit("", -1, {("t", 0): 4})  # reset-offsets on the empty group
    h.now_ms += RETENTION_MS
    h.expire()
    assert committed(h) == {("t", 0): 4}
    h.now_ms += RETENTION_MS // 2 + 1
    h.expire()
    assert committed(h) == {}


def test_a_loaded_empty_group_keeps_the_time_it_was_left_empty() -> None:
    """The group_metadata record written as the last member leaves says when: a coordinator
    that loads the partition goes on counting from it. (A fresh period at each load kept the
    offsets of every empty group for ever on a cluster restarted more often than the retention
    period.)"""
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.join("a")
    h.commit("a", 1, {("t", 0): 7})
    h.now_ms += 5 * RETENTION_MS
    h.heartbeat("a", -1)
    h.now_ms += RETENTION_MS // 2
    h.fail_over()
    h.expire()
    assert committed(h) == {("t", 0): 7}
    h.now_ms += RETENTION_MS // 2 + 1
    h.expire()
    assert committed(h) == {}, "retention ran out a period after the group emptied"


def test_a_group_emptied_by_expiry_keeps_that_time_across_a_load() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.join("a")
    h.commit("a", 1, {("t", 0): 7})
    h.now_ms += h.coordinator.config.session_timeout_ms
    h.expire()  # the member's session ran out: the group is empty from now
    h.now_ms += RETENTION_MS // 2
    h.fail_over()
    h.now_ms += RETENTION_MS // 2 + 1
    h.expire()
    assert committed(h) == {}


def test_offsets_committed_to_an_empty_group_count_from_their_commit_across_a_load() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.commit("", -1, {("t", 0): 3})
    h.now_ms += RETENTION_MS // 2
    h.fail_over()
    h.now_ms += RETENTION_MS // 2 + 1
    h.expire()
    assert committed(h) == {}


def test_offsets_of_a_topic_no_member_subscribes_to_expire_in_a_live_group() -> None:
    """Kafka's cleanup for consumer groups: an offset of a topic the group no longer subscribes
    to (a changed subscription, a deleted topic a regex matched) expires its retention after its
    commit even while the group has members; offsets of subscribed topics stay."""
    h = GroupHarness({"a": 1, "b": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.join("m", topics=("a", "b"))
    epoch = h.heartbeat("m", 1, owned={}).member_epoch
    h.commit("m", epoch, {("a", 0): 1, ("b", 0): 2})
    h.heartbeat(
        "m",
        epoch,
        owned={"a": [0], "b": [0]},
        subscription=c.ConsumerGroupSubscription(topic_names=["a"]),
    )
    h.now_ms += RETENTION_MS // 2
    response = h.heartbeat("m", h.member("m").member_epoch, owned={"a": [0]})
    assert response.error_code == 0
    h.expire()
    assert committed(h) == {("a", 0): 1, ("b", 0): 2}, "b's offset is not past retention yet"
    h.now_ms += RETENTION_MS // 2 + 1
    h.heartbeat("m", h.member("m").member_epoch, owned={"a": [0]})
    h.expire()
    assert committed(h) == {("a", 0): 1}, "a member still subscribes to a; nobody to b"
    h.now_ms += 5 * RETENTION_MS
    h.heartbeat("m", h.member("m").member_epoch, owned={"a": [0]})
    h.expire()
    assert committed(h) == {("a", 0): 1}
    h.assert_failover()


def test_a_regex_subscription_keeps_the_offsets_of_the_topics_it_matches() -> None:
    h = GroupHarness({"t1": 1, "other": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.commit("", -1, {("t1", 0): 1, ("other", 0): 2})  # before the group had members
    h.join("m", regex="t.*")
    h.now_ms += RETENTION_MS + 1
    h.heartbeat("m", h.member("m").member_epoch, owned=h.member("m").assigned)
    h.expire()
    assert committed(h) == {("t1", 0): 1}
    h.assert_failover()


def test_one_expiry_writes_at_most_one_batch_and_the_next_goes_on() -> None:
    """An expiry's records are written as one atomic batch only when they fit one; 12,000
    offsets expiring together are tombstoned over several calls of `expire` (the runtime calls
    it again at once while deadlines have passed, else within a second)."""
    h = GroupHarness({"t": 12_000}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    for first in range(0, 12_000, 2_000):
        h.commit("", -1, {("t", number): number for number in range(first, first + 2_000)})
    h.now_ms += RETENTION_MS + 1
    calls = 0
    while h.state.groups:
        written = h.coordinator.expire(h.now_ms).records
        h.log.extend(encode(record) for record in written)
        assert 0 < len(written) <= EXPIRE_RECORDS_MAX + 8  # a removal or deletion finished
        calls += 1
    assert calls > 1
    h.assert_failover()


def test_members_expiring_together_are_removed_over_several_calls() -> None:
    config = GroupConfig(session_timeout_ms=30_000)
    shard = GroupCoordinatorShard(config)
    subscription = c.ConsumerGroupSubscription(topic_names=["t"])
    for number in range(400):
        request = c.ConsumerGroupHeartbeatRequest(
            group_id="g",
            member_id=f"m{number:04d}",
            member_epoch=0,
            subscription=subscription,
            rebalance_timeout_ms=10_000,
        )
        assert shard.heartbeat(request, 0, {"t": 8}).response.error_code == 0
    calls = 0
    while "g" in shard.state.groups:
        written = shard.expire(30_000).records
        assert 0 < len(written) <= EXPIRE_RECORDS_MAX + 8
        calls += 1
    assert calls == 2  # 400 removals of 4 records each, then the last ones and the deletion
