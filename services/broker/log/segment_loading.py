"""Opening an existing segment from disk (the loading half of Kafka's LogSegment / LogLoader).

Theory of operation. Loading (`open_segment`) takes one of two paths. *Trusted* (below the
recovery point, or after a clean shutdown): the index files are loaded and sanity-checked
(offset_index / time_index `decode`), the batches after the last index entry are walked to find
the segment's end, the time index's last entry is checked against the batches after it (a prefix
of whole entries is sane but stale), and — for the active segment — the last batch is CRC-checked;
any failure re-reads the whole file as below, but a bad batch found then is corruption at rest of
durable bytes: nothing is cut (`_keep_bad_batch` says what is indexed and served, and returns the
CorruptBatch for the partition to mark the replica corrupt). *Recover* (the unflushed part): the
whole file is re-read in large chunks through `SegmentScan` (framing + one crc32c per batch,
`Segment.scan`), the file is truncated at the first bad byte and the indexes are rebuilt from
what remains.

Which segments are opened, on which path, and what happens to the segments after a cut is
loading.py's business; the running segment (append, read, truncate, compaction) is segment.py's.

Invariant on return: the `Segment` satisfies segment.py's invariants — its .log file holds whole
valid batches only (but for a trusted segment's bad batch, kept), and its index files hold a
prefix of the in-memory entries or are marked for rewrite.
"""

from __future__ import annotations

import logging
import os
from itertools import pairwise
from pathlib import Path

from samsa.common import limits
from samsa.common.errors import CorruptRecordError, SamsaError
from samsa.common.record.header import HEADER_BYTES, NO_TIMESTAMP, BatchHeader, check_batch
from samsa.services.broker.log.checkpoint_file import read_if_exists
from samsa.services.broker.log.framing import read_frame
from samsa.services.broker.log.offset_index import CorruptIndexError, OffsetIndex
from samsa.services.broker.log.recovery import SegmentScan
from samsa.services.broker.log.scrub import CorruptBatch
from samsa.services.broker.log.segment import (
    INDEX_SUFFIX,
    LOG_FILE_FLAGS,
    LOG_SUFFIX,
    RECOVERY_CHUNK_BYTES,
    TIME_INDEX_SUFFIX,
    Segment,
    segment_path,
)
from samsa.services.broker.log.segment_index import SegmentIndexes
from samsa.services.broker.log.time_index import TimeIndex

# Segment.py's logger name, not this module's: every line about one segment's files (a recovery,
# a cut, an index rebuilt) stays under the one name operators filter on, as before the split.
log = logging.getLogger("samsa.services.broker.log.segment")


def open_segment(
    directory: Path,
    base_offset: int,
    index_interval_bytes: int,
    *,
    next_offset_end: int | None,
    trusted: bool,
) -> tuple[Segment, SegmentScan | None, CorruptBatch | None]:
    """Load an existing segment; the scan is returned when the file was re-checked, and where it
    found a trusted segment bad (kept whole: `_keep_bad_batch`)."""
    fd = os.open(segment_path(directory, base_offset, LOG_SUFFIX), LOG_FILE_FLAGS, 0o644)
    segment = Segment(directory, SegmentIndexes(base_offset, index_interval_bytes), fd)
    if trusted and _load_indexes(segment, next_offset_end):
        return segment, None, None
    if not trusted:
        log.info(
            "%s: recovering a segment written since the last flush: re-checking its batches "
            "and rebuilding its indexes",
            segment.path(LOG_SUFFIX),
            extra={"segment": str(segment.path(LOG_SUFFIX))},
        )
        return segment, _recover(segment, next_offset_end), None
    file_size = os.fstat(segment.fd).st_size
    scan = segment.scan(next_offset_end, file_size)
    if scan.error is None and scan.valid_bytes == file_size:
        segment.replace_indexes(scan.indexes)
        return segment, scan, None
    return segment, *_keep_bad_batch(segment, scan, next_offset_end, file_size)


