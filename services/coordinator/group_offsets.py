"""Committed offsets: OffsetCommit, OffsetFetch, the inputs of DescribeGroupLag, and retention.

Theory of operation. A commit is checked against the member epoch, not against ownership: a member
commits with the epoch of its last answer, and the coordinator stores the offset only when that is
the member's current epoch. A member still at an older epoch gets STALE_MEMBER_EPOCH (heartbeat
first: it may have lost partitions), one with a newer epoch than the coordinator knows — or one
the coordinator removed — gets FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID and must rejoin. Because a
member's epoch moves only after it has given up what it had to revoke, and a partition only goes
to a new member after that, a commit accepted at the member's current epoch comes from the
partition's one owner. A consumer outside the group protocol (member_id "" and epoch -1) may
commit only while the group has no members. A commit to a group that does not exist creates it
(group_metadata at epoch 0), as Kafka does.

Retention (Kafka's KIP-211): the offsets of a group with no members expire once the group has
been empty for `offsets_retention_ms`, or, for an offset committed while it was empty (an admin
reset, a consumer outside the group protocol), that long after the commit; in a group with
members, an offset of a topic no member subscribes to expires that long after its commit, as in
Kafka (`expired_offsets`). The caller keeps those an open transaction committed (its marker
applies them) and deletes a group left with no members, no offsets and nothing pending.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.coordinator import group_records as records
from samsa.services.coordinator.group_assignment import resolve
from samsa.services.coordinator.group_model import (
    LEAVE_EPOCH,
    ConsumerGroup,
    GroupConfig,
    GroupShard,
    TopicPartition,
    members_counted,
)
from samsa.services.coordinator.group_writer import GroupResult, RecordCollector
from samsa.services.runtime.caller import Visible, everything
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import group_records_pb2 as g
from samsa.v1 import transactions_pb2 as x

# The most bytes of UTF-8 an offset's metadata may take (coordinator.proto; Kafka's
# offset.metadata.max.bytes is 4096 too).
OFFSET_METADATA_BYTES_MAX = 4096

CommitResult = GroupResult[c.OffsetCommitResponse]

# What one offset's record takes in a batch beyond its group id, topic and metadata, and the
# largest batch __consumer_offsets takes (a commit is written as one): common/limits.py, which
# the SDKs read to split their commits under the same bound.
COMMIT_RECORD_OVERHEAD_BYTES_MAX = limits.offset_commit_record_overhead_bytes_max
COMMIT_BATCH_BYTES_MAX = limits.offset_commit_batch_bytes_max
# A topic id's bytes (16, KIP-516), as each offset's record carries it: for measuring a batch.
TOPIC_ID_SIZED = bytes(16)


def commit_size_problem(
    request: c.OffsetCommitRequest | x.TxnOffsetCommitRequest, now_ms: int
) -> str | None:
    """Why the records of `request` would not fit the one batch a commit is written as, or None.
    The broker would refuse that batch (MESSAGE_TOO_LARGE), which fails the writer of the whole
    partition, every group on it: such a commit is refused before it is applied. Exact (the
    batch is built) only when a quick upper bound does not settle it. A TxnOffsetCommit's batch
    (transactional, with no record of a new group) is never larger than the bound it is held to."""
    group_id = request.group_id
    group_bytes = len(group_id.encode())
    # The batch's header, and the record of a new group.
    bound = limits.offset_commit_batch_overhead_bytes + group_bytes
    for topic in request.topics:
        names_bytes = group_bytes + len(topic.name.encode()) + COMMIT_RECORD_OVERHEAD_BYTES_MAX
        for partition in topic.partitions:
            bound += names_bytes + len(partition.metadata.encode())
    if bound <= COMMIT_BATCH_BYTES_MAX:
        return None
    written = [records.group_metadata(group_id, g.GroupMetadataValue(empty_since_ms=now_ms))]
    for topic in request.topics:
        for partition in topic.partitions:
            value = g.OffsetCommitValue(
                committed_offset=partition.committed_offset,
                committed_leader_epoch=committed_epoch_of(partition),
                metadata=partition.metadata,
                commit_timestamp_ms=now_ms,
                topic_id=TOPIC_ID_SIZED,
            )
            written.append(records.offset_commit(group_id, topic.name, partition.partition, value))
    encoded = [records.encode(record) for record in written]
    size = len(
        build_batch(
            [value for _, value in encoded],
            keys=[key for key, _ in encoded],
            timestamps=now_ms,
            producer_id=0,  # the header's fields take the same bytes whatever their values
            producer_epoch=0,
            base_sequence=0,
        )
    )
    if size <= COMMIT_BATCH_BYTES_MAX:
        return None
    return (
        f"the commit's records take {size} bytes, over the {COMMIT_BATCH_BYTES_MAX} of one batch "
        "of __consumer_offsets: commit fewer partitions (or less metadata) per request"
    )


def commit_write_error(code: ErrorCode, message: str) -> tuple[ErrorCode, str]:
    """What an OffsetCommit or TxnOffsetCommit answers when writing its records failed with
    `code`: a batch refused as too large for `__consumer_offsets` is the request's own fault,
    Kafka's INVALID_COMMIT_OFFSET_SIZE (not retriable: commit fewer partitions per request)."""
    if code not in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return code, message
    return ErrorCode.INVALID_COMMIT_OFFSET_SIZE, (
        f"the commit's records were refused as too large for __consumer_offsets ({message}): "
        "commit fewer partitions (or less metadata) per request"
    )


