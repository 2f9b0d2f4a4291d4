"""Goal: the scrub policy walks every closed segment in order and resumes after a cursor, spends
a bounded byte rate, and calls a segment corrupt exactly when the recovery scan would; and the
log's scrub hooks read closed segments as they are on disk and truncate a corrupt replica at
its first bad batch (dropping every later segment) without parsing the bad bytes.

Method: pure tests of `next_target`, `ScrubBudget`, `read_size` and `ScrubVerdict` over
hand-made targets and times; then real logs in tmp_path with 2 KiB segments, a byte flipped in
a closed segment's file with an ordinary write (as bit rot would), scanned in small chunks the
way the scrubber feeds them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, read_all, small_config

from samsa.common.record.header import check_batch
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.recovery import SegmentScan
from samsa.services.broker.log.scrub import (
    SCRUB_CHUNK_BYTES,
    SCRUB_INDEX_INTERVAL_BYTES,
    ScrubBudget,
    ScrubTarget,
    ScrubVerdict,
    next_target,
    read_size,
)
from samsa.services.broker.log.segment import LOG_SUFFIX, segment_path

# --- the pure policy ---------------------------------------------------------------------------


def target(topic: str, partition: int, base_offset: int) -> ScrubTarget:
    return ScrubTarget(topic, partition, base_offset, base_offset + 10, 100)


def test_next_target_walks_partitions_and_segments_in_order_and_wraps():
    closed = [target("b", 0, 0), target("a", 1, 0), target("a", 0, 10), target("a", 0, 0)]
    walked = []
    cursor = None
    for _ in range(5):
        found, wrapped = next_target(closed, cursor)
        assert found is not None
        walked.append((found.key, wrapped))
        cursor = found.key
    assert walked == [
        (("a", 0, 0), False),
        (("a", 0, 10), False),
        (("a", 1, 0), False),
        (("b", 0, 0), False),
        (("a", 0, 0), True),
    ]
    assert next_target([], None) == (None, False)


def test_next_target_resumes_after_a_cursor_whose_segment_is_gone():
    closed = [target("a", 0, 0), target("a", 0, 30)]
    found, wrapped = next_target(closed, ("a", 0, 10))  # segment 10 was deleted by retention
    assert found is not None and found.key == ("a", 0, 30) and not wrapped


def test_the_budget_bounds_the_rate_and_allows_one_oversized_read():
    budget = ScrubBudget(bytes_per_second=1000, burst_bytes=500, now_ms=0)
    assert budget.wait_ms(500, now_ms=0) == 0, "a full bucket to start"
    budget.spend(500, now_ms=0)
    assert budget.wait_ms(100, now_ms=0) == 100
    assert budget.wait_ms(100, now_ms=100) == 0
    assert budget.wait_ms(5000, now_ms=100) == 400, "a big read waits for a full bucket only"
    budget.spend(5000, now_ms=500)  # ... and then overdraws
    assert budget.wait_ms(1, now_ms=500) == 4501
    assert budget.wait_ms(500, now_ms=100_000) == 0, "the bucket never holds more than a burst"
    budget.spend(500, now_ms=100_000)
    assert budget.wait_ms(1, now_ms=100_000) == 1


def test_read_size_is_a_chunk_or_the_batch_asked_for_never_past_the_end():
    assert read_size(61, 0, 10 * SCRUB_CHUNK_BYTES) == SCRUB_CHUNK_BYTES
    assert read_size(3 * SCRUB_CHUNK_BYTES, 0, 10 * SCRUB_CHUNK_BYTES) == 3 * SCRUB_CHUNK_BYTES
    assert read_size(61, 900, 1000) == 100
    assert read_size(61, 1000, 1000) == 0


# --- real segments -----------------------------------------------------------------------------


def filled_log(directory: Path) -> Log:
    """A log of 2 KiB segments: 60 single-record batches of ~100 bytes, several closed."""
    log = Log.open(directory, small_config(), now_ms=0)
    for index in range(60):
        log.append_as_leader(batch(b"value-%03d" % index + b"x" * 40), leader_epoch=0, now_ms=0)
    assert len(log.closed_segments()) >= 2
    return log


def scrub(log: Log, base_offset: int, *, chunk: int) -> ScrubVerdict:
    """Feed one closed segment to a scan `chunk` bytes at a time, as the scrubber does."""
    (_, next_base, size_bytes) = next(s for s in log.closed_segments() if s[0] == base_offset)
    scan = SegmentScan(base_offset, SCRUB_INDEX_INTERVAL_BYTES, next_offset_end=next_base)
    want = chunk
    while want:
        length = max(want, chunk)
        data = log.read_closed_segment(base_offset, size_bytes, scan.valid_bytes, length)
        assert data is not None
        want = scan.feed(data, end_of_file=scan.valid_bytes + len(data) >= size_bytes)
    return ScrubVerdict.of(scan, size_bytes)


def flip(directory: Path, base_offset: int, position: int) -> None:
    with segment_path(directory, base_offset, LOG_SUFFIX).open("r+b") as file:
        file.seek(position)
        byte = file.read(1)
        file.seek(position)
        file.write(bytes([byte[0] ^ 0x01]))


def batch_positions(log: Log, base_offset: int) -> list[tuple[int, int]]:
    """(position, base offset) of each batch of a closed segment."""
    (_, _, size_bytes) = next(s for s in log.closed_segments() if s[0] == base_offset)
    data = log.read_closed_segment(base_offset, size_bytes, 0, size_bytes)
    assert data is not None
    found, position = [], 0
    while position < len(data):
        header = check_batch(data, position)
        found.append((position, header.base_offset))
        position += header.size_bytes
    return found


@pytest.mark.parametrize("chunk", [61, 4096])
def test_a_clean_segment_scrubs_clean_in_any_chunk_size(tmp_path: Path, chunk: int):
    log = filled_log(tmp_path)
    for base_offset, _, _ in log.closed_segments():
        verdict = scrub(log, base_offset, chunk=chunk)
        assert not verdict.corrupt and verdict.reason is None


@pytest.mark.parametrize("where", ["crc", "payload", "length"])
def test_a_flipped_byte_in_a_closed_segment_is_found_at_its_batch(tmp_path: Path, where: str):
    log = filled_log(tmp_path)
    base_offset = log.closed_segments()[1][0]
    position, corrupt_offset = batch_positions(log, base_offset)[3]
    inside = {"crc": 17, "payload": 80, "length": 11}[where]
    flip(tmp_path, base_offset, position + inside)
    verdict = scrub(log, base_offset, chunk=61)
    assert verdict.corrupt and verdict.reason
    assert (verdict.first_corrupt_offset, verdict.position) == (corrupt_offset, position)
    assert scrub(log, log.closed_segments()[0][0], chunk=61).corrupt is False


@pytest.mark.parametrize("where", ["payload", "length"])
def test_truncate_at_batch_cuts_at_the_bad_batch_and_drops_later_segments(
    tmp_path: Path, where: str
):
    log = filled_log(tmp_path)
    before = read_all(log)
    base_offset, _, size_bytes = log.closed_segments()[1]
    position, corrupt_offset = batch_positions(log, base_offset)[2]
    flip(tmp_path, base_offset, position + {"payload": 80, "length": 11}[where])
    verdict = scrub(log, base_offset, chunk=4096)
    target = ScrubTarget("t", 0, base_offset, 0, size_bytes)
    corrupt = verdict.corrupt_batch(target)
    assert (corrupt.offset, corrupt.position) == (corrupt_offset, position)
    assert log.truncate_at_batch(base_offset, size_bytes, position) == corrupt_offset
    assert log.log_end_offset == corrupt_offset
    assert [s.base_offset for s in log.segments()][-1] == base_offset, "later segments dropped"
    assert read_all(log) == before[:corrupt_offset]
    # The repaired replica appends what it re-fetches after the cut, and reopens cleanly.
    log.append_as_leader(batch(b"again"), leader_epoch=1, now_ms=0)
    log.close()
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert [r.value for r in read_all(reopened)][-1] == b"again"
    assert reopened.log_end_offset == corrupt_offset + 1


def test_truncate_at_batch_changes_nothing_when_the_segment_changed(tmp_path: Path):
    log = filled_log(tmp_path)
    end = log.log_end_offset
    base_offset, _, size_bytes = log.closed_segments()[1]
    assert log.truncate_at_batch(base_offset, size_bytes + 1, 0) is None, "rewritten"
    assert log.truncate_at_batch(base_offset + 1, size_bytes, 0) is None, "gone"
    assert log.truncate_at_batch(base_offset, size_bytes, size_bytes) is None, "past its end"
    assert log.log_end_offset == end


def test_reads_of_a_segment_that_changed_or_went_away_answer_none(tmp_path: Path):
    log = filled_log(tmp_path)
    base_offset, _, size_bytes = log.closed_segments()[0]
    assert log.read_closed_segment(base_offset, size_bytes + 1, 0, 10) is None
    assert log.read_closed_segment(base_offset + 1, size_bytes, 0, 10) is None
    active_base = log.segments()[-1].base_offset
    assert log.read_closed_segment(active_base, 0, 0, 10) is None, "the active one is not closed"
