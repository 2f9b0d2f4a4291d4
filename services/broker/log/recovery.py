"""Recovery scan: find the valid prefix of one segment's bytes and rebuild what derives from it.

Theory of operation. After an unclean stop the tail of a segment may be torn (a partial write),
zeroed (a file extended but never written) or corrupted. `SegmentScan` re-reads a segment from
position 0, batch by batch, and stops at the first bad byte: a truncated header or batch at the
end of the file, a length no batch can have, a bad magic, unknown attributes, a CRC mismatch, or
offsets that do not increase (a batch must start after the previous one ended, inside the
segment's offset range). Everything before that byte is the valid prefix; the driver truncates the
file there, and — as in Kafka's LogLoader — deletes every later segment, since a log is a prefix.

The scan is fed chunks (`feed`) so that a driver can read a 2 GiB segment in large reads without
holding it in memory; a batch cut by the end of a chunk is asked for again (`feed` returns the
bytes it needs). While scanning it rebuilds the segment's indexes through `SegmentIndexes` (the
same rule as appends, so a rebuilt index equals the original) and collects the leader epochs the
batches carry, which the log feeds to its leader-epoch cache (Kafka's LogSegment.recover).

Per batch the work is one header unpack and one crc32c call over the batch (check_batch); records
are never decoded. Pure: bytes in, a valid-prefix length and rebuilt indexes out.

Invariants: valid_bytes only grows and always ends on a batch boundary; once `error` is set the
scan accepts nothing more (unless told to `resume_after` the bad batch: loading a trusted segment).
"""

from __future__ import annotations

from samsa.common import limits
from samsa.common.errors import SamsaError
from samsa.common.record.header import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    batch_size_at,
    check_batch,
)
from samsa.services.broker.log.segment_index import SegmentIndexes


class SegmentScan:
    """A resumable scan of one segment; read `indexes`, `error` and `epoch_starts` when done."""

    __slots__ = ("done", "epoch_starts", "error", "indexes", "next_offset_end")

    def __init__(
        self, base_offset: int, index_interval_bytes: int, *, next_offset_end: int | None = None
    ) -> None:
        self.indexes = SegmentIndexes(base_offset, index_interval_bytes)
        # Exclusive bound on this segment's offsets: the next segment's base offset, if any.
        self.next_offset_end = next_offset_end
        # (leader_epoch, base_offset) at each batch whose partition_leader_epoch differs from
        # the previous batch's; batches without an epoch (-1) are skipped.
        self.epoch_starts: list[tuple[int, int]] = []
        self.error: str | None = None
        self.done = False

    @property
    def valid_bytes(self) -> int:
        """Length of the valid prefix so far: the file position the next chunk starts at."""
        return self.indexes.size_bytes

    def feed(self, chunk: bytes | memoryview, *, end_of_file: bool) -> int:
        """Consume the whole valid batches at the start of `chunk` (read at `valid_bytes`).

        Returns 0 when the scan is over (`done`; `error` tells whether it stopped early), or the
        number of bytes the next read must return for the scan to make progress.
        """
        assert not self.done, "a finished scan accepts no more bytes"
        position = 0
        while True:
            remaining = len(chunk) - position
            if remaining == 0 and end_of_file:
                return self._finish(None)
            try:
                size = batch_size_at(chunk, position)
            except SamsaError as error:
                return self._finish(str(error))
            if size == 0 or size > remaining:
                if end_of_file:
                    return self._finish(
                        f"batch at position {self.valid_bytes} is truncated: {remaining} bytes "
                        f"remain of {size or 'a header'}"
                    )
                return max(size, LOG_OVERHEAD)
            if not self._accept(chunk, position):
                return 0
            position += size

    def _accept(self, chunk: bytes | memoryview, position: int) -> bool:
        """Check the batch at `position` and index it; False (and done) if it is bad."""
        file_position = self.valid_bytes
        try:
            header = check_batch(chunk, position)
        except SamsaError as error:
            self._finish(f"at position {file_position}: {error}")
            return False
        indexes = self.indexes
        if header.base_offset < indexes.next_offset:
            self._finish(
                f"batch at position {file_position} has base_offset {header.base_offset}, below "
                f"the next expected offset {indexes.next_offset}: offsets must increase"
            )
            return False
        if header.last_offset - indexes.base_offset > limits.segment_relative_offset_max or (
            self.next_offset_end is not None and header.last_offset >= self.next_offset_end
        ):
            self._finish(
                f"batch at position {file_position} has last_offset {header.last_offset}, outside "
                f"the segment based at {indexes.base_offset}"
            )
            return False
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not self.epoch_starts or self.epoch_starts[-1][0] != epoch):
            self.epoch_starts.append((epoch, header.base_offset))
        indexes.on_batch(
            file_position,
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
            header.size_bytes,
        )
        return True

    def resume_after(self, header: BatchHeader) -> None:
        """Index the bad batch the scan stopped at from its header alone, its timestamps not
        trusted, and go on after it: a trusted segment kept whole although corrupt at rest
        (segment_loading.py says when its offsets are pinned enough for that)."""
        assert self.done and self.error is not None, "only a scan stopped at a bad batch"
        self.indexes.on_batch(
            self.valid_bytes,
            header.base_offset,
            header.last_offset,
            NO_TIMESTAMP,
            header.size_bytes,
        )
        self.error, self.done = None, False

    def _finish(self, error: str | None) -> int:
        self.error = error
        self.done = True
        return 0
