"""Goal: stored batches become Arrow batches in the Kafka connector's schema with exactly the
decoder's records (keys, values and header values null where stored null, offsets with compaction
gaps, CreateTime and LogAppendTime timestamps), cut to the asked offsets; markers never appear,
and at read_committed neither do aborted transactions' records.

Method: hypothesis builds chunks of codec batches; `chunk_to_arrow` is compared with
`decode_batch` record by record (to_pylist), with the answer's batches in one Arrow batch and,
with a tiny ARROW_BATCH_BYTES_MAX, split over several. Pure: no Spark, no cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import accumulate
from unittest import mock

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
    decode_batch,
)
from samsa.spark import arrow_batches
from samsa.spark.arrow_batches import SCHEMA, SCHEMA_WITH_HEADERS, chunk_to_arrow

maybe_bytes = st.one_of(st.none(), st.binary(max_size=8))
header_pairs = st.lists(
    st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=5))), max_size=3
)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@st.composite
def stored(draw: st.DrawFn) -> bytes:
    """A few batches back to back at increasing offsets, as a Fetch answer holds them."""
    chunk = b""
    base = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 4))):
        count = draw(st.integers(1, 8))
        gaps = draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
        deltas = [d - gaps[0] for d in accumulate(gaps)]
        chunk += build_batch(
            draw(st.lists(maybe_bytes, min_size=count, max_size=count)),
            keys=draw(st.lists(maybe_bytes, min_size=count, max_size=count)),
            headers=draw(st.lists(header_pairs, min_size=count, max_size=count)),
            timestamps=draw(st.lists(st.integers(0, 2**41), min_size=count, max_size=count)),
            offset_deltas=deltas,
            base_offset=base,
            log_append_time=draw(st.booleans()),
            compression=draw(st.sampled_from([0, 4])),
        )
        base += deltas[-1] + 1
    return chunk


def expected_rows(chunk: bytes, start: int, end: int, headers: bool) -> list[dict]:
    rows = []
    position = 0
    while position < len(chunk):
        batch = decode_batch(chunk, position)
        position += batch.header.size_bytes
        if batch.header.is_control:
            continue
        for offset, ts, key, value, pairs in zip(
            batch.offsets(),
            batch.timestamps(),
            batch.keys,
            batch.values,
            batch.headers,
            strict=True,
        ):
            if not start <= offset < end:
                continue
            row = {
                "key": key,
                "value": value,
                "topic": "t",
                "partition": 3,
                "offset": offset,
                "timestamp": EPOCH + timedelta(milliseconds=ts),
                "timestampType": int(batch.header.is_log_append_time),
            }
            if headers:
                row["headers"] = [{"key": k, "value": v} for k, v in pairs]
            rows.append(row)
    return rows


def rows(batches: list[pa.RecordBatch]) -> list[dict]:
    return [row for batch in batches for row in batch.to_pylist()]


@given(stored(), st.integers(0, 1100), st.integers(0, 1200), st.booleans(), st.booleans())
def test_rows_equal_the_decoders_records_cut_to_the_range(
    chunk: bytes, start: int, end: int, headers: bool, split: bool
) -> None:
    cap = 1 if split else arrow_batches.ARROW_BATCH_BYTES_MAX  # 1: an Arrow batch per batch
    with mock.patch.object(arrow_batches, "ARROW_BATCH_BYTES_MAX", cap):
        batches = list(chunk_to_arrow(chunk, (), "t", 3, start, end, headers))
    for batch in batches:
        assert batch.schema == (SCHEMA_WITH_HEADERS if headers else SCHEMA)
        assert batch.num_rows > 0
    if not split:
        assert len(batches) <= 1, "one Fetch answer, one Arrow batch"
    assert rows(batches) == expected_rows(chunk, start, end, headers)


def test_markers_and_aborted_transactions_are_hidden() -> None:
    chunk = (
        build_batch(
            [b"a0", b"a1"], base_offset=0, producer_id=7, producer_epoch=0, transactional=True
        )
        + build_control_batch(
            CONTROL_TYPE_ABORT,
            producer_id=7,
            producer_epoch=1,
            coordinator_epoch=0,
            timestamp=0,
            base_offset=2,
        )
        + build_batch([b"c0"], base_offset=3, producer_id=7, producer_epoch=1, transactional=True)
        + build_control_batch(
            CONTROL_TYPE_COMMIT,
            producer_id=7,
            producer_epoch=2,
            coordinator_epoch=0,
            timestamp=0,
            base_offset=4,
        )
        + build_batch([b"plain"], base_offset=5)
    )
    committed = rows(list(chunk_to_arrow(chunk, [(7, 0)], "t", 0, 0, 100, False)))
    assert [(r["offset"], r["value"]) for r in committed] == [(3, b"c0"), (5, b"plain")]
    everything = rows(list(chunk_to_arrow(chunk, (), "t", 0, 0, 100, False)))
    assert [r["value"] for r in everything] == [b"a0", b"a1", b"c0", b"plain"], "no marker"
