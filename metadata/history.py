"""The recent committed metadata batches, for followers that fetch the log by offset.

A controller answers FetchMetadata(end_offset, hash) from here: the batches from `end_offset` on
when it still holds them and the caller's hash matches (its log is a prefix of ours), otherwise
`None`, and the caller gets a snapshot. Memory is bounded by a batch count and by the batches'
serialized bytes, whichever binds first (a count alone would let large batches, such as those of
big topics created and deleted again, hold gigabytes the image itself no longer does). A follower
that falls further behind than that costs one snapshot, never an unbounded log in memory.
"""

from __future__ import annotations

import bisect
from collections import deque

from samsa.common import limits
from samsa.v1 import metadata_pb2

# common/limits.py says why this bound.
HISTORY_BYTES_MAX = limits.metadata_history_bytes_max


class MetadataHistory:
    """Committed batches in offset order, the oldest dropped beyond `max_batches` or beyond
    `max_bytes` serialized (but never the newest: a follower one batch behind still gets it)."""

    def __init__(
        self,
        *,
        start_offset: int,
        start_hash: bytes,
        max_batches: int,
        max_bytes: int = HISTORY_BYTES_MAX,
    ) -> None:
        assert max_batches >= 1 and max_bytes >= 1
        self._max_batches = max_batches
        self._max_bytes = max_bytes
        self._batches: deque[metadata_pb2.MetadataRecordBatch] = deque()
        self._base_offsets: deque[int] = deque()
        self._sizes: deque[int] = deque()
        self.reset(start_offset, start_hash)

    def reset(self, end_offset: int, end_hash: bytes) -> None:
        """Forget everything: the log now starts at `end_offset` (a snapshot was loaded)."""
        self._batches.clear()
        self._base_offsets.clear()
        self._sizes.clear()
        self._bytes = 0
        self.start_offset = end_offset
        self.end_offset = end_offset
        self.end_hash = end_hash

    def append(self, batch: metadata_pb2.MetadataRecordBatch, end_hash: bytes) -> None:
        """Add the next committed batch; `end_hash` is the running hash after it."""
        assert batch.base_offset == self.end_offset, "history batches must be contiguous"
        self._batches.append(batch)
        self._base_offsets.append(batch.base_offset)
        self._sizes.append(batch.ByteSize())
        self._bytes += self._sizes[-1]
        self.end_offset = batch.base_offset + len(batch.records)
        self.end_hash = end_hash
        while len(self._batches) > self._max_batches or (
            self._bytes > self._max_bytes and len(self._batches) > 1
        ):
            dropped = self._batches.popleft()
            self._base_offsets.popleft()
            self._bytes -= self._sizes.popleft()
            self.start_offset = dropped.base_offset + len(dropped.records)

    def batches_since(
        self, end_offset: int, hash: bytes, max_bytes: int
    ) -> list[metadata_pb2.MetadataRecordBatch] | None:
        """Batches from `end_offset` on (at least one when there is any, then up to `max_bytes`),
        or None when the caller needs a snapshot: too far behind, ahead of us, or diverged."""
        if end_offset == self.end_offset:
            return [] if hash == self.end_hash else None
        if end_offset < self.start_offset or end_offset > self.end_offset:
            return None
        index = bisect.bisect_left(self._base_offsets, end_offset)
        if index == len(self._base_offsets) or self._base_offsets[index] != end_offset:
            return None  # not a batch boundary of ours: the caller's log differs
        if self._batches[index].previous_hash != hash:
            return None
        answer: list[metadata_pb2.MetadataRecordBatch] = []
        total = 0
        for position in range(index, len(self._batches)):
            size = self._sizes[position]
            if answer and total + size > max_bytes:
                break
            answer.append(self._batches[position])
            total += size
        return answer
