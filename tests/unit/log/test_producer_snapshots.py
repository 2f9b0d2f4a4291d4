"""Goal: a producer state snapshot round-trips every kept batch and every unsettled transaction
exactly, older versions still load, and every kind of damage is refused with CorruptSnapshotError
alone.

Method: tables built from append_info.PlannedBatch values (test_producer_state.py's helpers);
damage is made by hand: bytes are flipped, cut or appended, and `signed` recomputes the CRC so
that the check behind it is reached.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from test_producer_state import batch, five_batch_table

from samsa.common.record.codec import CONTROL_TYPE_ABORT
from samsa.services.broker.log.producer_snapshot_codec import decode_snapshot, encode_snapshot
from samsa.services.broker.log.producer_state import (
    NO_MARKER_TYPE,
    SEQUENCE_MAX,
    BatchMetadata,
    CompletedTransaction,
    CorruptSnapshotError,
    ProducerEntry,
    ProducerStateTable,
)

LOADED_MS = 5_000_000  # the loader's clock


def signed(body: bytes) -> bytes:
    """A snapshot with a correct CRC over `body` (version onwards)."""
    return struct.pack(">I", crc32c.crc32c(body)) + body


def sample_table() -> ProducerStateTable:
    table = five_batch_table()
    table.apply(
        [
            batch(0, 32767, SEQUENCE_MAX - 1, 200, records=4, max_timestamp=-1),
            batch(2**63 - 1, 4, 0, 204, max_timestamp=2**62),
            batch(3, 0, 0, 205, max_timestamp=9),
            batch(3, 1, 0, 206, max_timestamp=3),  # epoch bump: one batch kept, last_timestamp 9
        ],
        2**62 + 1,  # the broker's clock: these four entries' last_append_ms
    )
    marker = batch(5, 1, 0, 207)._replace(base_sequence=-1, is_transactional=True, is_control=True)
    table.apply([marker], 3, CONTROL_TYPE_ABORT)
    return table


UNSETTLED = (CompletedTransaction(3, 150, 207), CompletedTransaction(0, 0, 2**63 - 1))


def test_snapshots_round_trip_every_kept_batch_and_unsettled_transaction() -> None:
    table = sample_table()
    data = encode_snapshot(table, UNSETTLED)
    decoded = decode_snapshot(data, loaded_ms=0)
    assert decoded.producers == table and decoded.producers.entries() == table.entries()
    assert decoded.unsettled == UNSETTLED
    assert encode_snapshot(*decoded) == data
    assert decode_snapshot(encode_snapshot(ProducerStateTable()), loaded_ms=0) == (
        ProducerStateTable(),
        (),
    )


def test_a_version_1_snapshot_loads_with_no_open_transaction() -> None:
    # Written before transactions: entry (id, epoch, last timestamp, batch count), batches.
    version_1 = signed(
        struct.pack(">hi", 1, 1)
        + struct.pack(">qhqB", 7, 2, 10, 1)
        + struct.pack(">iiqqq", 0, 3, 10, 13, 10)
    )
    table, unsettled = decode_snapshot(version_1, loaded_ms=LOADED_MS)
    batches = (BatchMetadata(0, 3, 10, 13, 10),)
    assert table.entries() == [ProducerEntry(7, 2, batches, 10, -1, LOADED_MS)]
    assert unsettled == ()


def test_a_version_2_snapshot_loads_with_no_unsettled_transaction() -> None:
    # Written before version 3: the entries (with the open transaction's first offset), no list.
    version_2 = signed(
        struct.pack(">hi", 2, 1)
        + struct.pack(">qhqqB", 7, 2, 10, 12, 1)
        + struct.pack(">iiqqq", 0, 0, 12, 12, 10)
    )
    table, unsettled = decode_snapshot(version_2, loaded_ms=LOADED_MS)
    batches = (BatchMetadata(0, 0, 12, 12, 10),)
    assert table.entries() == [ProducerEntry(7, 2, batches, 10, 12, LOADED_MS)]
    assert unsettled == ()


def test_a_version_3_snapshot_takes_the_loaders_clock_as_the_last_append() -> None:
    # Written before version 4: no append time. The record timestamp (10: the producer's clock,
    # any value under CreateTime) would make an open transaction look silent for ages and let
    # AbortTransaction abort it; the loader's clock makes it look just written (producer_entry.py).
    version_3 = signed(
        struct.pack(">hi", 3, 1)
        + struct.pack(">qhqqB", 7, 2, 10, 12, 1)
        + struct.pack(">iiqqq", 0, 0, 12, 12, 10)
        + struct.pack(">i", 1)
        + struct.pack(">qqq", 4, 2, 8)
    )
    table, unsettled = decode_snapshot(version_3, loaded_ms=LOADED_MS)
    batches = (BatchMetadata(0, 0, 12, 12, 10),)
    assert table.entries() == [ProducerEntry(7, 2, batches, 10, 12, LOADED_MS)]
    assert unsettled == (CompletedTransaction(4, 2, 8),)
    current = decode_snapshot(encode_snapshot(table, unsettled), loaded_ms=LOADED_MS + 1)
    assert current == (table, unsettled), "the current version keeps the time it holds"


def test_a_version_4_snapshot_knows_no_marker_type() -> None:
    # Written before version 5: a marker at the entry's epoch is refused, not taken for a retry.
    version_4 = signed(
        struct.pack(">hi", 4, 1)
        + struct.pack(">qhqqqB", 7, 2, 10, 900, -1, 0)
        + struct.pack(">i", 0)
    )
    table, unsettled = decode_snapshot(version_4, loaded_ms=LOADED_MS)
    assert table.entries() == [ProducerEntry(7, 2, (), 10, -1, 900, NO_MARKER_TYPE)]
    assert unsettled == ()


def corruptions() -> list[tuple[str, bytes, str]]:
    """(case, snapshot bytes, words of the expected error)."""
    data = encode_snapshot(sample_table())
    body = data[4:]
    entry = struct.pack(">qhqB", 1, 0, 10, 1)
    good_batch = struct.pack(">iiqqq", 0, 0, 5, 5, 10)
    header = struct.pack(">hi", 1, 1)
    return [
        ("empty", b"", "truncated"),
        ("crc only", data[:4], "truncated"),
        ("flipped body byte", data[:20] + bytes([data[20] ^ 1]) + data[21:], "CRC"),
        ("flipped crc byte", bytes([data[0] ^ 0x80]) + data[1:], "CRC"),
        ("unsigned trailing byte", data + b"\0", "CRC"),
        ("wrong version", signed(struct.pack(">h", 6) + body[2:]), "version 6"),
        ("trailing bytes", signed(body + b"\0"), "after its last entry"),
        (
            "count beyond the length",
            signed(struct.pack(">hi", 1, 2**31 - 1) + body[6:]),
            "declares",
        ),
        ("one entry short", signed(struct.pack(">hi", 1, 2) + entry + good_batch), "truncated at"),
        (
            "a partial entry after the last",
            signed(header + entry + good_batch + entry[:-1]),
            "after its last entry",
        ),
        ("negative count", signed(struct.pack(">hi", 1, -1) + body[6:]), "declares -1"),
        (
            "too many batches",
            signed(header + entry[:-1] + bytes([6]) + good_batch * 6),
            "6 batches",
        ),
        (
            "batches cut short",
            signed(header + entry[:-1] + bytes([2]) + good_batch),
            "truncated in",
        ),
        (
            "negative producer id",
            signed(header + struct.pack(">qhqB", -1, 0, 10, 1) + good_batch),
            "producer -1",
        ),
        (
            "unsorted ids",
            signed(struct.pack(">hi", 1, 2) + (entry + good_batch) * 2),
            "sorted and unique",
        ),
        ("a version 1 entry without batches", signed(header + entry[:-1] + b"\0"), "0 batches"),
        (
            "an open transaction below -1",
            signed(struct.pack(">hi", 2, 1) + struct.pack(">qhqqB", 1, 0, 10, -2, 0)),
            "open transaction at offset -2",
        ),
        (
            "an unknown marker type",
            signed(struct.pack(">hi", 5, 1) + struct.pack(">qhqqbqB", 1, 0, 10, 0, 2, -1, 0)),
            "marker type 2",
        ),
        (
            "an append time below -1",
            signed(struct.pack(">hi", 4, 1) + struct.pack(">qhqqqB", 1, 0, 10, -2, -1, 0)),
            "last appended at -2",
        ),
        (
            "last offset below base",
            signed(header + entry + struct.pack(">iiqqq", 0, 0, 5, 4, 10)),
            "inconsistent",
        ),
        (
            "wrong last sequence",
            signed(header + entry + struct.pack(">iiqqq", 0, 1, 5, 5, 10)),
            "inconsistent",
        ),
        (
            "timestamp above the last",
            signed(header + entry + struct.pack(">iiqqq", 0, 0, 5, 5, 11)),
            "inconsistent",
        ),
        *unsettled_corruptions(),
    ]


def unsettled_corruptions() -> list[tuple[str, bytes, str]]:
    """Damage to version 3's list of unsettled transactions (behind no producer entry)."""
    empty = struct.pack(">hi", 3, 0)

    def listing(*transactions: tuple[int, int, int], after: bytes = b"") -> bytes:
        count = struct.pack(">i", len(transactions))
        listed = b"".join(struct.pack(">qqq", *t) for t in transactions)
        return signed(empty + count + listed + after)

    return [
        ("no unsettled count", signed(empty), "truncated at byte 10"),
        (
            "unsettled count beyond the length",
            signed(empty + struct.pack(">i", 2) + struct.pack(">qqq", 1, 0, 1)),
            "declares 2 unsettled",
        ),
        ("negative unsettled count", signed(empty + struct.pack(">i", -1)), "declares -1"),
        ("negative unsettled producer", listing((-1, 0, 1)), "inconsistent unsettled"),
        ("marker not after the first offset", listing((1, 5, 5)), "inconsistent unsettled"),
        ("negative first offset", listing((1, -1, 5)), "inconsistent unsettled"),
        ("markers out of order", listing((1, 0, 5), (2, 1, 5)), "inconsistent unsettled"),
        ("bytes after the list", listing((1, 0, 5), after=b"\0"), "after its last entry"),
    ]


@pytest.mark.parametrize(
    ("case", "data", "match"), corruptions(), ids=[c[0] for c in corruptions()]
)
def test_a_damaged_snapshot_is_refused(case: str, data: bytes, match: str) -> None:
    with pytest.raises(CorruptSnapshotError, match=match):
        decode_snapshot(data, loaded_ms=0)


def test_every_truncation_of_a_snapshot_is_refused() -> None:
    data = encode_snapshot(sample_table(), UNSETTLED)
    for length in range(len(data)):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(data[:length], loaded_ms=0)
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(signed(data[4:length]) if length >= 4 else b"", loaded_ms=0)
