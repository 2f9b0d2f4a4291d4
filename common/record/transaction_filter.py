"""Which fetched batches a reader shows: markers never, aborted transactions not under
read_committed (Kafka's consumer rule, per batch, never per record).

Theory of operation (DESIGN §5, docs/record-batch.md §8). A read_committed fetch returns whole
stored batches below the last stable offset together with the aborted transactions that overlap
them, each as (producer_id, first_offset). Reading the batches in offset order:

- an aborted transaction whose first_offset is at or below a batch's last offset has begun by
  then: its producer joins the set of *aborted producers*;
- a transactional data batch of a producer in the set belongs to the aborted transaction: hidden;
- the producer's ABORT marker ends that transaction: the producer leaves the set (its later
  batches belong to a later transaction);
- a control batch (a marker) is never shown, at any isolation level;
- everything else is shown: non-transactional batches, committed transactions.

Only markers are decoded (one small record each); data batches are judged by their header.
Pure: no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from samsa.common.record.codec import CONTROL_TYPE_ABORT, RecordBatch, read_control_marker
from samsa.common.record.header import BatchHeader


class AbortedTransactionFilter:
    """Feed it a partition's fetched batches in offset order (`visible`). With no aborted
    transactions (read_uncommitted, or none overlapping) it only hides markers."""

    __slots__ = ("_aborted_producers", "_pending")

    def __init__(self, aborted: Iterable[tuple[int, int]] = ()) -> None:
        # (first_offset, producer_id) of the aborted transactions not yet begun, smallest first.
        self._pending = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._pending)
        self._aborted_producers: set[int] = set()

    def visible(self, header: BatchHeader, marker_type: int | None = None) -> bool:
        """Whether the batch's records are shown. For a control batch pass its `marker_type`
        (codec.read_control_marker); None reads as not ABORT."""
        pending = self._pending
        while pending and pending[0][0] <= header.last_offset:
            self._aborted_producers.add(heapq.heappop(pending)[1])
        if header.is_control:
            if marker_type == CONTROL_TYPE_ABORT:
                self._aborted_producers.discard(header.producer_id)
            return False
        return not (header.is_transactional and header.producer_id in self._aborted_producers)

    def batch_is_visible(self, batch: RecordBatch) -> bool:
        """`visible` for a decoded batch (the marker's type is read from its record)."""
        marker_type = read_control_marker(batch)[0] if batch.header.is_control else None
        return self.visible(batch.header, marker_type)
