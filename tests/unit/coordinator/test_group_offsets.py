"""Goal: offsets are stored only from the member at its current epoch (STALE below, FENCED above,
UNKNOWN_MEMBER_ID for strangers, the empty-member -1 rule only while the group is empty), only for
partitions that exist and with sane values; fetch returns them (-1 where nothing is committed);
lag inputs cover committed and owned partitions; offsets of a group empty for the retention
period expire, not before (more in test_group_offset_retention.py); the admin reads report the
derived state and delete only empty groups; OffsetDelete deletes only the offsets of topics no
member subscribes to (by name or regex).

Method: GroupHarness scenarios; per-partition error codes and messages checked, the shard's
offsets and records inspected, failover equality at the end of the writing scenarios.
"""

from __future__ import annotations

from group_harness import GroupHarness, assignment_of

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_model import GroupConfig
from samsa.v1 import coordinator_pb2 as c


def codes(response: c.OffsetCommitResponse) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partitions]


def committed(h: GroupHarness) -> dict[tuple[str, int], int]:
    return {tp: v.committed_offset for tp, v in h.group().offsets.items()}


def test_commit_at_the_member_epoch_is_stored() -> None:
    h = GroupHarness({"t": 2})
    h.join("a")
    response = h.commit("a", 1, {("t", 0): 10, ("t", 1): 20})
    assert codes(response) == [ErrorCode.NONE, ErrorCode.NONE]
    assert committed(h) == {("t", 0): 10, ("t", 1): 20}
    assert h.group().offsets[("t", 0)].commit_timestamp_ms == h.now_ms
    h.assert_failover()


def test_stale_and_fenced_epochs_are_refused() -> None:
    h = GroupHarness({"t": 2})
    h.join("a")
    h.join("b")
    h.heartbeat("a", 1, owned={"t": [0, 1]})
    h.heartbeat("a", 1, owned={"t": [0]})  # a at epoch 2
    stale = h.commit("a", 1, {("t", 0): 5})
    assert codes(stale) == [ErrorCode.STALE_MEMBER_EPOCH]
    assert "heartbeat" in stale.topics[0].partitions[0].error_message
    assert codes(h.commit("a", 3, {("t", 0): 5})) == [ErrorCode.FENCED_MEMBER_EPOCH]
    assert codes(h.commit("zed", 2, {("t", 0): 5})) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert committed(h) == {}


def test_commit_from_outside_the_group_protocol_only_while_empty() -> None:
    h = GroupHarness({"t": 2})
    response = h.commit("", -1, {("t", 0): 7})  # creates the group
    assert codes(response) == [ErrorCode.NONE]
    assert h.group().group_epoch == 0 and committed(h) == {("t", 0): 7}
    h.join("a")
    refused = h.commit("", -1, {("t", 0): 8, ("t", 1): 8})
    assert codes(refused) == [ErrorCode.UNKNOWN_MEMBER_ID] * 2
    message = refused.topics[0].partitions[0].error_message
    assert "has 1 member:" in message and "allowed only while it has none" in message
    assert committed(h) == {("t", 0): 7}
    h.assert_failover()


def test_bad_partitions_and_values_are_refused_one_by_one() -> None:
    h = GroupHarness({"t": 2})
    request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
    topic = request.topics.add(name="t")
    topic.partitions.add(partition=0, committed_offset=1)
    topic.partitions.add(partition=2, committed_offset=1)
    topic.partitions.add(partition=1, committed_offset=-5)
    topic.partitions.add(partition=1, committed_offset=3, metadata="é" * 2049)
    request.topics.add(name="gone").partitions.add(partition=0, committed_offset=1)
    response = h.keep(h.coordinator.commit_offsets(request, h.now_ms, h.topics)).response
    assert codes(response) == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.OFFSET_METADATA_TOO_LARGE,  # Kafka's, for offset.metadata.max.bytes
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert "4098 bytes of UTF-8, over 4096" in response.topics[0].partitions[3].error_message
    assert committed(h) == {("t", 0): 1}