def commit_offsets(
    shard: GroupShard,
    request: c.OffsetCommitRequest,
    now_ms: int,
    topics: Mapping[str, int],
    topic_ids: Mapping[str, bytes] | None = None,
) -> CommitResult:
    """`topic_ids`: the metadata's topic ids (name -> id), recorded with each offset
    (OffsetCommitValue.topic_id, KIP-516) so that a coordinator loading the partition after the
    topic was deleted or created again drops it (GroupCoordinatorShard.
    delete_offsets_of_other_topics)."""
    group = shard.groups.get(request.group_id)
    refusal = group_error(group, request)
    writer = RecordCollector(shard)
    response = c.OffsetCommitResponse()
    created = False
    for topic_request in request.topics:
        topic_result = response.topics.add(name=topic_request.name)
        for partition in topic_request.partitions:
            code, message = refusal or partition_error(topic_request.name, partition, topics)
            topic_result.partitions.add(
                partition=partition.partition,
                error_code=int(code),  # type: ignore[arg-type]
                error_message=message,
            )
            if code != ErrorCode.NONE:
                continue
            if group is None and not created:
                value = g.GroupMetadataValue(empty_since_ms=now_ms)  # empty from its creation
                writer.write(records.group_metadata(request.group_id, value))
                created = True
            value = g.OffsetCommitValue(
                committed_offset=partition.committed_offset,
                committed_leader_epoch=committed_epoch_of(partition),
                metadata=partition.metadata,
                commit_timestamp_ms=now_ms,
                topic_id=(topic_ids or {}).get(topic_request.name, b""),
            )
            writer.write(
                records.offset_commit(
                    request.group_id, topic_request.name, partition.partition, value
                )
            )
    return writer.result(response)