def _keep_bad_batch(
    segment: Segment, scan: SegmentScan, next_offset_end: int | None, file_size: int
) -> tuple[SegmentScan, CorruptBatch]:
    """A trusted segment whose re-check stopped at a bad batch: durable bytes corrupt at rest.
    Nothing is cut, as this replica may be in the ISR: the log exposes where (`CorruptBatch`),
    PartitionHost marks it corrupt, and the scrubber's repair cuts there once the controller
    took it out of the ISR. The bad batch is indexed from its header (its timestamps not
    trusted) and served as stored, readers' CRC checks failing on it as on any corruption at
    rest, when other bytes pin its offsets (`_pinned_header`) and the rest of the segment
    re-checks sound. Otherwise the indexes end before it and the file's rest is kept, unframed
    (`Segment.unframed_tail`: reads reaching it and appends are refused, never skipped; in the
    active segment the log end offset is then the bad batch's base offset until the repair)."""
    position, offset = scan.valid_bytes, scan.indexes.next_offset
    log.error(
        "%s: a trusted segment fails its re-check at offset %d (byte position %d of segment "
        "%d): %s; kept whole, the replica is marked corrupt",
        segment.directory,
        offset,
        position,
        segment.base_offset,
        scan.error,
        extra={
            "log_dir": str(segment.directory),
            "segment_base_offset": segment.base_offset,
            "offset": offset,
            "position": position,
            "reason": scan.error,
        },
    )
    header = _pinned_header(segment, scan, next_offset_end)
    if header is not None:
        scan.resume_after(header)
        want = RECOVERY_CHUNK_BYTES
        while want:
            chunk = os.pread(segment.fd, max(want, RECOVERY_CHUNK_BYTES), scan.valid_bytes)
            want = scan.feed(chunk, end_of_file=scan.valid_bytes + len(chunk) >= file_size)
        if scan.error is not None or scan.valid_bytes != file_size:
            scan = segment.scan(next_offset_end, file_size)  # only the sound prefix, again
            header = None
    segment.replace_indexes(scan.indexes)
    segment.unframed_tail = header is None
    return scan, CorruptBatch(offset, segment.base_offset, segment.size_bytes, position)


def _pinned_header(
    segment: Segment, scan: SegmentScan, next_offset_end: int | None
) -> BatchHeader | None:
    """The header of the bad batch the scan stopped at, if other bytes pin its offsets: it
    starts where the batch before it ended, and the batch after it starts right after its last
    offset; the last batch of a closed segment ends right before the next segment, and that of
    the active one (which sets the log end) frames the file's end exactly and counts a record
    per offset (two header fields agree)."""
    try:
        header = read_frame(segment.read_bytes(scan.valid_bytes, HEADER_BYTES), 0)
        end, file_size = scan.valid_bytes + header.size_bytes, os.fstat(segment.fd).st_size
        if header.base_offset != scan.indexes.next_offset or end > file_size:
            return None
        if end < file_size:
            after = read_frame(segment.read_bytes(end, HEADER_BYTES), 0).base_offset
        elif next_offset_end is not None:
            after = next_offset_end
        else:
            after = header.base_offset + header.record_count
    except SamsaError:
        return None
    last_offset = header.last_offset
    bound = next_offset_end if next_offset_end is not None else after
    return header if header.base_offset <= last_offset < after == last_offset + 1 <= bound else None


def _load_indexes(segment: Segment, next_offset_end: int | None) -> bool:
    """The trusted path: True when the index files and the tail of the log agree."""
    size_bytes = os.fstat(segment.fd).st_size
    if next_offset_end is None:
        relative_end = limits.segment_relative_offset_max + 1
    else:
        relative_end = next_offset_end - segment.base_offset
    offset_data = read_if_exists(segment.path(INDEX_SUFFIX))
    time_data = read_if_exists(segment.path(TIME_INDEX_SUFFIX))
    if (offset_data is None or time_data is None) and size_bytes > 0:
        return False
    try:
        offset_index = OffsetIndex.decode(
            offset_data or b"", log_size_bytes=size_bytes, relative_offset_end=relative_end
        )
        time_index = TimeIndex.decode(time_data or b"", relative_offset_end=relative_end)
        segment.indexes.offset_index, segment.indexes.time_index = offset_index, time_index
        tail = _checked_tail(segment, offset_index, size_bytes, next_offset_end)
        _check_time_index(segment, tail, size_bytes, closed=next_offset_end is not None)
    except (CorruptIndexError, SamsaError) as error:
        segment.indexes = SegmentIndexes(segment.base_offset, segment.indexes.index_interval_bytes)
        log.info(
            "%s: the indexes do not match the log (%s); rebuilding them from the log",
            segment.path(LOG_SUFFIX),
            error,
            extra={"segment": str(segment.path(LOG_SUFFIX)), "reason": str(error)},
        )
        return False
    segment.indexes.restore(tail, size_bytes)
    segment.on_index_files_loaded(len(offset_index), len(time_index))
    return True