def test_invalid_group_id_refuses_every_partition() -> None:
    h = GroupHarness({"t": 1})
    request = c.OffsetCommitRequest(group_id="", member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=0, committed_offset=1)
    result = h.coordinator.commit_offsets(request, h.now_ms, h.topics)
    assert codes(result.response) == [ErrorCode.INVALID_GROUP_ID] and result.records == []


def test_fetch_requested_and_all() -> None:
    h = GroupHarness({"t": 3})
    h.commit("", -1, {("t", 2): 9})
    request = c.OffsetFetchRequest(group_id="g")
    request.topics.add(topic="t", partitions=[0, 2])
    fetched = h.coordinator.fetch_offsets(request)
    assert [(p.partition, p.committed_offset) for p in fetched.topics[0].partitions] == [
        (0, -1),
        (2, 9),
    ]
    every = h.coordinator.fetch_offsets(c.OffsetFetchRequest(group_id="g"))
    assert [(t.name, p.partition) for t in every.topics for p in t.partitions] == [("t", 2)]
    unknown = h.coordinator.fetch_offsets(c.OffsetFetchRequest(group_id="nope"))
    assert unknown.error_code == ErrorCode.NONE and not unknown.topics
    bad = h.coordinator.fetch_offsets(c.OffsetFetchRequest(group_id=""))
    assert bad.error_code == ErrorCode.INVALID_GROUP_ID


def test_lag_inputs_cover_committed_and_owned_partitions() -> None:
    h = GroupHarness({"t": 3, "u": 1})
    h.commit("", -1, {("u", 0): 4})
    h.join("a", topics=["t"])
    h.commit("a", 1, {("t", 1): 6})
    assert h.coordinator.lag_inputs("g") == [
        ("t", 0, -1, "a"),
        ("t", 1, 6, "a"),
        ("t", 2, -1, "a"),
        ("u", 0, 4, ""),
    ]
    assert h.coordinator.lag_inputs("nope") is None


def test_offsets_expire_after_retention_only_when_the_group_is_empty() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=1000))
    h.join("a")
    h.commit("a", 1, {("t", 0): 3})
    h.now_ms += 1001
    h.heartbeat("a", 1, owned={"t": [0]})
    assert not h.expire().records  # a member is there: offsets stay
    h.heartbeat("a", -1)
    h.now_ms += 1000
    assert not h.expire().records  # empty for 1000 ms: retention counts from the leave
    h.now_ms += 1
    h.expire()  # empty for longer than the retention: the offset goes, the group too
    assert h.state.groups == {}
    h.assert_failover()


def test_offsets_of_an_empty_group_are_kept_within_retention() -> None:
    h = GroupHarness({"t": 1}, GroupConfig(offsets_retention_ms=1000))
    h.commit("", -1, {("t", 0): 3})
    h.now_ms += 1000
    assert not h.expire().records
    assert committed(h) == {("t", 0): 3}
    h.now_ms += 1
    h.expire()
    assert h.state.groups == {}


