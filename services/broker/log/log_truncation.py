"""Taking records off a partition log's ends: truncation of its tail, deletion of its front.

Theory of operation (Kafka's UnifiedLog.truncateTo, truncateFullyAndStartAt, deleteOldSegments
and maybeIncrementLogStartOffset). A log loses records in five ways: replication truncates its
tail to where the leader's log diverged (`truncate_to`); a follower that fell below the leader's
log start restarts it empty (`truncate_fully_and_start_at`); the scrubber cuts it at a bad batch
(`cut_at_batch`); DeleteRecords moves its log start offset up (`delete_records`) and retention
deletes its oldest closed segments (`apply_retention`; retention.py decides how many). `Log`
(log.py) owns one `LogTruncation` and hands each method the log start offset, which it keeps
(reads need it at hand); each method answers the new one.

Each step makes the clean-shutdown marker's removal durable before a file changes (after that, a
marker an OS crash brought back would lie; log_durability.py), then has the LocalLog change the
files (local_log.py), then brings along every part that follows the log's ends: the recovery
point (never above the new log end), the log start offset (never above the log end, never below
the first segment), the leader-epoch cache, where the cleaner got to (log_compaction.py), and the
producer state (rebuilt from the newest snapshot left and the batches after it) with the
aborted-transaction index (rebuilt from where that replay began; a deleted segment's entries are
forgotten). Deleting segments from the front fsyncs the producer snapshot at the new first segment
first, when the roll left it unsynced (it is then the only record of the deleted batches' producers;
producer_log_state.py). Deleting segments from the front, or every segment (with the producer
snapshots), is made durable by a directory fsync; the checkpoints are written last, so that none
claims more than the log holds. A crash between the two leaves a recovery point below the new first
segment, which the next open raises to that segment's base (loading.py), as Kafka's open does:
nothing below it is left to recover, and the producer snapshot there, the only record of the deleted
batches' producers, stays usable. Checkpointing first would not need that, but would declare
recovered the segments a crash left undeleted, unflushed ones among them. A tail truncation
fdatasyncs the segment it cut before it checkpoints (one fsync per truncation): the leader-epoch
checkpoint the next append writes is durable, and an OS crash that brought the cut batches back
would leave the new epoch claiming the old epoch's records, which KIP-101 never truncates. Its
segment deletions wait for the next flush (the recovery point moved down with it) or for the
directory fsync of the next checkpoint written, that one's included (the scrubber's repair,
`cut_at_batch`, flushes at once, before it checkpoints).

This module only calls methods of the log's parts it is given and must not import log.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.common.errors import OffsetOutOfRangeError
from samsa.services.broker.log import retention
from samsa.services.broker.log.corrupt_mark import clear_mark

if TYPE_CHECKING:
    from samsa.services.broker.log.config import LogConfig
    from samsa.services.broker.log.leader_epoch import LeaderEpochCache
    from samsa.services.broker.log.local_log import LocalLog
    from samsa.services.broker.log.log_compaction import LogCompaction
    from samsa.services.broker.log.log_durability import LogDurability
    from samsa.services.broker.log.producer_transactions import ProducerTransactions


class LogTruncation:
    """The steps that take records off one log's ends, over the log's parts it is given. Every
    method runs on the log's thread."""

    def __init__(
        self,
        local_log: LocalLog,
        durability: LogDurability,
        epochs: LeaderEpochCache,
        producer_txns: ProducerTransactions,
        compaction: LogCompaction,
    ) -> None:
        self._local_log = local_log
        self._durability = durability
        self._epochs = epochs
        self._producer_txns = producer_txns
        self._compaction = compaction

    def on_open(self, checkpointed_log_start: int | None, config: LogConfig) -> int:
        """Answer the loaded log's log start offset: the checkpointed one (0 when corrupt), never
        below the first segment; one above the log end restarts the log empty there. The epochs
        and where the cleaner got to are trimmed to the log."""
        log_start_offset = max(checkpointed_log_start or 0, self._local_log.base_offsets[0])
        if log_start_offset > self._local_log.log_end_offset:
            self.truncate_fully_and_start_at(log_start_offset, config)
        self._epochs.truncate_from_end(self._local_log.log_end_offset)
        self._epochs.truncate_from_start(log_start_offset)
        self._compaction.on_open(log_start_offset)
        return log_start_offset

    # --- the tail ------------------------------------------------------------------------------

    def truncate_to(self, offset: int, log_start_offset: int, config: LogConfig) -> int:
        """Drop every batch holding an offset >= `offset`, across segments (a batch that
        straddles it is dropped whole); restart the log empty there if `offset` is below its
        first segment. Answers the log start offset."""
        log_end_offset = self._local_log.log_end_offset
        if offset >= log_end_offset:
            # No batch to drop, but an epoch may start at the log end with nothing written in it
            # (this replica became leader, then lost it before an append: start_leader_epoch).
            # A follower must not keep claiming it (Kafka's truncateTo does the same).
            if self._epochs.truncate_from_end(log_end_offset):
                self._durability.checkpoint_epochs(self._epochs.entries())
            return log_start_offset
        if offset < self._local_log.base_offsets[0]:
            return self.truncate_fully_and_start_at(offset, config)
        self._durability.persist_marker_removal()
        self._local_log.truncate_to(offset)
        self._durability.sync_tail_cut()
        log_start_offset = self._after_tail_cut(log_start_offset, forget_unflushed=False)
        self._durability.checkpoint(log_start_offset)
        return log_start_offset

    def cut_at_batch(
        self, base_offset: int, size_bytes: int, position: int, log_start_offset: int
    ) -> int | None:
        """Cut the segment at `base_offset` at byte `position` and drop every later segment,
        then flush and checkpoint; answers the log start offset, or None (nothing changed) when
        that segment is gone or changed size since the scrubber read it. Either way the corrupt
        mark is deleted last (corrupt_mark.py: a crash before leaves it stale, dropped at open)."""
        if not self._local_log.can_cut_at(base_offset, size_bytes, position):
            clear_mark(self._local_log.directory)
            return None
        self._durability.persist_marker_removal()
        self._local_log.cut_at(base_offset, position)
        log_start_offset = self._after_tail_cut(log_start_offset, forget_unflushed=True)
        self._durability.flush(now_ms=None)
        self._durability.checkpoint(log_start_offset)
        clear_mark(self._local_log.directory)
        return log_start_offset

    def _after_tail_cut(self, log_start_offset: int, *, forget_unflushed: bool) -> int:
        """Bring every part along to the new log end; answers the log start offset."""
        log_end_offset = self._local_log.log_end_offset
        self._durability.on_truncate(log_end_offset, forget_unflushed=forget_unflushed)
        self._epochs.truncate_from_end(log_end_offset)
        self._compaction.on_truncated(log_end_offset)
        self._producer_txns.on_truncate(self._local_log.segments)
        return min(log_start_offset, log_end_offset)

    def truncate_fully_and_start_at(self, offset: int, config: LogConfig) -> int:
        """Delete every segment and restart the log empty at `offset`, forgetting every
        producer, transaction and epoch. Answers the log start offset: `offset`."""
        assert offset >= 0
        self._durability.persist_marker_removal()
        self._local_log.truncate_fully_and_start_at(offset, config.index_interval_bytes)
        self._compaction.on_truncated(offset)
        self._durability.on_truncate_fully(offset)
        self._epochs.clear()
        self._producer_txns.on_truncate_fully()
        self._durability.sync_directory()
        self._durability.checkpoint(offset)
        return offset

    # --- the front -----------------------------------------------------------------------------

    def delete_records(self, offset: int, log_start_offset: int) -> int:
        """Move the log start offset up to `offset` (<= log end offset) and delete the segments
        wholly below it; answers the log start offset."""
        log_end_offset = self._local_log.log_end_offset
        if not 0 <= offset <= log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records below {offset}: the log ends at {log_end_offset}"
            )
        if offset <= log_start_offset:
            return log_start_offset
        count = retention.segments_below(self._local_log.base_offsets, offset)
        return self._delete_oldest(count, offset)

    def apply_retention(
        self, config: LogConfig, log_start_offset: int, *, now_ms: int, high_watermark: int
    ) -> tuple[int, int]:
        """Delete the segments retention deletes (retention.py); answers how many, and the log
        start offset. When the active segment goes too, a new empty one is rolled at the log end
        first, so the log keeps its end offset (Kafka's deleteSegments)."""
        segments = self._local_log.segments
        if len(segments) == 1 and segments[0].size_bytes == 0:  # the common idle case
            return 0, log_start_offset
        count = retention.retention_count(
            self._local_log.segments,
            self._local_log.base_offsets,
            log_start_offset=log_start_offset,
            high_watermark=high_watermark,
            config=config,
            now_ms=now_ms,
        )
        if count == len(segments) and segments[-1].unframed_tail:
            count -= 1  # its end is unknown: a roll there could reuse its offsets; kept
        elif count == len(segments):
            self._durability.persist_marker_removal()  # the roll is the first change to files
            self._local_log.roll_at_end(config.index_interval_bytes)
        return count, self._delete_oldest(count, log_start_offset)

    def _delete_oldest(self, count: int, log_start_offset: int) -> int:
        """Delete the `count` oldest segments and persist the log start offset, moved up to the
        first segment left if it is below it; the producer state is untouched (KIP-360)."""
        assert 0 <= count < len(self._local_log.segments), "the active segment is never deleted"
        if count:
            self._durability.persist_marker_removal()
            # The snapshot at the new first segment is all that will be left of the deleted
            # batches' producers: made durable (with its directory entry) before they go.
            first_base_offset = self._local_log.base_offsets[count]
            if self._producer_txns.sync_snapshots(first_base_offset, first_base_offset):
                self._durability.sync_directory()
        self._local_log.delete_oldest(count)
        log_start_offset = max(log_start_offset, self._local_log.base_offsets[0])
        self._epochs.truncate_from_start(log_start_offset)
        if count:
            self._producer_txns.retain(self._local_log.base_offsets)
            self._durability.sync_directory()
            self._durability.on_delete_front(self._local_log.base_offsets[0])
        self._durability.checkpoint(log_start_offset)
        return log_start_offset
