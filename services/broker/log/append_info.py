"""Validate an append, then plan it: the bytes to write, the batches to index, the AppendInfo.

Theory of operation (Kafka's analyzeAndValidateRecords + LogValidator, without decoding a
record). An append is one or more concatenated batches. Everything is checked before anything is
written, so that a rejected append stores nothing:

- leader appends (`plan_leader_append`): every batch passes header.check_batch against the topic's
  max.message.bytes (framing, magic, attributes, CRC), carries dense offsets (last_offset_delta ==
  record_count - 1, as every producer writes them), is not a control batch (only the broker
  writes transaction markers, through `allow_control_batches`; a marker is one COMMIT or ABORT
  record of a transactional producer), is not transactional unless the caller verified the
  producer's transaction (`allow_transactional`, KIP-890), has a records section that
  every reader can decode (section_check.check_records: arrays, lengths, offset deltas, header
  keys; a compressed section is inflated once for it), on a compacted topic (`keys_required`)
  keys every record (Kafka's LogValidator refuses a null key there with INVALID_RECORD: the
  cleaner keeps the newest record per key, and drops keyless ones), and, under CreateTime, has a
  max_timestamp that is its records' largest (the time index trusts it) and records whose
  timestamps lie within the topic's bounds around the broker's clock (`timestamp_bounds`:
  KIP-937's message.timestamp.before.max.ms / after.max.ms, else INVALID_TIMESTAMP; markers,
  which the broker writes, are not held to them), and the whole append fits in one segment.
  A topic whose compression.type is `zstd` or `uncompressed` (`record_compression`) then gets
  each data batch of another codec recompressed (codec.recompress_batch: the section is
  inflated, compressed again, the header re-signed; Kafka's broker-side recompression), and the
  result is checked against max.message.bytes again. Then offsets are assigned from the log end
  offset and the leader epoch (and, under LogAppendTime, the append time) are stamped into the
  headers. Records are never decoded (a recompressed section is moved, not parsed).
- follower appends (`plan_follower_appends`): offsets were assigned by the leader; every batch
  passes check_batch against the hard batch limit (not the topic's max.message.bytes, so that a
  lowered setting cannot wedge replication of what the leader accepted), the first starts at or
  after the log end offset and each starts after the previous one ended. The records sections are
  not re-checked: the leader checked them, and the CRC proves they arrived as it stored them.
  For the same reason a fetched range larger than segment.bytes is not refused but planned as
  several appends of at most segment.bytes each, cut between batches, a lone batch larger than
  it alone (the leader wrote those under a larger segment.bytes): a follower catching up after
  segment.bytes was lowered refused them with RECORD_LIST_TOO_LARGE and refetched them for ever.

Copies: one bytearray copy of the append when headers must be rewritten across several batches or
re-signed (LogAppendTime); a single batch under CreateTime is stamped through a 61-byte header
copy written ahead of a memoryview of the rest (writev), so a 1 MiB batch is never copied.

Invariants of an AppendPlan: `pieces` concatenate to the bytes to store; `batches` lists each
stored batch with its position inside those bytes, in order, offsets strictly increasing.
"""

from __future__ import annotations

from typing import NamedTuple

from samsa.common import limits
from samsa.common.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    SamsaError,
)
from samsa.common.record.codec import decode_batch, read_control_marker, recompress_batch
from samsa.common.record.header import (
    CONTROL,
    HEADER_BYTES,
    NO_TIMESTAMP,
    TRANSACTIONAL,
    BatchHeader,
    check_batch,
    stamp_log_append_time,
    stamp_offsets,
)
from samsa.common.record.section_check import check_records

Piece = bytes | bytearray | memoryview
NO_CONTROL_TYPE = -1  # PlannedBatch.control_type of a data batch


