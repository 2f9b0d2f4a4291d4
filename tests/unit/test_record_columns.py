"""Goal: `batch_columns` locates every column of a batch's records section so that reading the
arrays and byte runs whole gives exactly what the decoder gives record by record (nulls,
headers, compaction gaps, zstd included), and refuses whatever the decoder refuses.

Method: hypothesis builds batches with the codec; the records are rebuilt from the positions
alone (array.frombytes and slices at the running sums of the lengths) and compared with
`decode_batch`. Corrupt batches from the section checker's own cases must raise.
"""

from __future__ import annotations

import struct
from array import array
from itertools import accumulate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.common.errors import CorruptRecordError
from samsa.common.record import header
from samsa.common.record.codec import build_batch, decode_batch
from samsa.common.record.columns import BatchColumns, batch_columns

maybe_bytes = st.one_of(st.none(), st.binary(max_size=12))
header_pairs = st.lists(
    st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=6))), max_size=3
)


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, int]:
    count = draw(st.integers(1, 20))
    values = draw(st.lists(maybe_bytes, min_size=count, max_size=count))
    keys = draw(st.lists(maybe_bytes, min_size=count, max_size=count))
    headers = draw(st.lists(header_pairs, min_size=count, max_size=count))
    timestamps = draw(st.lists(st.integers(0, 2**40), min_size=count, max_size=count))
    gaps = draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
    offset_deltas = [delta - gaps[0] for delta in accumulate(gaps)]
    compression = draw(st.sampled_from([header.COMPRESSION_NONE, header.COMPRESSION_ZSTD]))
    base_offset = draw(st.integers(0, 2**40))
    batch = build_batch(
        values,
        keys=keys,
        headers=headers,
        timestamps=timestamps,
        offset_deltas=offset_deltas,
        compression=compression,
        base_offset=base_offset,
    )
    prefix = draw(st.binary(max_size=5))
    return prefix + batch, len(prefix)


def ints(columns: BatchColumns, at: int, count: int, typecode: str = "i") -> list[int]:
    column = array(typecode)
    column.frombytes(columns.data[at : at + count * column.itemsize])
    return column.tolist()


def cut(data: bytes, lengths: list[int], start: int) -> list[bytes | None]:
    items: list[bytes | None] = []
    for length in lengths:
        items.append(None if length < 0 else data[start : start + length])
        start += max(length, 0)
    return items


@given(batches())
def test_the_columns_rebuild_what_the_decoder_decodes(case: tuple[bytes, int]) -> None:
    buffer, position = case
    expected = decode_batch(buffer, position)
    columns = batch_columns(buffer, position)
    n, h = columns.record_count, columns.header_count
    assert n == len(expected) and columns.header == expected.header
    base = columns.header.base_offset
    deltas = ints(columns, columns.offset_deltas_at, n)
    assert [base + d for d in deltas] == expected.offsets()
    assert columns.dense_offsets == (deltas == list(range(n)))
    stamps = ints(columns, columns.timestamp_deltas_at, n, "q")
    assert [columns.header.base_timestamp + t for t in stamps] == expected.timestamps()
    data = columns.data
    key_lengths = ints(columns, columns.key_lengths_at, n)
    value_lengths = ints(columns, columns.value_lengths_at, n)
    assert cut(data, key_lengths, columns.keys[0]) == expected.keys
    assert cut(data, value_lengths, columns.values[0]) == expected.values
    counts = ints(columns, columns.header_counts_at, n)
    assert sum(counts) == h
    header_keys = cut(data, ints(columns, columns.header_key_lengths_at, h), columns.header_keys[0])
    header_values = cut(
        data, ints(columns, columns.header_value_lengths_at, h), columns.header_values[0]
    )
    pairs = list(zip([k.decode() for k in header_keys], header_values, strict=True))  # type: ignore[union-attr]
    starts = [0, *accumulate(counts)]
    assert [tuple(pairs[starts[i] : starts[i + 1]]) for i in range(n)] == expected.headers
    assert columns.keys[1] == columns.values[0] and columns.values[1] == columns.header_keys[0]


def test_a_corrupt_section_is_refused_as_the_decoder_refuses_it() -> None:
    batch = bytearray(build_batch([b"abc", b"de"], keys=[b"k", None]))
    # value_lengths[0] claims more bytes than the section holds, re-signed as a hostile producer
    # would: only the section rule trips.
    value_lengths_at = header.HEADER_BYTES + 4 * 2 + 8 * 2 + 4 * 2
    batch[value_lengths_at : value_lengths_at + 4] = (99).to_bytes(4, "little")
    struct.pack_into("<I", batch, header.CRC_POSITION, header.compute_crc(batch, 0, len(batch)))
    with pytest.raises(CorruptRecordError, match="value_lengths"):
        decode_batch(bytes(batch))
    with pytest.raises(CorruptRecordError, match="value_lengths"):
        batch_columns(bytes(batch))


def test_a_bad_crc_is_refused() -> None:
    batch = bytearray(build_batch([b"abc"]))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        batch_columns(bytes(batch))
