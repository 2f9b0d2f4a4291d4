"""A partition log's compaction: when a pass is due, planning it, and swapping its result in.

Theory of operation (the per-log half of Kafka's LogCleanerManager; the pass itself is cleaner.py,
its per-batch rules compaction.py's). `Log` (log.py) owns one `LogCompaction` and asks it, for
cleanup.policy=compact, at the three points where the broker's cleaner task (log_cleaner.py)
drives a pass: whether one is due (`due`), the pass to run (`plan`, on the log's thread), and
swapping in what the pass cleaned (`finish`, on the log's thread, after `CleaningJob.run` ran on a
worker thread). The cleanable end is the log's last stable offset given the partition's high
watermark (the pass stays below it, as cleaner.py explains); the log passes its current config,
which changes with the topic's, and its log start offset each time.

Between passes this keeps where the last swapped-in pass ended (`cleaned_to`: what was written at
or above it is the dirty part policy.compaction_due weighs against min.cleanable.dirty.ratio), when
something that pass kept for delete.retention.ms may go (`due_ms`) and when the passes first
cleaned each offset range (delete_horizon.py: a tombstone's delete.retention.ms counts from there),
and checkpoints them (Kafka's cleaner-offset-checkpoint, one per partition; log_durability.py
writes it like the other checkpoints), so that a restart does not make every compacted partition's
next pass due and re-read all its segments. Keeping `due_ms` too means a tombstone or marker kept
for its horizon still goes at its time after a restart. The checkpoint is written when a pass's
swap is done (`finish`), never before it: a crash in between leaves the previous value, which
claims less than was cleaned and costs at most a pass (and a tombstone's horizon, counted from a
later pass, comes later: never sooner). A truncation below `cleaned_to` lowers it, and the
first-cleaned ranges, to the new log end (`on_truncated`: what is written again from there is new
to the cleaner) and checkpoints that at once, so that a crash after the log has grown past the old
value again cannot bring it back. At open (`on_open`) a checkpointed `cleaned_to` outside [log
start offset, log end offset] (a crash lost what it covered, or retention moved the log start past
it) reads as never cleaned, and is checkpointed so; a missing or garbled checkpoint reads so too
(loading.py).

Planning a pass makes the clean-shutdown marker's removal durable (log_durability.py), so before
the swap may change any file; the swap is crash-safe by itself (cleaner.py). A segment the swap
deletes (emptied) takes its producer snapshot and index entries with it. This module only
calls methods of the log's parts it is given and must not import log.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.services.broker.log import cleaner, policy
from samsa.services.broker.log.cleaner import NOTHING_CLEANED, CleaningJob
from samsa.services.broker.log.compaction import NEVER, AbortedRanges
from samsa.services.broker.log.delete_horizon import FirstCleaned

if TYPE_CHECKING:
    from samsa.services.broker.log.cleaner import Cleaned, CompactionResult
    from samsa.services.broker.log.config import LogConfig
    from samsa.services.broker.log.local_log import LocalLog
    from samsa.services.broker.log.log_durability import LogDurability
    from samsa.services.broker.log.producer_transactions import ProducerTransactions


class LogCompaction:
    """One log's compaction bookkeeping, over the log's parts it is given. Every method runs on
    the log's thread."""

    def __init__(
        self,
        local_log: LocalLog,
        durability: LogDurability,
        producer_txns: ProducerTransactions,
        last_stable_offset: Callable[[int], int],
        checkpointed: tuple[int, int, list[tuple[int, int]]],
    ) -> None:
        self._local_log = local_log
        self._durability = durability
        self._producer_txns = producer_txns
        # The log's last stable offset given the partition's high watermark: the cleanable end.
        self._last_stable_offset = last_stable_offset
        # Where the last pass ended (0: none yet), when something it kept for its delete
        # horizon may go (NEVER: nothing), and when the passes first cleaned each offset range:
        # as checkpointed until `on_open` checks them.
        self.cleaned_to, self._due_ms, first_cleaned = checkpointed
        self._first_cleaned = FirstCleaned(first_cleaned)

    def on_open(self, log_start_offset: int) -> None:
        """The loaded log starts at `log_start_offset`: a checkpointed `cleaned_to` outside the
        log means never cleaned (and is checkpointed so: the log may grow past it again)."""
        if not log_start_offset <= self.cleaned_to <= self._local_log.log_end_offset:
            self.cleaned_to, self._due_ms = 0, NEVER
        self._first_cleaned.truncate(self._local_log.log_end_offset)
        self._first_cleaned.forget_below(log_start_offset)
        self._checkpoint()

    def due(self, config: LogConfig, *, now_ms: int, high_watermark: int) -> bool:
        """cleanup.policy=compact, and min.cleanable.dirty.ratio of the bytes of the closed
        segments wholly below the cleanable end was written since the last pass, or something
        that pass kept for its delete horizon may go now (policy.compaction_due)."""
        if not config.compact:
            return False
        closed = self._local_log.closed_below(self._last_stable_offset(high_watermark))
        return policy.compaction_due(
            [(segment.base_offset, segment.size_bytes) for segment in closed],
            cleaned_to=self.cleaned_to,
            dirty_ratio=config.min_cleanable_dirty_ratio,
            due_ms=self._due_ms,
            now_ms=now_ms,
        )

    def plan(
        self, config: LogConfig, log_start_offset: int, *, now_ms: int, high_watermark: int
    ) -> CleaningJob | None:
        """cleanup.policy=compact: the pass over the closed segments wholly below the cleanable
        end (never the active one) that keeps the newest record per key, removes aborted
        transactions' batches and the COMMIT markers no longer needed, and keeps the newest
        batch of each live idempotent producer whole (cleaner.py); None when there is nothing
        to clean."""
        if not config.compact or len(self._local_log.segments) == 1:
            return None
        self._durability.persist_marker_removal()
        cleanable_end = self._last_stable_offset(high_watermark)
        aborted = self._producer_txns.aborted(
            self._local_log.base_offsets, log_start_offset, cleanable_end
        )
        return CleaningJob.plan(
            self._local_log.closed_below(cleanable_end),
            now_ms=now_ms,
            delete_retention_ms=config.delete_retention_ms,
            keep_whole=self._producer_txns.newest_batch_base_offsets(),
            aborted=AbortedRanges(aborted),
            first_cleaned=self._first_cleaned.copy(),
        )

    def finish(self, job: CleaningJob, cleaned: Cleaned) -> CompactionResult:
        """Swap in what `job` cleaned, crash-safely, unless its segments changed meanwhile (then
        its files are discarded and the pass counts for nothing)."""
        result = cleaner.finish(job, cleaned, self._local_log)
        if result is None:
            return NOTHING_CLEANED
        if result.segments_deleted:  # their producer snapshots and index entries go too
            self._producer_txns.retain(self._local_log.base_offsets)
        self.cleaned_to = job.cleaned_to
        self._due_ms = cleaned.due_ms
        self._first_cleaned.on_pass(job.cleaned_to, job.now_ms)
        self._checkpoint()
        return result

    def on_truncated(self, log_end_offset: int) -> None:
        """The log lost its records from `log_end_offset` on: what is written again there is
        new to the cleaner (checkpointed now if that lowered `cleaned_to`)."""
        cut = self._first_cleaned.truncate(log_end_offset)
        if cut or self.cleaned_to > log_end_offset:
            self.cleaned_to = min(self.cleaned_to, log_end_offset)
            self._checkpoint()

    def _checkpoint(self) -> None:
        self._durability.checkpoint_cleaner(
            self.cleaned_to, self._due_ms, self._first_cleaned.entries()
        )