class AppendInfo(NamedTuple):
    """What an append stored. `last_offset` is inclusive."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless the topic stamps LogAppendTime
    record_count: int
    size_bytes: int


class PlannedBatch(NamedTuple):
    """One batch as it will be stored; `position` is relative to the start of the append. The
    producer fields (-1 when the producer is not idempotent) are what the producer state checks
    before a byte is written, and rebuilds from on followers and on recovery."""

    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size_bytes: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool = False  # a transaction marker: a producer id and epoch, no sequence
    # A marker's type (codec.CONTROL_TYPE_ABORT or _COMMIT), read from its one record; the
    # log indexes aborted transactions by it. NO_CONTROL_TYPE for data batches.
    control_type: int = NO_CONTROL_TYPE


class AppendPlan(NamedTuple):
    pieces: list[Piece]
    batches: list[PlannedBatch]
    info: AppendInfo


def validate_batches(
    data: bytes, *, max_batch_bytes: int, segment_bytes: int
) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch in `data`, each checked by check_batch."""
    found = _checked_batches(data, max_batch_bytes)
    if len(data) > segment_bytes:  # after the per-batch checks: a lone big batch is one of them
        raise RecordTooLargeError(
            f"an append of {len(data)} bytes exceeds segment.bytes={segment_bytes}: send fewer "
            f"batches per request",
            ErrorCode.RECORD_LIST_TOO_LARGE,
        )
    return found


def _checked_batches(data: bytes, max_batch_bytes: int) -> list[tuple[int, BatchHeader]]:
    if not data:
        raise InvalidRecordError("an append needs at least one record batch; got 0 bytes")
    found = []
    position = 0
    while position < len(data):
        header = check_batch(data, position, max_batch_bytes=max_batch_bytes)
        found.append((position, header))
        position += header.size_bytes
    return found


def plan_leader_append(
    data: bytes,
    *,
    log_end_offset: int,
    leader_epoch: int,
    max_message_bytes: int,
    segment_bytes: int,
    log_append_time_ms: int | None,
    allow_control_batches: bool = False,
    allow_transactional: bool = False,
    record_compression: int | None = None,
    timestamp_bounds: tuple[int | None, int] | None = None,
    keys_required: bool = False,
) -> AppendPlan:
    """Validate producer batches and assign them offsets from `log_end_offset`. Control batches
    (transaction markers) are refused unless the broker itself writes them (Kafka's origin);
    transactional data batches unless the caller verified that the transaction coordinator
    added the partition to the producer's transaction (KIP-890): an unverified one would open a
    transaction nobody ends, and hold every read_committed reader at its first offset. With
    `keys_required` (cleanup.policy=compact) a data batch with a keyless record is refused."""
    found = validate_batches(data, max_batch_bytes=max_message_bytes, segment_bytes=segment_bytes)
    for position, header in found:
        if header.last_offset_delta != header.record_count - 1:
            raise InvalidRecordError(
                f"batch at position {position} has last_offset_delta {header.last_offset_delta} "
                f"for {header.record_count} records: a producer's offsets are dense (0..N-1)"
            )
        if (
            header.attributes & TRANSACTIONAL
            and not header.attributes & CONTROL
            and not allow_transactional
        ):
            raise SamsaError(
                f"batch at position {position} is transactional, and no transaction coordinator "
                f"added this partition to producer {header.producer_id}'s transaction: call "
                "AddPartitionsToTxn first",
                ErrorCode.INVALID_TXN_STATE,
            )
        if log_append_time_ms is None and header.is_log_append_time:
            raise InvalidRecordError(
                f"batch at position {position} is marked LogAppendTime, but the topic's "
                "message.timestamp.type is CreateTime: a producer sends CreateTime batches"
            )
        if header.attributes & CONTROL and not allow_control_batches:
            raise InvalidRecordError(
                f"batch at position {position} is a control batch: only the broker writes "
                "transaction markers"
            )
        lowest = None if timestamp_bounds is None else timestamp_bounds[0]
        timestamps = check_records(
            data,
            position,
            header,
            with_smallest=lowest is not None,
            keys_required=keys_required and not header.attributes & CONTROL,
        )
        if header.attributes & CONTROL:
            _check_marker(data, position, header)
        elif timestamps is not None and timestamp_bounds is not None:
            _check_timestamp_bounds(position, timestamps, timestamp_bounds)
    if record_compression is not None and any(
        _needs_recompression(header, record_compression) for _, header in found
    ):
        data = b"".join(
            recompress_batch(data, position, header, record_compression)
            if _needs_recompression(header, record_compression)
            else data[position : position + header.size_bytes]
            for position, header in found
        )
        found = validate_batches(
            data, max_batch_bytes=max_message_bytes, segment_bytes=segment_bytes
        )
    if len(found) == 1 and log_append_time_ms is None:
        prefix = bytearray(data[:HEADER_BYTES])
        stamp_offsets(prefix, 0, log_end_offset, leader_epoch)
        pieces: list[Piece] = [prefix, memoryview(data)[HEADER_BYTES:]]
    else:
        buffer = bytearray(data)
        base_offset = log_end_offset
        for position, header in found:
            stamp_offsets(buffer, position, base_offset, leader_epoch)
            if log_append_time_ms is not None:
                end = position + header.size_bytes
                stamp_log_append_time(buffer, position, end, log_append_time_ms)
            base_offset += header.last_offset_delta + 1
        pieces = [buffer]
    batches = []
    base_offset = log_end_offset
    for position, header in found:
        max_timestamp = header.max_timestamp if log_append_time_ms is None else log_append_time_ms
        last_offset = base_offset + header.last_offset_delta
        batches.append(
            PlannedBatch(
                position,
                base_offset,
                last_offset,
                max_timestamp,
                header.size_bytes,
                leader_epoch,
                *_producer_fields(header),
                _control_type(data, position, header),
            )
        )
        base_offset = last_offset + 1
    return AppendPlan(pieces, batches, _summarise(batches, found, log_append_time_ms))


