"""Goal: `samsa dump-log`'s pure core (services/broker/log/dump.py, dump_indexes.py) tells what a
segment's files hold and where they are wrong: every batch's header fields with its CRC verdict,
records and transaction markers with deep iteration, the point where recovery would cut a torn
or corrupt `.log`, and every index entry the `.log` contradicts. A `.log` is read in bounded
chunks, never whole.

Method: segment bytes built by the real codec (build_batch, build_control_batch) and stamped as
the broker stamps appends (header.stamp_offsets); indexes built by the real indexer
(SegmentIndexes, fed batch by batch as appends feed it) and then damaged on purpose; the
`.txnindex` and `.snapshot` bytes by their own encoders.
"""

from __future__ import annotations

from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
)
from samsa.common.record.header import COMPRESSION_ZSTD, read_header, stamp_offsets
from samsa.services.broker.log import dump
from samsa.services.broker.log.dump import LogDump, dump_log_bytes
from samsa.services.broker.log.dump_indexes import (
    OffsetIndexCheck,
    TimeIndexCheck,
    dump_snapshot,
    dump_txn_index,
    offset_index_entries,
    sanity_check,
    time_index_entries,
)
from samsa.services.broker.log.producer_entry import ProducerEntry
from samsa.services.broker.log.producer_snapshot_codec import encode_snapshot
from samsa.services.broker.log.producer_state import BatchMetadata, ProducerStateTable
from samsa.services.broker.log.segment_index import SegmentIndexes
from samsa.services.broker.log.transaction_index import AbortedTransaction, encode_entry

T0 = 1_700_000_000_000


def segment(*batches: bytes, base_offset: int = 0, epoch: int = 4) -> bytes:
    """The batches stamped with consecutive offsets from `base_offset`, back to back."""
    out = bytearray()
    offset = base_offset
    for raw in batches:
        stamped = bytearray(raw)
        stamp_offsets(stamped, 0, offset, epoch)
        offset = read_header(stamped).next_offset
        out += stamped
    return bytes(out)


def plain(count: int, at: int = T0, **fields: object) -> bytes:
    values = [f"value {n}".encode() for n in range(count)]
    return build_batch(values, timestamps=at, **fields)  # type: ignore[arg-type]


def test_plain_batches_show_their_offsets_counts_positions_and_a_valid_crc() -> None:
    first, second = plain(3), plain(2, T0 + 5)
    batches, verdict = dump_log_bytes(segment(first, second, base_offset=10), base_offset=10)
    summary = [
        (b.position, b.header.base_offset, b.header.last_offset, b.header.record_count)
        for b in batches
    ]
    assert summary == [(0, 10, 12, 3), (len(first), 13, 14, 2)]
    assert all(b.crc_valid and b.problem is None for b in batches)
    assert [b.header.partition_leader_epoch for b in batches] == [4, 4]
    assert [b.header.max_timestamp for b in batches] == [T0, T0 + 5]
    assert [b.compression_name for b in batches] == ["none", "none"]
    assert batches[0].records is None  # no deep iteration asked
    assert verdict.end_position == verdict.valid_bytes == len(first) + len(second)
    assert not verdict.corrupt and not verdict.limited


def test_a_zstd_batch_is_named_and_its_records_decode() -> None:
    raw = build_batch(
        [b"hello", b"\xffbinary"],
        keys=[b"k", None],
        timestamps=[T0, T0 + 1],
        headers=[[("trace", b"1"), ("x", None)], []],
        compression=COMPRESSION_ZSTD,
    )
    (batch,), verdict = dump_log_bytes(segment(raw), deep=True)
    assert batch.compression_name == "zstd" and batch.crc_valid and not verdict.corrupt
    assert batch.records is not None
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.records] == [
        (0, T0, b"k", b"hello"),
        (1, T0 + 1, None, b"\xffbinary"),
    ]
    assert [r.header_keys for r in batch.records] == [("trace", "x"), ()]


def test_idempotent_and_transactional_batches_show_producer_and_sequences() -> None:
    raw = plain(3, producer_id=42, producer_epoch=7, base_sequence=2**31 - 2, transactional=True)
    (batch,), _ = dump_log_bytes(segment(raw), deep=True)
    header = batch.header
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 7, 2**31 - 2)
    assert header.is_transactional and not header.is_control
    assert batch.last_sequence == 0  # wrapped past 2^31 - 1, as Kafka's lastSequence
    assert batch.records is not None
    assert [r.sequence for r in batch.records] == [2**31 - 2, 2**31 - 1, 0]
    (plain_batch,), _ = dump_log_bytes(segment(plain(2)), deep=True)
    assert plain_batch.last_sequence == -1
    assert plain_batch.records is not None
    assert [r.sequence for r in plain_batch.records] == [-1, -1]


