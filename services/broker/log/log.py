"""The partition log: one partition's storage engine (Kafka's UnifiedLog).

Theory of operation. A log is a directory of segments sorted by base offset, the last one active,
held by a `LocalLog` (local_log.py, Kafka's LocalLog): lookups, reads, appends and rolls, truncation
and deletion of segments. This module composes it with the other parts a partition's log keeps, each
in its own module, and calls them between the steps that make each change durable:

- a LogDurability (log_durability.py): the recovery point, the checkpoint files, the
  clean-shutdown marker and every fsync (DESIGN.md §3). Checkpoints are written by `checkpoint`,
  `close`, and whenever a value moves backwards or the log start moves, so that a crash never
  leaves one claiming more than the log holds.
- ProducerTransactions (producer_transactions.py): the idempotent producers' state and the
  transactions (DESIGN §5), checked before a leader append writes a byte and fed at every step
  that moves the log end; from them come the last stable offset and what a read_committed fetch
  skips.
- the leader-epoch cache (leader_epoch.py), fed by appends and `start_leader_epoch`.
- LogTruncation (log_truncation.py): replication's truncation, the scrubber's cut, retention and
  DeleteRecords, each step in the order that keeps a crash safe; this module keeps the log start
  offset they move.
- LogCompaction (log_compaction.py): cleanup.policy=compact's passes (cleaner.py rewrites the
  segments, possibly on another thread), when the next is due, and the cleaner's checkpoint.

Appends are validated and planned by append_info.py (all-or-nothing: a rejected append writes
nothing) before local_log.py writes them. Loading and recovery (`open`) are loading.py's; `open`
builds the log from what it found. Time (`now_ms`) is always passed in; the log never reads a clock.

Invariants: log_start_offset <= log_end_offset; recovery_point <= log_end_offset; epochs in the
cache start inside the log (the segments' invariants are local_log.py's).
"""

from __future__ import annotations

from contextlib import closing
from typing import TYPE_CHECKING

from samsa.common import limits
from samsa.common.errors import OffsetOutOfRangeError
from samsa.services.broker.log.append_info import (
    AppendInfo,
    AppendPlan,
    combined_info,
    plan_follower_appends,
    plan_leader_append,
)
from samsa.services.broker.log.cleaner import NOTHING_CLEANED
from samsa.services.broker.log.loading import load_log
from samsa.services.broker.log.local_log import LocalLog, ReadResult
from samsa.services.broker.log.log_compaction import LogCompaction
from samsa.services.broker.log.log_durability import LogDurability
from samsa.services.broker.log.log_truncation import LogTruncation
from samsa.services.broker.log.producer_log_state import ProducerLogState
from samsa.services.broker.log.producer_transactions import ProducerTransactions

if TYPE_CHECKING:
    from pathlib import Path

    from samsa.services.broker.log.cleaner import Cleaned, CleaningJob, CompactionResult
    from samsa.services.broker.log.config import LogConfig
    from samsa.services.broker.log.loading import LoadedLog
    from samsa.services.broker.log.local_log import SegmentInfo
    from samsa.services.broker.log.producer_state import ProducerEntry
    from samsa.services.broker.log.transaction_index import AbortedTransaction