def _check_timestamp_bounds(
    position: int, timestamps: tuple[int | None, int], bounds: tuple[int | None, int]
) -> None:
    """Kafka's LogValidator.validateTimestamp (KIP-937), on a batch's extremes (no lower
    bound: None, and the smallest was not taken)."""
    (smallest, largest), (lowest, highest) = timestamps, bounds
    if smallest is not None and lowest is not None and smallest < lowest:
        raise InvalidTimestampError(
            f"batch at position {position} has a record timestamp {smallest}, older than the "
            f"oldest this topic accepts now ({lowest}, the broker's clock minus "
            "message.timestamp.before.max.ms): fix the producer's timestamps or clock, or raise "
            "the topic's message.timestamp.before.max.ms"
        )
    if largest > highest:
        raise InvalidTimestampError(
            f"batch at position {position} has a record timestamp {largest}, later than the "
            f"latest this topic accepts now ({highest}, the broker's clock plus "
            "message.timestamp.after.max.ms): fix the producer's timestamps or clock, or raise "
            "the topic's message.timestamp.after.max.ms"
        )


def _needs_recompression(header: BatchHeader, compression: int) -> bool:
    """A data batch in another codec than the topic's (markers stay as the broker wrote them)."""
    return not header.attributes & CONTROL and header.compression != compression


def plan_follower_appends(
    data: bytes, *, log_end_offset: int, segment_bytes: int
) -> list[AppendPlan]:
    """Validate replicated batches, whose offsets the leader assigned, and plan them as appends
    of at most `segment_bytes` each (one, unless the leader's segments were larger)."""
    found = _checked_batches(data, limits.batch_bytes_max)
    next_offset = log_end_offset
    for position, header in found:
        if header.base_offset < next_offset:
            raise InvalidRecordError(
                f"replicated batch at position {position} starts at offset {header.base_offset}, "
                f"below {next_offset} (the log end offset or the previous batch's end)"
            )
        next_offset = header.next_offset
    if len(data) <= segment_bytes:
        return [_follower_plan(data, data, found, 0)]
    plans, chunk = [], found[:1]
    for position, header in found[1:]:
        if position + header.size_bytes - chunk[0][0] > segment_bytes:
            plans.append(_follower_chunk(data, chunk))
            chunk = []
        chunk.append((position, header))
    plans.append(_follower_chunk(data, chunk))
    return plans