def test_control_batches_show_their_marker_and_coordinator_epoch() -> None:
    commit = build_control_batch(
        CONTROL_TYPE_COMMIT, producer_id=9, producer_epoch=1, coordinator_epoch=3, timestamp=T0
    )
    abort = build_control_batch(
        CONTROL_TYPE_ABORT, producer_id=9, producer_epoch=2, coordinator_epoch=4, timestamp=T0
    )
    batches, verdict = dump_log_bytes(segment(plain(1), commit, abort), deep=True)
    assert not verdict.corrupt
    assert [b.header.is_control for b in batches] == [False, True, True]
    markers = [r.marker for b in batches for r in b.records or ()]
    assert markers == [None, ("COMMIT", 3), ("ABORT", 4)]


def test_a_torn_tail_stops_the_walk_where_recovery_would_cut() -> None:
    whole = segment(plain(2), plain(3))
    first_size = read_header(whole).size_bytes
    for cut in (first_size + 5, first_size + 40, len(whole) - 1):
        batches, verdict = dump_log_bytes(whole[:cut])
        assert len(batches) == 1
        assert verdict.corrupt and verdict.end_position == first_size
        assert verdict.stop is not None and f"position {first_size} is torn" in verdict.stop
        assert verdict.valid_bytes == first_size
        assert verdict.recovery_error is not None and "truncated" in verdict.recovery_error


def test_a_flipped_crc_byte_is_shown_crc_invalid_and_the_walk_goes_on() -> None:
    whole = bytearray(segment(plain(2), plain(3), plain(1)))
    second = read_header(whole).size_bytes
    whole[second + 70] ^= 0x01  # inside the second batch's records section
    batches, verdict = dump_log_bytes(bytes(whole), deep=True)
    assert [b.crc_valid for b in batches] == [True, False, True]
    assert batches[1].problem is not None
    assert f"batch at position {second} failed its CRC-32C check" in batches[1].problem
    assert verdict.corrupt and verdict.stop is None and verdict.end_position == len(whole)
    assert verdict.valid_bytes == second
    assert verdict.recovery_error is not None and "CRC-32C" in verdict.recovery_error


def test_bytes_that_frame_no_batch_stop_the_walk_and_say_why() -> None:
    good = segment(plain(2))
    garbage_length = good + (10**9).to_bytes(8, "little") + (2**30).to_bytes(4, "little")
    batches, verdict = dump_log_bytes(garbage_length + bytes(100))
    assert len(batches) == 1 and verdict.corrupt and verdict.valid_bytes == len(good)
    assert verdict.stop is not None and "exceeds the hard limit" in verdict.stop
    wrong_magic = bytearray(good + good)
    wrong_magic[len(good) + 16] = 9
    batches, verdict = dump_log_bytes(bytes(wrong_magic))
    assert len(batches) == 1 and verdict.stop is not None and "magic 9" in verdict.stop


def test_offsets_going_backwards_are_what_recovery_refuses() -> None:
    first = segment(plain(3), base_offset=100)
    again = segment(plain(2), base_offset=101)  # overlaps the first batch's offsets
    batches, verdict = dump_log_bytes(first + again, base_offset=100)
    assert [b.crc_valid for b in batches] == [True, True]
    assert verdict.valid_bytes == len(first)
    assert verdict.recovery_error is not None and "offsets must increase" in verdict.recovery_error


def test_max_bytes_stops_before_a_batch_it_cuts_and_that_is_no_fault() -> None:
    whole = segment(plain(2), plain(3))
    first_size = read_header(whole).size_bytes
    batches, verdict = dump_log_bytes(whole, max_bytes=first_size + 10)
    assert len(batches) == 1 and verdict.limited and not verdict.corrupt
    assert verdict.end_position == first_size


def test_a_log_is_read_in_bounded_chunks_not_whole() -> None:
    whole = segment(*[plain(50) for _ in range(400)])
    reads: list[int] = []

    def read(position: int, size: int) -> bytes:
        reads.append(size)
        return whole[position : position + size]

    small_chunks = 4096
    original = dump.READ_CHUNK_BYTES
    dump.READ_CHUNK_BYTES = small_chunks
    try:
        walk = LogDump(read, len(whole))
        assert sum(1 for _ in walk.batches()) == 400
    finally:
        dump.READ_CHUNK_BYTES = original
    assert walk.verdict is not None and not walk.verdict.corrupt
    assert max(reads) <= small_chunks < len(whole)


def indexed(*batches: bytes, interval: int = 1) -> tuple[bytes, SegmentIndexes]:
    """A segment and the indexes the append path builds for it (`interval` bytes apart)."""
    data = segment(*batches)
    indexes = SegmentIndexes(0, interval)
    position = 0
    while position < len(data):
        header = read_header(data, position)
        indexes.on_batch(
            position,
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
            header.size_bytes,
        )
        position += header.size_bytes
    indexes.on_roll()
    return data, indexes