def test_describe_and_list_report_the_derived_state() -> None:
    h = GroupHarness({"t": 2})
    h.commit("", -1, {("t", 0): 1})
    h.join("a")
    h.join("b", client_id="cb")
    described = h.coordinator.describe_groups(["g", "nope"]).groups
    group, missing = described
    assert group.state == c.CONSUMER_GROUP_STATE_RECONCILING  # a must still revoke
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    assert [m.member_id for m in group.members] == ["a", "b"]
    assert group.members[1].client_id == "cb"
    assert sum(len(m.target_assignment[0].partitions) for m in group.members) == 2
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert missing.state == c.CONSUMER_GROUP_STATE_DEAD
    kept = assignment_of(h.heartbeat("a", 1, owned={"t": [0, 1]}))["t"]
    h.heartbeat("a", 1, owned={"t": kept})
    h.heartbeat("b", 2, owned={})
    assert h.coordinator.describe_groups(["g"]).groups[0].state == c.CONSUMER_GROUP_STATE_STABLE
    h.topics["t"] = 3  # not seen by the group until a heartbeat
    h.heartbeat("b", 2, subscription=c.ConsumerGroupSubscription(topic_names=["t", "x"]))
    h.heartbeat("a", -1)
    assert h.coordinator.describe_groups(["g"]).groups[0].state == c.CONSUMER_GROUP_STATE_ASSIGNING
    h.commit("", -1, {("t", 0): 1})
    listed = h.coordinator.list_groups([c.CONSUMER_GROUP_STATE_ASSIGNING])
    assert [(g.group_id, g.member_count) for g in listed.groups] == [("g", 1)]
    assert not h.coordinator.list_groups([c.CONSUMER_GROUP_STATE_EMPTY]).groups
    h.heartbeat("b", -1)
    assert h.coordinator.list_groups().groups[0].state == c.CONSUMER_GROUP_STATE_EMPTY


def test_delete_groups() -> None:
    h = GroupHarness({"t": 2})
    h.commit("", -1, {("t", 0): 1, ("t", 1): 2})
    h.group_id = "busy"
    h.join("a")
    result = h.keep(h.coordinator.delete_groups(["g", "busy", "nope"]))
    assert [(g.group_id, g.error_code) for g in result.response.groups] == [
        ("g", ErrorCode.NONE),
        ("busy", ErrorCode.NON_EMPTY_GROUP),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    assert "'busy' has 1 member: they must leave first" in result.response.groups[1].error_message
    assert set(h.state.groups) == {"busy"}
    assert all(value is None for _, value in result.records)
    h.assert_failover()


def deleted(result) -> list[tuple[str, int, int]]:
    return [(p.topic, p.partition, p.error_code) for p in result.response.partitions]


def test_offset_delete_spares_the_topics_members_subscribe_to() -> None:
    h = GroupHarness({"t": 2, "u": 1, "orders.eu": 1})
    h.join("a")  # subscribes to t
    h.heartbeat("a", 1, owned={"t": [0, 1]})
    # Offsets of u and orders.eu as if left from an earlier subscription (a commit is checked
    # against the member epoch, not against ownership).
    h.commit("a", 1, {("t", 0): 5, ("u", 0): 5, ("orders.eu", 0): 5})
    h.join("b", regex=r"orders\..*")
    result = h.keep(
        h.coordinator.delete_offsets("g", [("u", 0), ("t", 0), ("orders.eu", 0), ("u", 0)])
    )
    assert deleted(result) == [
        ("orders.eu", 0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),  # by b's regex
        ("t", 0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),  # by a's name
        ("u", 0, ErrorCode.NONE),
    ]
    assert "subscribes to 't'" in result.response.partitions[1].error_message
    tombstones = [(k.offset_commit.topic, k.offset_commit.partition, v) for k, v in result.records]
    assert tombstones == [("u", 0, None)]
    assert set(committed(h)) == {("t", 0), ("orders.eu", 0)}


def test_offset_delete_of_an_empty_group_and_of_nothing_committed() -> None:
    h = GroupHarness({"t": 2})
    h.commit("", -1, {("t", 0): 7})
    result = h.keep(h.coordinator.delete_offsets("g", [("t", 0), ("t", 1)]))
    assert deleted(result) == [("t", 0, ErrorCode.NONE), ("t", 1, ErrorCode.NONE)]
    assert len(result.records) == 1, "a tombstone only where something was committed"
    assert committed(h) == {}
    # The group stays until the expiry pass deletes it (empty, nothing committed), as Kafka's.
    assert "g" in h.state.groups
    h.expire()
    assert "g" not in h.state.groups
    h.assert_failover()
    missing = h.coordinator.delete_offsets("nope", [("t", 0)])
    assert missing.response.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert (missing.records, list(missing.response.partitions)) == ([], [])