class Log:
    """One partition's log. Build it with `Log.open`; every method runs on one thread."""

    def __init__(self, directory: Path, config: LogConfig, loaded: LoadedLog) -> None:
        self.directory = directory
        self.config = config
        self._local_log = LocalLog(directory, loaded.segments, on_roll=self._on_segment_rolled)
        self._epochs = loaded.epochs
        self._log_start_offset = loaded.segments[0].base_offset
        self._closed = False
        self.corrupt_at_open = loaded.corrupt  # kept at open (loading.py): the partition marks it
        self._producer_txns = ProducerTransactions(
            ProducerLogState.loaded(
                directory, loaded.producers, loaded.snapshot_offsets, loaded.loaded_ms
            ),
            loaded.transactions,
        )
        # Told every high watermark move (Kafka's onHighWatermarkUpdated): the LSO only reads.
        self.on_high_watermark = loaded.transactions.on_high_watermark
        self.unstable_transaction_count = loaded.transactions.unstable_count
        self._durability = LogDurability(
            directory,
            config,
            loaded.checkpointed,
            directory_dirty=loaded.created,  # a new segment's entry: fsynced by the first flush
            local_log=self._local_log,
            epochs=self._epochs,
            producer_txns=self._producer_txns,
        )
        self._compaction = LogCompaction(
            self._local_log,
            self._durability,
            self._producer_txns,
            self.last_stable_offset,
            loaded.cleaner,
        )
        self._truncation = LogTruncation(
            self._local_log, self._durability, self._epochs, self._producer_txns, self._compaction
        )

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig, *, now_ms: int, high_watermark: int = 0
    ) -> Log:
        """Create the log in `directory`, or load and recover the one that is there (load_log); the
        transactions ended below the partition's checkpointed `high_watermark` are settled."""
        loaded = load_log(directory, config, high_watermark, now_ms=now_ms)
        log = cls(directory, config, loaded)
        if loaded.marker_found:
            log._durability.consume_clean_shutdown_marker()
        log._log_start_offset = log._truncation.on_open(loaded.log_start_offset, config)
        log._durability.on_open(loaded.recovery_point, clean=loaded.clean_shutdown, now_ms=now_ms)
        if (corrupt := loaded.corrupt) is not None:
            log._local_log.set_aside(corrupt.segment_base_offset, config.index_interval_bytes)
        log.checkpoint()
        return log

    # --- state ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (exclusive end of the log)."""
        # LocalLog.log_end_offset without a second call: every append and read asks for it.
        return self._local_log.segments[-1].next_offset

    @property
    def log_end_unknown(self) -> bool:
        """Bytes no frame bounds follow the log end offset (an active segment found corrupt at
        open, segment_loading.py): it may lie below records this replica acknowledged."""
        return self._local_log.segments[-1].unframed_tail

    @property
    def recovery_point(self) -> int:
        """Every offset below it is on disk (fsynced); recovery re-checks from here."""
        return self._durability.recovery_point

    @property
    def has_unflushed_records(self) -> bool:  # the flush policy has work to check
        return self._durability.has_unflushed_records

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        return self._epochs.entries()

    def segments(self) -> list[SegmentInfo]:  # oldest first (for tests and tools)
        return self._local_log.segment_infos()

    def size_bytes(self) -> int:
        return self._local_log.size_bytes()

    def producer_entries(self) -> list[ProducerEntry]:
        """Every idempotent producer the partition remembers, by producer id."""
        return self._producer_txns.entries()

    @property
    def producer_count(self) -> int:
        """How many idempotent producers the partition remembers (the metrics' gauge)."""
        return self._producer_txns.producer_count

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer, at exactly this epoch, has a transaction open here: its next
        transactional batches need no new check with the coordinator (KIP-890)."""
        return self._producer_txns.has_open_transaction(producer_id, producer_epoch)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The last stable offset (LSO) given the partition's high watermark: no read_committed
        reader sees an offset at or above it, as a transaction there is open or its marker not
        replicated (transaction_index.py). Never below the log start (Kafka clamps too)."""
        return self._producer_txns.last_stable_offset(
            high_watermark, self.log_end_offset, self._log_start_offset
        )

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTransaction]:
        """Aborted transactions that may lie in [fetch_offset, upper_bound), by first offset."""
        self._check_open()
        return self._producer_txns.aborted(
            self._local_log.base_offsets_from(fetch_offset), fetch_offset, upper_bound
        )

    def transaction_index(self) -> dict[int, list[AbortedTransaction]]:
        """Each segment's aborted-transaction index entries (for tests and tools)."""
        return self._producer_txns.transaction_index()

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """KIP-101: (largest epoch <= leader_epoch, end offset of that epoch), or (-1, -1)."""
        return self._epochs.end_offset_for_epoch(leader_epoch, self.log_end_offset)

    def start_leader_epoch(self, leader_epoch: int) -> None:
        """This replica leads from `leader_epoch` on, which starts at the log end (Kafka's
        maybeAssignEpochStartOffset at makeLeader). Without the entry, a follower holding
        batches of the previous epoch that this replica never got would ask for an epoch it
        does not know, be answered "undefined", and truncate to its high watermark, which may
        lie below records the previous leader acknowledged. With it, the answer is where this
        log leaves that follower's (KIP-101). In memory until the epoch's first record."""
        self._check_open()
        if leader_epoch > self._epochs.latest_epoch:
            self._epochs.assign(leader_epoch, self.log_end_offset)

    # --- appending -----------------------------------------------------------------------------

    def append_as_leader(
        self,
        batches: bytes,
        *,
        leader_epoch: int,
        now_ms: int,
        allow_control_batches: bool = False,
        allow_transactional: bool = False,
    ) -> AppendInfo:
        """Validate producer batches, assign offsets from the log end offset, stamp the leader epoch
        (and LogAppendTime when the topic uses it) and store them, or store nothing and raise a
        SamsaError (append_info.py's checks: timestamps bounded around `now_ms`, keys required by
        cleanup.policy=compact). fsynced before returning under flush.messages=1. Control batches
        only when the broker writes them, transactional ones only when the caller verified the
        producer's transaction holds this partition (else INVALID_TXN_STATE). Idempotent batches
        are checked against the producer state first: a retry stores nothing, gets its offsets."""
        self._check_open()
        assert leader_epoch >= max(0, self._epochs.latest_epoch), "fence stale leaders first"
        plan = plan_leader_append(
            batches,
            log_end_offset=self.log_end_offset,
            leader_epoch=leader_epoch,
            max_message_bytes=self.config.max_message_bytes,
            segment_bytes=self.config.segment_bytes,
            log_append_time_ms=now_ms if self.config.log_append_time else None,
            allow_control_batches=allow_control_batches,
            allow_transactional=allow_transactional,
            record_compression=self.config.record_compression,
            timestamp_bounds=self.config.timestamp_bounds(now_ms),
            keys_required=self.config.compact,
        )
        if (duplicate := self._producer_txns.check_leader_append(plan.batches)) is not None:
            return duplicate  # a retry of what the log holds
        self._append(plan, now_ms)
        return plan.info

    def append_as_follower(self, batches: bytes, *, now_ms: int) -> AppendInfo:
        """Store batches the leader gave offsets, in appends of at most segment.bytes each."""
        self._check_open()
        plans = plan_follower_appends(
            batches, log_end_offset=self.log_end_offset, segment_bytes=self.config.segment_bytes
        )
        for plan in plans:
            self._append(plan, now_ms)
        return combined_info([plan.info for plan in plans])

    def _append(self, plan: AppendPlan, now_ms: int) -> None:
        """Write, then update the in-memory state, then checkpoint and fsync (which may fail)."""
        self._durability.persist_marker_removal()
        segment_base_offset = self._local_log.append(plan, now_ms, self.config)
        epochs_changed = self._epochs.assign_batches(
            (batch.partition_leader_epoch, batch.base_offset) for batch in plan.batches
        )
        flush_due = self._durability.on_append(plan.info.record_count)
        self._producer_txns.on_append(plan.batches, segment_base_offset, now_ms)
        if epochs_changed:
            self._durability.checkpoint_epochs(self._epochs.entries())
        if flush_due:
            self._durability.flush(now_ms=now_ms)

    def _on_segment_rolled(self, base_offset: int) -> None:
        """The LocalLog created the segment at `base_offset`, before an append goes into it: the
        next flush fsyncs the directory, and the producer state is snapshotted there."""
        self._durability.on_roll()
        self._producer_txns.on_roll(self._local_log.base_offsets)

    def reconfigure(self, config: LogConfig) -> None:
        """Appends, rolls, retention, compaction and flushes follow `config` from now on."""
        self.config = config
        self._durability.reconfigure(config)

    def expire_producers(
        self, *, now_ms: int, expiration_ms: int, keep_exhausted: bool = False
    ) -> list[int]:
        """Forget silent producers (producer.id.expiration.ms; ProducerStateTable.expire)."""
        return self._producer_txns.expire(
            now_ms=now_ms, expiration_ms=expiration_ms, keep_exhausted=keep_exhausted
        )

    # --- reading -------------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None
    ) -> ReadResult:
        """Whole batches from the one holding `start_offset`, up to `max_bytes` (at least one whole
        batch, KIP-74), only those whose last offset is below `max_offset` (the high watermark or
        LSO; None = the log end offset); OffsetOutOfRangeError outside the log."""
        self._check_open()
        if not self._log_start_offset <= start_offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside the log [{self._log_start_offset}, "
                f"{self.log_end_offset}]: reset to the log start or end offset"
            )
        upper = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        max_bytes = min(max(max_bytes, 0), limits.fetch_partition_bytes_max)
        records, first_offset, next_offset = self._local_log.read(start_offset, max_bytes, upper)
        return ReadResult(
            records, first_offset, next_offset, self._log_start_offset, self.log_end_offset
        )

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp_ms`
        (StorageError when an unframed tail could hold it: LocalLog.offset_for_timestamp)."""
        self._check_open()
        return self._local_log.offset_for_timestamp(timestamp_ms, self._log_start_offset)

    def max_timestamp_record(self, end_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the record stamped latest below `end_offset` (KIP-734)."""
        self._check_open()
        return self._local_log.max_timestamp_record(self._log_start_offset, end_offset)

    # --- scrubbing (scrub.py decides, services/broker/scrubber.py drives) -----------------------

    def closed_segments(self) -> list[tuple[int, int, int]]:
        """(base_offset, next segment's base offset, size_bytes) of each closed segment."""
        return self._local_log.closed_segments()

    def read_closed_segment(
        self, base_offset: int, size_bytes: int, position: int, length: int
    ) -> bytes | None:
        """Up to `length` bytes at `position` of the closed segment at `base_offset` as it is now
        (None when gone or resized since: retention, compaction)."""
        self._check_open()
        return self._local_log.read_closed_segment(base_offset, size_bytes, position, length)

    def truncate_at_batch(self, base_offset: int, size_bytes: int, position: int) -> int | None:
        """Cut the log at byte `position` of the segment at `base_offset` (a bad batch's start,
        all before it sound) and drop every later segment; the new log end offset, or None (no
        change) when that segment is gone or changed size since (retention, compaction,
        truncation). Only a replica outside the ISR may: it re-fetches all it drops."""
        self._check_open()
        log_start_offset = self._truncation.cut_at_batch(
            base_offset, size_bytes, position, self._log_start_offset
        )
        if log_start_offset is None:
            return None
        self._log_start_offset = log_start_offset
        return self.log_end_offset

    # --- truncation and deletion (log_truncation.py) -------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Replication: drop every batch holding an offset >= `offset`, across segments. A batch
        that straddles `offset` is dropped whole (the log end offset becomes its base offset);
        leaders only ever ask for batch boundaries (KIP-101 end offsets, high watermarks)."""
        self._check_open()
        self._log_start_offset = self._truncation.truncate_to(
            offset, self._log_start_offset, self.config
        )

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at `offset` (a follower that fell
        below the leader's log start offset)."""
        self._check_open()
        self._log_start_offset = self._truncation.truncate_fully_and_start_at(offset, self.config)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (<= log end offset), delete
        the segments wholly below it, checkpoint it. Returns the log start offset."""
        self._check_open()
        self._log_start_offset = self._truncation.delete_records(offset, self._log_start_offset)
        return self._log_start_offset

    def apply_retention(self, *, now_ms: int, high_watermark: int) -> int:
        """Delete segments past retention.ms / retention.bytes (the active one too, after rolling
        a new one at the log end) or closed and below the log start offset, wholly below the
        partition's `high_watermark`; returns how many were deleted."""
        self._check_open()
        count, self._log_start_offset = self._truncation.apply_retention(
            self.config, self._log_start_offset, now_ms=now_ms, high_watermark=high_watermark
        )
        return count

    # --- compaction (log_compaction.py; cleanup.policy=compact) ---------------------------------

    def compact(self, *, now_ms: int, high_watermark: int) -> CompactionResult:
        """One whole pass here, due or not: `plan_compaction`, the job's `run` (the broker's
        cleaner task runs it on a worker thread), `finish_compaction`."""
        job = self.plan_compaction(now_ms=now_ms, high_watermark=high_watermark)
        if job is None:
            return NOTHING_CLEANED
        return self.finish_compaction(job, job.run())

    def compaction_due(self, *, now_ms: int, high_watermark: int) -> bool:
        """min.cleanable.dirty.ratio of the cleanable bytes (below the last stable offset) was
        written since the last pass, or something that pass kept may go now."""
        self._check_open()
        return self._compaction.due(self.config, now_ms=now_ms, high_watermark=high_watermark)

    def plan_compaction(self, *, now_ms: int, high_watermark: int) -> CleaningJob | None:
        """The pass over the closed segments wholly below the last stable offset (which the
        partition's `high_watermark` bounds); None when there is nothing to clean."""
        self._check_open()
        return self._compaction.plan(
            self.config, self._log_start_offset, now_ms=now_ms, high_watermark=high_watermark
        )

    def finish_compaction(self, job: CleaningJob, cleaned: Cleaned) -> CompactionResult:
        """Swap in what `job` cleaned, crash-safely; discarded (a pass for nothing) when its
        segments changed meanwhile or the log was closed."""
        if self._closed:
            job.discard()
            return NOTHING_CLEANED
        return self._compaction.finish(job, cleaned)

    # --- durability (log_durability.py) -------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment from the recovery point on; the recovery point becomes the log
        end offset. Closed segments' index files are written and fsynced too."""
        self._check_open()
        self._durability.flush(now_ms=None)

    def sync_before_records(self, path: Path) -> None:
        """`path` (the topic id, written unsynced) is durable before the first flushed record."""
        self._durability.sync_before_records(path)

    def maybe_flush(self, *, now_ms: int) -> bool:
        """Flush when flush.messages records are unflushed or flush.ms has passed."""
        self._check_open()
        return self._durability.maybe_flush(now_ms=now_ms)

    def checkpoint(self) -> None:
        """Write each changed checkpoint (recovery point, log start, leader epochs), atomically."""
        self._durability.checkpoint(self._log_start_offset)

    def close(self) -> None:
        """Flush, write every index file, checkpoint and the producer state, then the clean-
        shutdown marker (LogDurability.close), closing the files even when that fails."""
        if self._closed:
            return
        self._closed = True
        with closing(self._local_log):
            self._durability.close(self._log_start_offset)

    def _check_open(self) -> None:
        assert not self._closed, "the log is closed"