def checked(check: OffsetIndexCheck | TimeIndexCheck, data: bytes) -> list[str]:
    batches, verdict = dump_log_bytes(data)
    for batch in batches:
        check.on_batch(batch.position, batch.header)
    return check.mismatches(verdict.end_position)


def test_indexes_the_broker_built_agree_with_their_log() -> None:
    data, indexes = indexed(plain(2, T0), plain(3, T0 + 9), plain(1, T0 + 4), plain(2, T0 + 20))
    offsets = offset_index_entries(indexes.offset_index.encode(), 0)
    times = time_index_entries(indexes.time_index.encode(), 0)
    assert [offset for offset, _ in offsets] == [2, 5, 6]  # each batch's base offset
    assert times == [(T0 + 9, 4), (T0 + 20, 7)]  # each new max, at the last offset reaching it
    assert checked(OffsetIndexCheck(offsets), data) == []
    assert checked(TimeIndexCheck(times), data) == []
    assert sanity_check(indexes.offset_index.encode(), time=False, log_size_bytes=len(data)) is None


def test_offset_index_entries_that_disagree_with_the_log_are_each_reported() -> None:
    data, indexes = indexed(plain(2), plain(3), plain(1), plain(2))
    entries = offset_index_entries(indexes.offset_index.encode(), 0)
    (o1, p1), (o2, p2), (o3, p3) = entries
    damaged = [(o1 + 1, p1), (o2, p2 + 1), (o3, p3 + 10_000)]
    problems = checked(OffsetIndexCheck(damaged), data)
    assert len(problems) == 3, problems
    assert (
        f"offset {o1 + 1} -> position {p1}, but the batch there holds offsets 2..4" in problems[0]
    )
    assert f"offset {o2} -> position {p2 + 1}, which is not at a batch" in problems[1]
    assert "past the end of the log" in problems[2]
    out_of_order = checked(OffsetIndexCheck([entries[1], entries[0]]), data)
    assert any("does not exceed the previous entry's" in p for p in out_of_order)
    # The broker's own startup check (--index-sanity-check) refuses that order too.
    reordered = indexes.offset_index.encode(1) + indexes.offset_index.encode()[:8]
    assert sanity_check(reordered, time=False, log_size_bytes=len(data)) is not None


def test_time_index_entries_that_disagree_with_the_log_are_each_reported() -> None:
    data, indexes = indexed(plain(2, T0), plain(3, T0 + 9), plain(1, T0 + 4), plain(2, T0 + 20))
    entries = time_index_entries(indexes.time_index.encode(), 0)
    wrong_time = [(entries[0][0] + 1, entries[0][1])]
    assert "has max timestamp" in checked(TimeIndexCheck(wrong_time), data)[0]
    inside_a_batch = [(entries[0][0], entries[0][1] - 1)]
    assert "the last offset of no batch" in checked(TimeIndexCheck(inside_a_batch), data)[0]
    below_earlier = [(T0 + 4, 5)]  # batch 2 ends at 5 with T0 + 4, batch 1 reached T0 + 9
    assert "an earlier batch already reached" in checked(TimeIndexCheck(below_earlier), data)[0]


def test_a_txnindex_lists_aborted_transactions_and_its_torn_tail() -> None:
    entries = [AbortedTransaction(5, 0, 10, 0), AbortedTransaction(6, 3, 12, 3)]
    data = b"".join(map(encode_entry, entries))
    dumped = dump_txn_index(data)
    assert dumped.entries == entries and dumped.problem is None
    torn = dump_txn_index(data + encode_entry(AbortedTransaction(7, 4, 20, 4))[:-3])
    assert torn.entries == entries and torn.valid_bytes == len(data)
    assert torn.problem is not None and f"byte {len(data)}" in torn.problem


def test_a_snapshot_shows_each_producer_and_a_damaged_one_says_so() -> None:
    entry = ProducerEntry(
        producer_id=42,
        producer_epoch=3,
        batches=(BatchMetadata(0, 4, 100, 104, T0),),
        last_timestamp=T0,
        current_txn_first_offset=100,
        last_append_ms=T0 + 1,
    )
    data = encode_snapshot(ProducerStateTable.from_entries([entry]))
    snapshot, problem = dump_snapshot(data)
    assert problem is None and snapshot is not None
    assert snapshot.producers.entries() == [entry]
    damaged = bytearray(data)
    damaged[-1] ^= 0xFF
    assert dump_snapshot(bytes(damaged)) == (None, "producer snapshot fails its CRC-32C check")