def _checked_tail(
    segment: Segment, offset_index: OffsetIndex, size_bytes: int, next_offset_end: int | None
) -> list[tuple[int, BatchHeader]]:
    """Batches from the last index entry to the end, which must frame the file exactly."""
    relative_offset, position = offset_index.last_entry()
    tail = list(segment.walk(position, size_bytes))
    expected_base = segment.base_offset + relative_offset
    if len(offset_index) and tail[0][1].base_offset != expected_base:
        raise CorruptIndexError(f"last index entry points at {tail[0][1].base_offset}")
    for (_, previous), (_, header) in pairwise(tail):
        if header.base_offset <= previous.last_offset:
            raise CorruptRecordError("offsets do not increase in the segment's tail")
    # The appends would have indexed a batch once index.interval.bytes had passed since the
    # last entry: an index cut at an entry boundary (empty, say) is sane but incomplete.
    tail_bytes_before_last = sum(header.size_bytes for _, header in tail[:-1])
    interval = segment.indexes.index_interval_bytes
    if (len(tail) > 1 and tail_bytes_before_last >= interval) or (
        tail and not interval and not offset_index
    ):
        raise CorruptIndexError("the index lacks entries the appends would have made")
    if tail and next_offset_end is not None and tail[-1][1].last_offset >= next_offset_end:
        raise CorruptRecordError("the segment's last batch overlaps the next segment")
    if tail and next_offset_end is None:
        position, header = tail[-1]
        check_batch(segment.read_bytes(position, header.size_bytes))
    return tail


def _check_time_index(
    segment: Segment, tail: list[tuple[int, BatchHeader]], size_bytes: int, *, closed: bool
) -> None:
    """Prove the loaded time index complete, not merely sane (`TimeIndex.check_last_entry`):
    walk from the batch of its last entry to the last batch the appends could still have
    indexed — the last offset-index entry's batch, or the end once the segment is closed
    (the final entry on roll). With monotonic timestamps this is about one index interval."""
    if closed:
        end = size_bytes
    elif len(segment.indexes.offset_index):
        end = tail[0][0] + tail[0][1].size_bytes
    else:
        end = 0
    timestamp, relative_offset = segment.indexes.time_index.last_entry()
    start = 0
    if timestamp > NO_TIMESTAMP:
        start = segment.indexes.offset_index.lookup(relative_offset)[1]
    headers = (header for _, header in segment.walk(start, end))
    segment.indexes.time_index.check_last_entry(segment.base_offset, headers)


def _recover(segment: Segment, next_offset_end: int | None) -> SegmentScan:
    """Re-check every batch, truncate at the first bad byte, rebuild the indexes."""
    file_size = os.fstat(segment.fd).st_size
    scan = segment.scan(next_offset_end, file_size)
    if scan.valid_bytes < file_size:
        _log_cut(segment, scan, file_size)
        os.ftruncate(segment.fd, scan.valid_bytes)
    segment.replace_indexes(scan.indexes)
    return scan


def _log_cut(segment: Segment, scan: SegmentScan, file_size: int) -> None:
    """Say what recovery discards: the bytes are gone once the file is truncated."""
    discarded_bytes = file_size - scan.valid_bytes
    log.warning(
        "%s: recovery cut the log at offset %d (byte position %d of segment %d), discarding "
        "%d bytes: %s",
        segment.directory,
        scan.indexes.next_offset,
        scan.valid_bytes,
        segment.base_offset,
        discarded_bytes,
        scan.error,
        extra={
            "log_dir": str(segment.directory),
            "segment_base_offset": segment.base_offset,
            "offset": scan.indexes.next_offset,
            "position": scan.valid_bytes,
            "discarded_bytes": discarded_bytes,
            "reason": scan.error,
        },
    )