def group_error(
    group: ConsumerGroup | None, request: c.OffsetCommitRequest | x.TxnOffsetCommitRequest
) -> tuple[ErrorCode, str] | None:
    """The error every partition of the request gets, or None when the committer may commit."""
    if not 1 <= len(request.group_id) <= limits.group_id_length_max:
        return ErrorCode.INVALID_GROUP_ID, (
            f"group_id must be 1 to {limits.group_id_length_max} characters"
        )
    members = {} if group is None else group.members
    if not request.member_id and request.member_epoch == LEAVE_EPOCH:
        if members:
            return ErrorCode.UNKNOWN_MEMBER_ID, (
                f"group {request.group_id!r} has {members_counted(len(members))}: a commit from "
                "outside the group protocol (empty member_id, epoch -1) is allowed only while it "
                "has none"
            )
        return None
    member = members.get(request.member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID, (
            f"member {request.member_id!r} is not in group {request.group_id!r}: rejoin"
        )
    if request.member_epoch > member.member_epoch:
        return ErrorCode.FENCED_MEMBER_EPOCH, (
            f"member_epoch {request.member_epoch} is newer than the member's epoch "
            f"{member.member_epoch}: rejoin"
        )
    if request.member_epoch < member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH, (
            f"member_epoch {request.member_epoch} is older than the member's epoch "
            f"{member.member_epoch}: heartbeat, then commit what the member still owns"
        )
    return None


def committed_epoch_of(partition: c.OffsetCommitPartition | x.TxnOffsetCommitPartition) -> int:
    """The leader epoch a commit names, -1 when it names none. The field is optional because
    proto3 would read an unset one as 0, a real epoch: a member starting at the offset then
    fetched with last_fetched_epoch 0, and once the partition had a later leader the broker
    answered that epoch 0 ended below the offset, so the member went back there and read the
    records again (a transactional pipeline copied them twice)."""
    if partition.HasField("committed_leader_epoch"):
        return partition.committed_leader_epoch
    return -1


def partition_error(
    topic: str,
    partition: c.OffsetCommitPartition | x.TxnOffsetCommitPartition,
    topics: Mapping[str, int],
) -> tuple[ErrorCode, str]:
    if not 0 <= partition.partition < topics.get(topic, 0):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (
            f"{topic}-{partition.partition} does not exist"
        )
    if partition.committed_offset < 0:
        return ErrorCode.INVALID_REQUEST, (
            f"committed_offset {partition.committed_offset} is negative"
        )
    metadata_bytes = len(partition.metadata.encode())
    if metadata_bytes > OFFSET_METADATA_BYTES_MAX:
        return ErrorCode.OFFSET_METADATA_TOO_LARGE, (
            f"metadata is {metadata_bytes} bytes of UTF-8, over {OFFSET_METADATA_BYTES_MAX}"
        )
    return ErrorCode.NONE, ""


def fetch_offsets(
    shard: GroupShard, request: c.OffsetFetchRequest, visible: Visible = everything
) -> c.OffsetFetchResponse:
    """The requested offsets (-1 where nothing is committed), or every committed one of the
    topics `visible` admits (Kafka leaves out those the caller may not DESCRIBE; named topics
    were decided before the handler)."""
    if not 1 <= len(request.group_id) <= limits.group_id_length_max:
        return c.OffsetFetchResponse(
            error_code=int(ErrorCode.INVALID_GROUP_ID),  # type: ignore[arg-type]
            error_message=f"group_id must be 1 to {limits.group_id_length_max} characters",
        )
    group = shard.groups.get(request.group_id)
    offsets = {} if group is None else group.offsets
    response = c.OffsetFetchResponse()
    if request.topics:
        wanted = [(t.topic, list(t.partitions)) for t in request.topics]
    else:
        by_topic: dict[str, list[int]] = {}
        shown: dict[str, bool] = {}  # each topic asked once
        for topic, partition in sorted(offsets):
            if topic not in shown:
                shown[topic] = visible(topic)
            if shown[topic]:
                by_topic.setdefault(topic, []).append(partition)
        wanted = list(by_topic.items())
    for topic, partitions in wanted:
        topic_result = response.topics.add(name=topic)
        for partition in partitions:
            value = offsets.get((topic, partition))
            if value is None:
                topic_result.partitions.add(
                    partition=partition, committed_offset=-1, committed_leader_epoch=-1
                )
            else:
                topic_result.partitions.add(
                    partition=partition,
                    committed_offset=value.committed_offset,
                    committed_leader_epoch=value.committed_leader_epoch,
                    metadata=value.metadata,
                )
    return response


def lag_inputs(
    shard: GroupShard, group_id: str, visible: Visible = everything
) -> list[tuple[str, int, int, str]] | None:
    """(topic, partition, committed offset or -1, owning member or "") for every partition with
    a committed offset or an owner of the topics `visible` admits, sorted; None when the group
    does not exist. The adapter adds the log end offsets."""
    group = shard.groups.get(group_id)
    if group is None:
        return None
    keys: set[TopicPartition] = set(group.offsets) | set(group.owners)
    shown = {topic: visible(topic) for topic in {topic for topic, _ in keys}}
    keys = {key for key in keys if shown[key[0]]}
    rows = []
    for topic_partition in sorted(keys):
        value = group.offsets.get(topic_partition)
        committed = -1 if value is None else value.committed_offset
        rows.append((*topic_partition, committed, group.owners.get(topic_partition, "")))
    return rows


def expired_offsets(
    group: ConsumerGroup, now_ms: int, config: GroupConfig
) -> Iterator[TopicPartition]:
    """Offsets whose retention has run out. In a group without members: counted from the later
    of their commit and the moment the group was left empty (`empty_since_ms`). In a group with
    members (Kafka's cleanup of consumer groups): only offsets of topics no member subscribes to,
    by name or regex (a changed subscription, a deleted topic), counted from their commit."""
    since = 0 if group.members else group.empty_since_ms or 0
    if since + config.offsets_retention_ms >= now_ms:
        return
    old = [
        topic_partition
        for topic_partition, value in group.offsets.items()
        if value.commit_timestamp_ms + config.offsets_retention_ms < now_ms
    ]
    subscribed: dict[str, bool] = {}
    for topic_partition in sorted(old):
        topic = topic_partition[0]
        if topic not in subscribed:
            subscribed[topic] = any(
                topic in resolve(m.topic_names, m.topic_regex, {topic: 0})
                for m in group.members.values()
            )
        if not subscribed[topic]:
            yield topic_partition
