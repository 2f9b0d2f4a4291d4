"""Typed records for a Fetch answer (`decode_records`): decoding a partition's stored batches
into the answer's `decoded_records`, within the answer's byte budget. Pure; partition_read.py
calls it for clients with only the generated code."""

from __future__ import annotations

from samsa.common import limits
from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import RecordBatch, decode_batch
from samsa.common.record.header import unreadable_batch_offsets
from samsa.common.record.record_batch import ARRAY_BYTES_PER_HEADER, ARRAY_BYTES_PER_RECORD
from samsa.common.record.transaction_filter import AbortedTransactionFilter
from samsa.services.broker.log.transaction_index import AbortedTransaction
from samsa.v1 import broker_pb2, records_pb2

FetchPartition = broker_pb2.FetchResponse.PartitionResponse


def decode_into(
    result: FetchPartition,
    records: bytes,
    from_offset: int,
    aborted: list[AbortedTransaction],
    budget: int,
    first_max: int | None,
) -> int | None:
    """Typed records for clients with only the generated code: control batches (transaction
    markers) are left out, and so, under read_committed, are the batches of the `aborted`
    transactions. A stored batch that cannot be decoded (written by an older version, or
    damaged on disk) ends the answer before it, so the records ahead of it are still served;
    when it comes first, the partition answers CORRUPT_MESSAGE naming its offset, and the
    client can seek past it.

    Returns the bytes the records decoded to (`decoded_bytes`): within `budget` but for the
    first batch (KIP-74); a later batch that does not fit ends the answer before it. The first
    batch may take `first_max` (what the answer has left; past it, None is returned, nothing is
    added, and the partition waits for a later fetch), or, with None, any size up to
    limits.fetch_response_bytes_max, past which it is answered MESSAGE_TOO_LARGE: no answer
    could carry it."""
    visible = AbortedTransactionFilter((t.producer_id, t.first_offset) for t in aborted)
    position = total = 0
    while position < len(records):
        try:
            batch = decode_batch(records, position)
        except SamsaError as error:
            bad_offset, _ = unreadable_batch_offsets(records, position, from_offset)
            if position == 0:
                fail(
                    result,
                    ErrorCode.CORRUPT_MESSAGE,
                    f"the stored batch at offset {bad_offset} cannot be decoded ({error}); "
                    f"seek past it to read on",
                )
            else:
                result.next_fetch_offset = bad_offset
            return total
        # Hidden batches count too: decoding them is the work the budget bounds.
        size, shown = decoded_bytes(batch), visible.batch_is_visible(batch)
        if position and total + size > budget:
            result.next_fetch_offset = max(batch.header.base_offset, from_offset)
            return total
        if not position and shown and first_max is not None and size > first_max:
            return None
        if not position and shown and size > limits.fetch_response_bytes_max:
            fail(
                result,
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the stored batch at offset {max(batch.header.base_offset, from_offset)} "
                f"decodes to {size} bytes, more than one answer carries "
                f"({limits.fetch_response_bytes_max}): fetch it without decode_records, or "
                "seek past it",
            )
            return total
        if shown:
            add_typed(result, batch, from_offset)
        total += size
        position += batch.header.size_bytes
    return total


def decoded_bytes(batch: RecordBatch) -> int:
    """What a batch's records take in a decoded answer, near enough: their keys', values' and
    headers' bytes, plus the 24 bytes per record and 8 per header of the section's arrays
    (about what the protobuf fields around them cost). C-level sums, except per header."""
    size = ARRAY_BYTES_PER_RECORD * len(batch)
    size += sum(map(len, filter(None, batch.keys))) + sum(map(len, filter(None, batch.values)))
    for headers in filter(None, batch.headers):
        for key, value in headers:
            size += ARRAY_BYTES_PER_HEADER + len(key) + (len(value) if value else 0)
    return size


def add_typed(result: FetchPartition, batch: RecordBatch, from_offset: int) -> None:
    for record in batch:
        if record.offset < from_offset:
            continue
        typed = result.decoded_records.add(offset=record.offset, timestamp_ms=record.timestamp)
        if record.key is not None:
            typed.key = record.key
        if record.value is not None:
            typed.value = record.value
        for key, value in record.headers:
            header = records_pb2.RecordHeader(key=key)
            if value is not None:
                header.value = value
            typed.headers.append(header)


def fail(result: FetchPartition, code: int, message: str) -> None:
    result.error_code = code  # type: ignore[assignment]
    result.error_message = message
