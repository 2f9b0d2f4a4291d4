"""The record codec of `__consumer_offsets`: GroupRecordKey / GroupRecordValue ⇄ bytes.

Theory of operation. A coordinator's whole memory of a partition of `__consumer_offsets` is the
replay of that partition's records (group_records.proto). One record is a key and a value, or a
key and no value (a tombstone: it deletes what the key names). Both sides are serialized with
`deterministic=True`, so equal keys are equal bytes: log compaction compares key bytes, and two
coordinators writing the same record write the same bytes.

`decode` is the gate between the log and `group_replay.replay`: it accepts exactly the records this
module could have encoded and raises ValueError (naming what is wrong) for anything else — bytes
that do not parse, a key or value with no kind set, a value whose kind differs from the key's, or a
tombstone of the writer epoch (which is never deleted). Replay can then trust the shape.

The constructors below are the only way the handlers build records, so every record a coordinator
writes has a key and value of matching kinds by construction.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from samsa.v1 import group_records_pb2 as g

GroupRecord = tuple[g.GroupRecordKey, g.GroupRecordValue | None]

# Kinds that may be deleted by a tombstone (all but the writer epoch).
_DELETABLE_KINDS = frozenset(
    {
        "offset_commit",
        "group_metadata",
        "member_metadata",
        "target_assignment_metadata",
        "target_assignment_member",
        "current_assignment",
    }
)


def key_kind(key: g.GroupRecordKey) -> str:
    """The name of the key's oneof field ("offset_commit", ...); ValueError when none is set."""
    kind = key.WhichOneof("key")
    if kind is None:
        raise ValueError("group record key has no kind set")
    return kind


def check(record: GroupRecord) -> GroupRecord:
    """The record itself when it is well formed, else ValueError saying why."""
    key, value = record
    kind = key_kind(key)
    if value is None:
        if kind not in _DELETABLE_KINDS:
            raise ValueError(f"a {kind} record cannot be a tombstone")
        return record
    value_kind = value.WhichOneof("value")
    if value_kind is None:
        raise ValueError(f"group record value for a {kind} key has no kind set")
    if value_kind != kind:
        raise ValueError(f"group record value of kind {value_kind} under a {kind} key")
    return record


def encode(record: GroupRecord) -> tuple[bytes, bytes | None]:
    """Key and value bytes (value None for a tombstone), deterministic."""
    key, value = check(record)
    key_bytes = key.SerializeToString(deterministic=True)
    if value is None:
        return key_bytes, None
    return key_bytes, value.SerializeToString(deterministic=True)


def decode(key: bytes, value: bytes | None) -> GroupRecord:
    """The record the bytes hold; ValueError for garbage or mismatched kinds."""
    parsed_key = g.GroupRecordKey()
    try:
        parsed_key.ParseFromString(key)
    except DecodeError as error:
        raise ValueError(f"group record key does not parse: {error}") from error
    if value is None:
        return check((parsed_key, None))
    parsed_value = g.GroupRecordValue()
    try:
        parsed_value.ParseFromString(value)
    except DecodeError as error:
        raise ValueError(f"group record value does not parse: {error}") from error
    return check((parsed_key, parsed_value))


# --- constructors ------------------------------------------------------------------------------


def offset_commit(
    group_id: str, topic: str, partition: int, value: g.OffsetCommitValue | None
) -> GroupRecord:
    key = g.GroupRecordKey(
        offset_commit=g.OffsetCommitKey(group_id=group_id, topic=topic, partition=partition)
    )
    return key, None if value is None else g.GroupRecordValue(offset_commit=value)


def group_metadata(group_id: str, value: g.GroupMetadataValue | None) -> GroupRecord:
    key = g.GroupRecordKey(group_metadata=g.GroupKey(group_id=group_id))
    return key, None if value is None else g.GroupRecordValue(group_metadata=value)


def member_metadata(
    group_id: str, member_id: str, value: g.MemberMetadataValue | None
) -> GroupRecord:
    key = g.GroupRecordKey(member_metadata=g.GroupMemberKey(group_id=group_id, member_id=member_id))
    return key, None if value is None else g.GroupRecordValue(member_metadata=value)


def target_assignment_metadata(
    group_id: str, value: g.TargetAssignmentMetadataValue | None
) -> GroupRecord:
    key = g.GroupRecordKey(target_assignment_metadata=g.GroupKey(group_id=group_id))
    return key, None if value is None else g.GroupRecordValue(target_assignment_metadata=value)


def target_assignment_member(
    group_id: str, member_id: str, value: g.TargetAssignmentMemberValue | None
) -> GroupRecord:
    key = g.GroupRecordKey(
        target_assignment_member=g.GroupMemberKey(group_id=group_id, member_id=member_id)
    )
    return key, None if value is None else g.GroupRecordValue(target_assignment_member=value)


def current_assignment(
    group_id: str, member_id: str, value: g.CurrentAssignmentValue | None
) -> GroupRecord:
    key = g.GroupRecordKey(
        current_assignment=g.GroupMemberKey(group_id=group_id, member_id=member_id)
    )
    return key, None if value is None else g.GroupRecordValue(current_assignment=value)


def writer_epoch(coordinator_id: int, assignment_epoch: int) -> GroupRecord:
    key = g.GroupRecordKey(writer_epoch=g.WriterEpochKey())
    value = g.WriterEpochValue(coordinator_id=coordinator_id, assignment_epoch=assignment_epoch)
    return key, g.GroupRecordValue(writer_epoch=value)


def member_tombstones(group_id: str, member_id: str) -> list[GroupRecord]:
    """A member's removal, in KIP-848's order: current assignment, target, then metadata (replay
    drops the member at the last one)."""
    return [
        current_assignment(group_id, member_id, None),
        target_assignment_member(group_id, member_id, None),
        member_metadata(group_id, member_id, None),
    ]
