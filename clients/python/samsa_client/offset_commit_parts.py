"""How an offset commit is split into requests the group coordinator takes (pure).

A coordinator refuses (RESOURCE_EXHAUSTED) an OffsetCommit naming more than
request_partitions_max partitions, a TxnOffsetCommit naming more than admin_request_items_max,
and a commit whose records would not fit the one batch of __consumer_offsets they are written
as. That last bound is computed from the names alone, as the coordinator computes it
(group_offsets.commit_size_problem, common/limits.py):

    offset_commit_batch_overhead_bytes + group id bytes
      + per partition (group id + topic name + metadata bytes
                       + offset_commit_record_overhead_bytes_max)
    <= offset_commit_batch_bytes_max

A commit under it is never refused for its size (the coordinator builds the batch to be exact
only past it). The parts keep the order given: callers send them one after the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from samsa.common import limits

TopicPartition = tuple[str, int]


def parts_of(
    partitions: Sequence[TopicPartition],
    count_max: int,
    sizes: Sequence[int] = (),
    size_max: int = 0,
) -> list[list[TopicPartition]]:
    """`partitions` in runs, in order, of at most `count_max` and, given each one's `sizes`, of
    at most `size_max` in all; a partition larger than that alone goes alone (to be refused)."""
    assert count_max > 0
    assert not sizes or len(sizes) == len(partitions)
    parts: list[list[TopicPartition]] = []
    total = 0
    for index, tp in enumerate(partitions):
        size = sizes[index] if sizes else 0
        if not parts or len(parts[-1]) >= count_max or total + size > size_max:
            parts.append([])
            total = 0
        parts[-1].append(tp)
        total += size
    return parts


def commit_parts_of(
    group_id: str, offsets: Mapping[TopicPartition, object], count_max: int
) -> list[list[TopicPartition]]:
    """The partitions of a commit of `offsets` (each an offset, or an OffsetAndMetadata whose
    metadata counts too) in the requests it goes in, in order: at most `count_max` each, and
    within the coordinator's byte bound (see the module docstring)."""
    group_bytes = len(group_id.encode())
    overhead = group_bytes + limits.offset_commit_record_overhead_bytes_max
    topic_bytes: dict[str, int] = {}
    sizes = []
    for (topic, _), at in offsets.items():
        if topic not in topic_bytes:
            topic_bytes[topic] = len(topic.encode())
        metadata = getattr(at, "metadata", "")
        sizes.append(overhead + topic_bytes[topic] + len(metadata.encode()))
    size_max = (
        limits.offset_commit_batch_bytes_max
        - limits.offset_commit_batch_overhead_bytes
        - group_bytes
    )
    return parts_of(list(offsets), count_max, sizes, size_max)