def _follower_chunk(data: bytes, chunk: list[tuple[int, BatchHeader]]) -> AppendPlan:
    start = chunk[0][0]
    end = chunk[-1][0] + chunk[-1][1].size_bytes
    return _follower_plan(memoryview(data)[start:end], data, chunk, start)


def _follower_plan(
    piece: Piece, data: bytes, found: list[tuple[int, BatchHeader]], start: int
) -> AppendPlan:
    """The append of `piece`, the bytes of `found`'s batches, which begin at `start` in `data`."""
    batches = [
        PlannedBatch(
            position - start,
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
            header.size_bytes,
            header.partition_leader_epoch,
            *_producer_fields(header),
            _control_type(data, position, header),
        )
        for position, header in found
    ]
    return AppendPlan([piece], batches, _summarise(batches, found, None))


def combined_info(infos: list[AppendInfo]) -> AppendInfo:
    """One AppendInfo for consecutive appends."""
    if len(infos) == 1:
        return infos[0]
    latest = max(infos, key=lambda info: info.max_timestamp)
    return AppendInfo(
        first_offset=infos[0].first_offset,
        last_offset=infos[-1].last_offset,
        max_timestamp=latest.max_timestamp,
        offset_of_max_timestamp=latest.offset_of_max_timestamp,
        log_append_time_ms=-1,
        record_count=sum(info.record_count for info in infos),
        size_bytes=sum(info.size_bytes for info in infos),
    )


def _producer_fields(header: BatchHeader) -> tuple[int, int, int, bool, bool]:
    return (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        bool(header.attributes & TRANSACTIONAL),
        bool(header.attributes & CONTROL),
    )


def _check_marker(data: bytes, position: int, header: BatchHeader) -> None:
    """A transaction marker the broker writes: one COMMIT or ABORT record of an idempotent,
    transactional producer (codec.build_control_batch)."""
    if header.producer_id < 0 or not header.attributes & TRANSACTIONAL:
        raise InvalidRecordError(
            f"control batch at position {position} must be transactional with a producer id"
        )
    if header.record_count != 1:
        raise InvalidRecordError(
            f"control batch at position {position} holds {header.record_count} records: a "
            "transaction marker holds exactly one"
        )
    _control_type(data, position, header)


def _control_type(data: bytes, position: int, header: BatchHeader) -> int:
    """A marker's type (ABORT or COMMIT); NO_CONTROL_TYPE for a data batch. Markers are one
    small uncompressed record, so decoding one costs next to nothing."""
    if not header.attributes & CONTROL:
        return NO_CONTROL_TYPE
    marker_type, _ = read_control_marker(decode_batch(data, position, verify_crc=False))
    return marker_type


def _summarise(
    batches: list[PlannedBatch],
    found: list[tuple[int, BatchHeader]],
    log_append_time_ms: int | None,
) -> AppendInfo:
    max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
    for batch in batches:
        if batch.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
    if offset_of_max_timestamp < 0:
        offset_of_max_timestamp = batches[-1].last_offset
    return AppendInfo(
        first_offset=batches[0].base_offset,
        last_offset=batches[-1].last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max_timestamp,
        log_append_time_ms=-1 if log_append_time_ms is None else log_append_time_ms,
        record_count=sum(header.record_count for _, header in found),
        size_bytes=batches[-1].position + batches[-1].size_bytes,
    )
