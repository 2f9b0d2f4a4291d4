"""One segment's files: `<base>.log` with its `.index` and `.timeindex` (the I/O driver).

Theory of operation. A `Segment` owns one open file descriptor on its .log file and a
`SegmentIndexes` (pure) describing it. Appends write the stamped bytes at the end with one
positioned `pwritev` and feed each batch to the indexes in memory; index files are written when
the log asks (roll, flush, close) — appended incrementally, rewritten after a truncation. Reads
are `pread`s of byte ranges: locating a batch takes the sparse-index floor entry, then walks batch
headers forward in small reads.

Opening an existing segment from disk — the trusted path over its index files, or recovery by
re-reading every batch — is segment_loading.py (`open_segment`), which builds a `Segment` and uses
`walk`, `scan`, `on_index_files_loaded` and `replace_indexes`; `create` starts a new one.

Indexes are never trusted over the log: a lookup checks that the index entry it used points at a
batch with the expected base offset, and rebuilds the index from the log when it does not.

Compaction (`write_cleaned`, then `swap_cleaned`; cleaner.py drives it) is crash-safe: the
survivors go to `X.log.cleaned` (fsynced), which is renamed to `X.log.swap` — the commit point —,
the old index files are deleted and the swap file is renamed over `X.log`. Loading (loading.py)
deletes `.cleaned` leftovers and finishes any `.swap`.

Invariants: the .log file's size is `indexes.size_bytes` (whole valid batches only, but for a bad
batch or an `unframed_tail` loading kept: segment_loading.py); index files hold a prefix of the
in-memory entries or are marked for rewrite.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from samsa.common.errors import CorruptRecordError, StorageError
from samsa.common.record.codec import RecordBatch, decode_batch
from samsa.common.record.header import HEADER_BYTES, BatchHeader, read_header
from samsa.services.broker.log.append_info import Piece, PlannedBatch
from samsa.services.broker.log.checkpoint_file import fsync_directory, write_all
from samsa.services.broker.log.framing import fetch_extent, read_frame
from samsa.services.broker.log.offset_index import CorruptIndexError, OffsetIndex
from samsa.services.broker.log.recovery import SegmentScan
from samsa.services.broker.log.segment_index import SegmentIndexes
from samsa.services.broker.log.time_index import TimeIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions (transaction_log_state.py)
CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".log.swap"
BASE_OFFSET_DIGITS = 20
# Recovery reads this much per pread: large enough that syscalls and Python work per read vanish
# next to the crc32c of the bytes, small enough to keep a recovering broker's memory modest.
RECOVERY_CHUNK_BYTES = 16 * 1024 * 1024
# Header walks read this much per pread: an index interval (4 KiB) of small batches in one read.
WALK_CHUNK_BYTES = 16 * 1024
COMPACTION_CHUNK_BYTES = 8 * 1024 * 1024
LOG_FILE_FLAGS = os.O_RDWR | os.O_CREAT


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:0{BASE_OFFSET_DIGITS}d}{suffix}"


def parse_base_offset(name: str, suffix: str) -> int | None:
    """The base offset in a segment file name, or None when the name is not one of ours."""
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    if len(stem) == BASE_OFFSET_DIGITS and stem.isdigit():
        return int(stem)
    return None


class Segment:
    """One open segment. `first_append_ms` starts segment.ms at this process's first append
    (or, loaded, at its first batch's timestamp: LocalLog.append)."""

    def __init__(self, directory: Path, indexes: SegmentIndexes, fd: int) -> None:
        self.directory = directory
        self.indexes = indexes
        self.fd = fd
        self.first_append_ms: int | None = None
        # A closed segment takes no more appends; its last time-index entry is its max timestamp.
        self.closed = False
        # Bumped whenever a closed segment's bytes change (truncation, a compaction swap), so
        # that a compaction planned before can tell its input is gone (cleaner.py).
        self.version = 0
        self._indexes_synced = False  # the index files hold their entries durably
        # The file holds bytes after `size_bytes` that no batch frames: a trusted segment found
        # corrupt at open and kept for the repair (segment_loading.py). Reads reaching them and
        # appends are refused; a truncation ends it.
        self.unframed_tail = False
        # Entries of each index file known to be on disk; None = rewrite the file.
        self._offset_entries_on_disk: int | None = None
        self._time_entries_on_disk: int | None = None

    def __repr__(self) -> str:
        return f"Segment(base_offset={self.base_offset}, size_bytes={self.size_bytes})"

    @property
    def base_offset(self) -> int:
        return self.indexes.base_offset

    @property
    def size_bytes(self) -> int:
        return self.indexes.size_bytes

    @property
    def next_offset(self) -> int:
        return self.indexes.next_offset

    @property
    def max_timestamp(self) -> int:
        return self.indexes.max_timestamp

    def path(self, suffix: str) -> Path:
        return segment_path(self.directory, self.base_offset, suffix)

    # --- creating, re-checking, repairing (segment_loading.py opens existing segments) --------

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> Segment:
        """A new empty segment (an existing file of that name is emptied). Files an older
        segment at that base offset left (a crash inside `delete`) go first, the .txnindex too:
        its stale aborted transactions would be loaded as this segment's."""
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_path(directory, base_offset, suffix).unlink(missing_ok=True)
        log_path = segment_path(directory, base_offset, LOG_SUFFIX)
        fd = os.open(log_path, LOG_FILE_FLAGS | os.O_TRUNC, 0o644)
        return cls(directory, SegmentIndexes(base_offset, index_interval_bytes), fd)

    def on_index_files_loaded(self, offset_entries: int, time_entries: int) -> None:
        """The in-memory indexes came from the index files, which hold these many entries
        durably (the loader's trusted path)."""
        self._offset_entries_on_disk = offset_entries
        self._time_entries_on_disk = time_entries
        self._indexes_synced = True

    def replace_indexes(self, indexes: SegmentIndexes) -> None:
        """Take `indexes`, built from the log; the index files are rewritten on the next write."""
        self.indexes = indexes
        self._offset_entries_on_disk = self._time_entries_on_disk = None

    def scan(self, next_offset_end: int | None, file_size: int) -> SegmentScan:
        """Feed the whole file to a SegmentScan in large reads (recovery on load, and
        `rebuild_indexes` while serving)."""
        scan = SegmentScan(
            self.base_offset, self.indexes.index_interval_bytes, next_offset_end=next_offset_end
        )
        want = RECOVERY_CHUNK_BYTES
        while want:
            chunk = os.pread(self.fd, max(want, RECOVERY_CHUNK_BYTES), scan.valid_bytes)
            want = scan.feed(chunk, end_of_file=scan.valid_bytes + len(chunk) >= file_size)
        return scan

    def truncate_to_position(self, position: int) -> None:
        """Cut the file at `position`, the start of a bad batch the scrubber found after a sound
        prefix, and make the segment active again. Only headers from the last index entry below
        `position` are read (the bad batch's own bytes are never parsed)."""
        assert 0 <= position <= self.size_bytes
        self.version += 1
        os.ftruncate(self.fd, position)
        self.unframed_tail = False
        self.indexes.truncate_to_position(position)
        tail = list(self.walk(self.indexes.offset_index.last_entry()[1], position))
        self.indexes.restore_after_truncation(tail, position)
        self.closed = False
        self.first_append_ms = None
        if (self._offset_entries_on_disk or 0) > len(self.indexes.offset_index):
            self._offset_entries_on_disk = None
        if (self._time_entries_on_disk or 0) > len(self.indexes.time_index):
            self._time_entries_on_disk = None

    def rebuild_indexes(self) -> None:
        """Rebuild the indexes from the log while serving; corruption found now is fatal."""
        log.info(
            "%s: an index entry disagrees with the log; rebuilding the indexes from the log",
            self.path(LOG_SUFFIX),
            extra={"segment": str(self.path(LOG_SUFFIX))},
        )
        scan = self.scan(None, self.size_bytes)
        if scan.error is not None or scan.valid_bytes != self.size_bytes:
            raise StorageError(
                f"segment {self.path(LOG_SUFFIX)} is corrupt ({scan.error}): restart the broker "
                f"to recover the log"
            )
        if self.closed:
            scan.indexes.on_roll()
        self.replace_indexes(scan.indexes)

    # --- appending -----------------------------------------------------------------------------

    def append(self, pieces: Sequence[Piece], batches: Sequence[PlannedBatch], now_ms: int) -> None:
        """Write an append's bytes at the end and index its batches. On an OSError the file is
        cut back to its old size and StorageError raised: nothing of the append remains."""
        position = self.size_bytes
        total = batches[-1].position + batches[-1].size_bytes
        try:
            written = os.pwritev(self.fd, pieces, position)
            if written < total:  # a short write: finish it from one joined buffer
                joined = b"".join(pieces)
                while written < total:
                    written += os.pwrite(self.fd, joined[written:], position + written)
        except OSError as error:
            os.ftruncate(self.fd, position)
            raise StorageError(f"append to {self.path(LOG_SUFFIX)} failed: {error}") from error
        for batch in batches:
            self.indexes.on_batch(
                position + batch.position,
                batch.base_offset,
                batch.last_offset,
                batch.max_timestamp,
                batch.size_bytes,
            )
        if self.first_append_ms is None or self.first_append_ms > now_ms:
            self.first_append_ms = now_ms

    # --- reading -------------------------------------------------------------------------------

    def read_bytes(self, position: int, size: int) -> bytes:
        data = os.pread(self.fd, size, position)
        if len(data) != size:
            raise StorageError(
                f"{self.path(LOG_SUFFIX)} returned {len(data)} bytes at position {position}, "
                f"expected {size}: the file was cut under the log"
            )
        return data

    def walk(self, position: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `position` to `end` (default: the segment end)."""
        end = self.size_bytes if end is None else end
        chunk, chunk_position = b"", position
        while position < end:
            inside = position - chunk_position
            if inside < 0 or len(chunk) - inside < HEADER_BYTES:
                chunk = os.pread(self.fd, WALK_CHUNK_BYTES, position)
                chunk_position, inside = position, 0
            header = read_frame(chunk, inside)
            if position + header.size_bytes > end:
                raise CorruptRecordError(f"batch at position {position} runs past position {end}")
            yield position, header
            position += header.size_bytes

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, or None."""
        for attempt in range(2):
            try:
                if 0 <= self.indexes.last_batch_base_offset <= offset < self.next_offset:
                    return self._newest_batch()
                relative_offset, position = self.indexes.offset_index.lookup(
                    max(0, offset - self.base_offset)
                )
                for found_position, header in self.walk(position):
                    if (
                        found_position == position
                        and position
                        and (header.base_offset != self.base_offset + relative_offset)
                    ):
                        raise CorruptIndexError("index entry and batch disagree")
                    if header.last_offset >= offset:
                        return found_position, header
                return None
            except (CorruptIndexError, CorruptRecordError):
                if attempt:
                    raise
                self.rebuild_indexes()
        raise AssertionError("unreachable")

    def _newest_batch(self) -> tuple[int, BatchHeader]:
        """(position, header) of the batch that ends the segment, where the appends put it (a
        follower or consumer caught up with the log reads just that one: no index walk)."""
        position = self.indexes.last_batch_position
        header = read_frame(os.pread(self.fd, HEADER_BYTES, position), 0)
        if (
            header.base_offset != self.indexes.last_batch_base_offset
            or position + header.size_bytes != self.size_bytes
        ):
            raise CorruptIndexError("the newest batch is not where the appends put it")
        return position, header

    def read_batches(
        self, position: int, first: BatchHeader, max_bytes: int, upper_offset: int
    ) -> tuple[bytes, int]:
        """(bytes, next_offset) of whole batches from `position` (whose header is `first`), at
        most `max_bytes` unless the first batch alone is bigger (KIP-74), all below upper_offset."""
        assert first.last_offset < upper_offset
        want = min(max_bytes, self.size_bytes - position)
        if first.size_bytes >= want:
            return self.read_bytes(position, first.size_bytes), first.next_offset
        chunk = self.read_bytes(position, want)
        end, next_offset = fetch_extent(chunk, upper_offset)
        assert end >= first.size_bytes, "the first batch is whole and below the bound"
        return (chunk if end == len(chunk) else chunk[:end]), next_offset

    def headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """The header of every batch whose last offset is >= `offset`, in order (producer-state
        replay: headers only, nothing decoded)."""
        found = self.find_batch(offset)
        if found is not None:
            for _, header in self.walk(found[0]):
                yield header

    def find_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` whose timestamp
        is >= `timestamp`; only the one batch that holds it is decoded."""
        from_offset = max(
            self.base_offset + self.indexes.time_index.lookup(timestamp), start_offset
        )
        found = self.find_batch(from_offset)
        if found is None:
            return None
        for position, header in self.walk(found[0]):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            batch = decode_batch(self.read_bytes(position, header.size_bytes))
            for offset, record_timestamp in zip(batch.offsets(), batch.timestamps(), strict=True):
                if record_timestamp >= timestamp and offset >= start_offset:
                    return offset, record_timestamp
        return None

    # --- truncating, persisting, closing -----------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= `offset` (a batch holding it goes whole) and
        make the segment active again: its indexes become what appending the rest would build."""
        found = self.find_batch(offset)
        self.truncate_to_position(self.size_bytes if found is None else found[0])

    def write_indexes(self, *, fsync: bool) -> None:
        """Bring both index files up to date: append new entries, or rewrite after a truncation."""
        unchanged = self._offset_entries_on_disk == len(self.indexes.offset_index) and (
            self._time_entries_on_disk == len(self.indexes.time_index)
        )
        if unchanged and (self._indexes_synced or not fsync):
            return
        self._indexes_synced = fsync
        self._offset_entries_on_disk = _write_index(
            self.path(INDEX_SUFFIX), self.indexes.offset_index, self._offset_entries_on_disk, fsync
        )
        self._time_entries_on_disk = _write_index(
            self.path(TIME_INDEX_SUFFIX), self.indexes.time_index, self._time_entries_on_disk, fsync
        )

    def flush(self, *, indexes: bool) -> None:
        """fsync the log file (and write + fsync the index files when asked)."""
        os.fdatasync(self.fd)
        if indexes:
            self.write_indexes(fsync=True)

    def close(self) -> None:
        os.close(self.fd)
        self.fd = -1

    def delete(self) -> None:
        """Close and remove the segment's files."""
        if self.fd >= 0:
            self.close()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            self.path(suffix).unlink(missing_ok=True)

    def write_cleaned(self, survivors: Iterable[bytes]) -> SegmentIndexes:
        """Compaction, step 1: write `survivors` to X.log.cleaned (fsynced); return the indexes
        of those bytes. Then either `swap_cleaned` or `discard_cleaned`. Reads nothing that
        the log's thread changes, so the cleaner's thread may call it."""
        indexes = SegmentIndexes(self.base_offset, self.indexes.index_interval_bytes)
        fd = os.open(self.path(CLEANED_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for raw in survivors:
                header = read_header(raw)
                write_all(fd, raw)
                indexes.on_batch(
                    indexes.size_bytes,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                    header.size_bytes,
                )
            os.fsync(fd)
        finally:
            os.close(fd)
        indexes.on_roll()
        return indexes

    def discard_cleaned(self) -> None:
        self.path(CLEANED_SUFFIX).unlink(missing_ok=True)

    def swap_cleaned(self, indexes: SegmentIndexes) -> None:
        """Compaction, step 2: .cleaned -> .swap (the commit point), drop the old index files,
        .swap -> .log, then write the new index files (an emptied first segment of the log is
        swapped in empty: cleaner.py says why)."""
        self.version += 1
        os.replace(self.path(CLEANED_SUFFIX), self.path(SWAP_SUFFIX))
        fsync_directory(self.directory)  # a crash from here on completes the swap on open
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            self.path(suffix).unlink(missing_ok=True)
        os.replace(self.path(SWAP_SUFFIX), self.path(LOG_SUFFIX))
        self.close()
        self.fd = os.open(self.path(LOG_SUFFIX), LOG_FILE_FLAGS, 0o644)
        self.replace_indexes(indexes)
        self.write_indexes(fsync=True)
        fsync_directory(self.directory)


def iter_batches(fd: int, size_bytes: int) -> Iterator[tuple[bytes, RecordBatch]]:
    """Every batch in the first `size_bytes` of a segment file, as (stored bytes, decoded
    batch), read in large chunks (compaction)."""
    position = 0
    while position < size_bytes:
        chunk = os.pread(fd, min(COMPACTION_CHUNK_BYTES, size_bytes - position), position)
        inside = 0
        while len(chunk) - inside >= HEADER_BYTES:
            size = read_frame(chunk, inside).size_bytes
            if inside + size > len(chunk):
                break
            raw = chunk[inside : inside + size]
            yield raw, decode_batch(raw)
            inside += size
        if inside == 0:  # one batch larger than the chunk
            size = read_frame(chunk, 0).size_bytes
            raw = os.pread(fd, size, position)
            if len(raw) < size:
                raise CorruptRecordError(
                    f"batch at position {position} is cut short: {len(raw)} of {size} bytes"
                )
            yield raw, decode_batch(raw)
            inside = size
        position += inside


def _write_index(
    path: Path, index: OffsetIndex | TimeIndex, entries_on_disk: int | None, fsync: bool
) -> int:
    """Write `index` to `path` (appending when the file holds a prefix); return its entries."""
    if entries_on_disk == len(index) and not fsync:
        return entries_on_disk
    rewrite = entries_on_disk is None or entries_on_disk > len(index)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if rewrite else 0), 0o644)
    try:
        start = 0 if rewrite else entries_on_disk
        data = index.encode(start)
        entry_bytes = 8 if isinstance(index, OffsetIndex) else 12
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], start * entry_bytes + written)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return len(index)
