"""Goal: offsets.retention.minutes counts from the moment a group was left empty (Kafka's
KIP-211, and what the setting's documentation promises), not from the commit: a group whose
members stopped committing a partition long ago (nothing new to read there) keeps that offset for
the whole retention period after its last member leaves, so a deploy that stops every consumer
for a minute does not send them back to auto.offset.reset. An offset committed while the group
is empty (an admin reset) counts from its commit. A coordinator that loads the partition does not
know since when a group has been empty: it starts the clock again (never expires early).

Method: GroupHarness scenarios with a manual clock; `expire` is called as the runtime's timer
loop calls it, and the group's offsets are inspected.
"""

from __future__ import annotations

from group_harness import GroupHarness

from samsa.services.coordinator.group_model import GroupConfig

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


def test_a_loaded_empty_group_gets_a_fresh_retention_period() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=RETENTION_MS))
    h.join("a")
    h.commit("a", 1, {("t", 0): 7})
    h.now_ms += 5 * RETENTION_MS
    h.heartbeat("a", -1)
    h.fail_over()  # the new coordinator cannot know when the group emptied
    h.now_ms += 1
    h.expire()
    assert committed(h) == {("t", 0): 7}
    h.now_ms += RETENTION_MS
    h.expire()
    assert committed(h) == {}, "retention ran out a full period after the load"
