"""Fetched bytes into the records an application sees — pure: no I/O, no state.

A Fetch answer carries a partition's stored batches as they are on the broker. `decode_records`
decodes them a batch at a time, column-wise (`decode_batch` keeps lengths and offsets as arrays),
and the only per-record Python is building the `ConsumerRecord` tuples with `map`. What the
application never sees: transaction markers (control batches), the records of aborted
transactions when reading read_committed (the answer's aborted list), and the records of the
first batch before the offset asked for (a fetch returns whole batches). A batch that cannot be
decoded ends the records there: those ahead of it are returned with the offset it starts at (a
batch cut at the end of an answer, fetched again from there, is one), and when it comes first the
error says which offsets to seek past. fetch_answers.py (the consumer's fetch answers) and
partition_range.py (a range read, the Spark source's) both decode here.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from typing import NamedTuple

from samsa.common.errors import CorruptRecordError, SamsaError
from samsa.common.record.codec import RecordBatch, decode_batch
from samsa.common.record.header import unreadable_batch_offsets
from samsa.common.record.transaction_filter import AbortedTransactionFilter

TopicPartition = tuple[str, int]

# Kafka's TimestampType: what a record's `timestamp` is (the topic's message.timestamp.type).
CREATE_TIME, LOG_APPEND_TIME = 0, 1


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    # CREATE_TIME (the producer's) or LOG_APPEND_TIME (the broker's, stamped on append).
    timestamp_type: int = CREATE_TIME
    # The leader epoch of the batch holding it (Kafka's leaderEpoch()), -1 when unknown: commit
    # it beside offset + 1 (OffsetAndMetadata) so that a member resuming there can tell a log
    # truncated below it (KIP-320).
    leader_epoch: int = -1


def decode_records(
    tp: TopicPartition,
    data: bytes,
    from_offset: int,
    aborted: Iterable[tuple[int, int]] = (),
) -> tuple[list[ConsumerRecord], int, int | None]:
    """The records at or after `from_offset`, the last batch's leader epoch, and the offset of
    a batch that cannot be decoded (None when all could). Records ahead of such a batch are
    returned; when it comes first, CorruptRecordError says which offsets to seek past.
    Transaction markers are never returned, nor, given the answer's `aborted` transactions
    ((producer id, first offset): read_committed), the records of aborted transactions."""
    topic, partition = tp
    shown = AbortedTransactionFilter(aborted)
    records: list[ConsumerRecord] = []
    leader_epoch = -1
    position = 0
    # Past the last batch decoded: where an undecodable batch after it starts, even when its
    # header is cut off too (a fetch cut at its end) and so says nothing of its offsets.
    next_offset = from_offset
    new_tuple = tuple.__new__
    while position < len(data):
        try:
            batch = decode_batch(data, position)
        except SamsaError as error:
            corrupt_at = unreadable_batch_offsets(data, position, next_offset)
            if records:
                return records, leader_epoch, corrupt_at[0]
            raise CorruptRecordError(
                f"{topic}-{partition}: the stored batch at offsets {corrupt_at[0]}.."
                f"{corrupt_at[1]} cannot be decoded ({error}); seek to {corrupt_at[1] + 1} "
                "to skip it"
            ) from None
        position += batch.header.size_bytes
        next_offset = max(next_offset, batch.header.last_offset + 1)
        leader_epoch = batch.header.partition_leader_epoch
        if not _shown(shown, batch) or batch.header.last_offset < from_offset:
            continue
        columns = zip(
            repeat(topic),
            repeat(partition),
            batch.offsets(),
            batch.timestamps(),
            batch.keys,
            batch.values,
            batch.headers,
            repeat(LOG_APPEND_TIME if batch.header.is_log_append_time else CREATE_TIME),
            repeat(leader_epoch),
            strict=False,
        )
        chunk = list(map(new_tuple, repeat(ConsumerRecord), columns))
        if batch.header.base_offset < from_offset:
            chunk = [r for r in chunk if r.offset >= from_offset]
        records += chunk
    return records, leader_epoch, None


def _shown(shown: AbortedTransactionFilter, batch: RecordBatch) -> bool:
    """Whether the batch's records go to the application (never a marker, even a malformed
    one)."""
    try:
        return shown.batch_is_visible(batch)
    except SamsaError:
        return False  # a control batch whose marker record cannot be read
