"""Goal: the `__consumer_offsets` record codec round-trips every record kind, writes the same bytes
for the same record whatever order its maps were built in, and refuses garbage with ValueError
(bytes that do not parse, no kind set, a value of another kind than its key, a writer-epoch
tombstone) — so replay only ever sees well-formed records.

Method: one record of each kind built with the module's constructors, encoded and decoded back;
hand-made malformed keys and values fed to `decode`.
"""

from __future__ import annotations

import pytest

from samsa.services.coordinator import group_records as records
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g

ASSIGNED = [c.TopicPartitions(topic="a", partitions=[0, 2]), c.TopicPartitions(topic="b")]

EVERY_KIND = [
    records.offset_commit(
        "g",
        "t",
        3,
        g.OffsetCommitValue(
            committed_offset=42, committed_leader_epoch=7, metadata="m", commit_timestamp_ms=9
        ),
    ),
    records.group_metadata("g", g.GroupMetadataValue(group_epoch=5, subscription_digest=b"\x01")),
    records.member_metadata(
        "g",
        "m1",
        g.MemberMetadataValue(
            group_instance_id="i",
            client_id="c",
            subscription=c.ConsumerGroupSubscription(topic_regex="t.*"),
            rebalance_timeout_ms=100,
            server_assignor="range",
        ),
    ),
    records.target_assignment_metadata("g", g.TargetAssignmentMetadataValue(assignment_epoch=4)),
    records.target_assignment_member("g", "m1", g.TargetAssignmentMemberValue(partitions=ASSIGNED)),
    records.current_assignment(
        "g",
        "m1",
        g.CurrentAssignmentValue(
            member_epoch=4,
            previous_member_epoch=3,
            state=g.MEMBER_RECONCILE_STATE_UNREVOKED_PARTITIONS,
            assigned_partitions=ASSIGNED,
            partitions_pending_revocation=[c.TopicPartitions(topic="c", partitions=[1])],
        ),
    ),
    records.writer_epoch(2, 17),
]


@pytest.mark.parametrize("record", EVERY_KIND, ids=lambda r: records.key_kind(r[0]))
def test_every_kind_round_trips(record: records.GroupRecord) -> None:
    key, value = records.encode(record)
    assert value is not None
    assert records.decode(key, value) == record


@pytest.mark.parametrize("record", EVERY_KIND[:6], ids=lambda r: records.key_kind(r[0]))
def test_tombstones_round_trip_as_none(record: records.GroupRecord) -> None:
    key, value = records.encode((record[0], None))
    assert value is None
    assert records.decode(key, None) == (record[0], None)


def test_member_tombstones_come_in_kip_848_order() -> None:
    kinds = [records.key_kind(key) for key, _ in records.member_tombstones("g", "m")]
    assert kinds == ["current_assignment", "target_assignment_member", "member_metadata"]


def test_equal_records_are_equal_bytes() -> None:
    one = g.GroupRecordKey(offset_commit=g.OffsetCommitKey(group_id="g", topic="t", partition=1))
    other = g.GroupRecordKey()
    other.offset_commit.partition = 1  # fields set in another order
    other.offset_commit.topic = "t"
    other.offset_commit.group_id = "g"
    assert records.encode((one, None)) == records.encode((other, None))
    assert records.encode(EVERY_KIND[0]) == records.encode(
        records.decode(*records.encode(EVERY_KIND[0]))
    )


def test_garbage_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="key does not parse"):
        records.decode(b"\xff\xff\xff", None)
    key, _ = records.encode(EVERY_KIND[0])
    with pytest.raises(ValueError, match="value does not parse"):
        records.decode(key, b"\x0a\xff")


def test_a_key_without_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="no kind"):
        records.decode(b"", None)


def test_a_value_without_kind_is_refused() -> None:
    key, _ = records.encode(EVERY_KIND[1])
    with pytest.raises(ValueError, match="has no kind"):
        records.decode(key, b"")


def test_a_value_of_another_kind_is_refused() -> None:
    key, _ = records.encode(EVERY_KIND[1])  # group_metadata key
    _, value = records.encode(EVERY_KIND[3])  # target_assignment_metadata value
    with pytest.raises(ValueError, match="target_assignment_metadata under a group_metadata"):
        records.decode(key, value)
    with pytest.raises(ValueError):
        records.encode((EVERY_KIND[1][0], EVERY_KIND[3][1]))


def test_the_writer_epoch_is_never_a_tombstone() -> None:
    key, _ = records.encode(EVERY_KIND[-1])
    with pytest.raises(ValueError, match="cannot be a tombstone"):
        records.decode(key, None)
