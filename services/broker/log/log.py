"""The partition log: one partition's storage engine (Kafka's UnifiedLog).

Theory of operation. A log is a directory of segments sorted by base offset, the last one active,
held by a `LocalLog` (local_log.py, Kafka's LocalLog): the segments and their base offsets, the
lookup of an offset's segment, reads, appends to the active segment and rolls, truncation and
deletion of segments. This module composes it with everything else a partition's log keeps, and
calls it between the steps that make each change durable. Appends are validated and planned here
by append_info.py (all-or-nothing: a rejected append writes nothing) and checked against the
producer state before local_log.py writes them. Retention and DeleteRecords delete whole closed
segments and move the log start offset (retention.py decides, local_log.py deletes, this module
moves the log start and makes it durable); compaction rewrites closed segments and swaps them in
crash-safely (cleaner.py, with compaction.py's per-batch rules; the rewriting may run on another
thread). Time (`now_ms`) is always passed in; the log never reads a clock.

Durability (DESIGN.md §3). A LogDurability (log_durability.py) holds the recovery point, the
unflushed-record count and what each checkpoint file holds, and does the fsyncs: nothing is
fsynced on append unless flush.messages says so, `flush` fsyncs everything from the recovery point
on. This module decides when: checkpoints (recovery point, log start offset, leader epochs) are
written by `checkpoint`, `close`, and whenever a value moves backwards or the log start moves (so
a crash never leaves a checkpoint claiming more than the log holds); the clean-shutdown marker's
removal at `open` is made durable before the first change to the log's files.

Idempotent producers (DESIGN §5). The log keeps each producer's epoch and last 5 batches
(producer_state.py, pure) beside it in a ProducerLogState (producer_log_state.py), which this
module feeds at each step that moves the log end. A leader append is checked against it before a
byte is written: a retry of batches the log holds answers their offsets and stores nothing, a gap
or a stale epoch raises. Follower appends and replay feed the same table without checks. It is
snapshotted at each roll and at close, rebuilt at open (loading.py) and after truncation
(producer_snapshots.py); retention never touches it, expiry (`expire_producers`) does.

Transactions (DESIGN §5). The markers that end transactions are applied with the producer state;
a TransactionLogState (transaction_log_state.py) keeps each aborted transaction's entry in the
`.txnindex` file of the segment holding its marker, and the ended transactions whose marker the
high watermark has not passed. From them and the open transactions come the last stable offset
(`last_stable_offset`) and what a read_committed fetch must skip (`aborted_transactions`). The
index is synced before a flush moves the recovery point and rebuilt by every replay of the log.

Loading and recovery (`open`): loading.py; `open` builds the log from what it found.

Invariants: log_start_offset <= log_end_offset; recovery_point <= log_end_offset; epochs in the
cache start inside the log (the segments' invariants are local_log.py's).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from samsa.common import limits
from samsa.common.errors import OffsetOutOfRangeError
from samsa.services.broker.log import cleaner, policy, retention
from samsa.services.broker.log.append_info import (
    AppendInfo,
    AppendPlan,
    plan_follower_append,
    plan_leader_append,
)
from samsa.services.broker.log.cleaner import (
    NOTHING_CLEANED,
    Cleaned,
    CleaningJob,
    CompactionResult,
)
from samsa.services.broker.log.compaction import NEVER, AbortedRanges
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.leader_epoch import LeaderEpochCache
from samsa.services.broker.log.loading import load_log
from samsa.services.broker.log.local_log import LocalLog, SegmentInfo
from samsa.services.broker.log.log_durability import LogDurability
from samsa.services.broker.log.producer_log_state import ProducerLogState
from samsa.services.broker.log.producer_state import NO_OFFSET, ProducerEntry
from samsa.services.broker.log.segment import Segment
from samsa.services.broker.log.transaction_index import AbortedTransaction
from samsa.services.broker.log.transaction_log_state import TransactionLogState


class ReadResult(NamedTuple):
    """Whole stored batches from the one holding the requested offset; `next_offset` is where
    the next read should start: the requested offset again when `records` is empty, unless
    only a compacted-away gap lies between it and the log end offset (then the log end)."""

    records: bytes
    first_offset: int
    next_offset: int
    log_start_offset: int
    log_end_offset: int


class Log:
    """One partition's log. Build it with `Log.open`; every method runs on one thread."""

    def __init__(
        self, directory: Path, config: LogConfig, segments: list[Segment], epochs: LeaderEpochCache
    ) -> None:
        self.directory = directory
        self.config = config
        # The segments and their base offsets: reads, appends, rolls, truncation, deletion.
        self._local_log = LocalLog(directory, segments, on_roll=self._on_segment_rolled)
        self._epochs = epochs
        self._log_start_offset = segments[0].base_offset
        self._closed = False
        # The recovery point, unflushed records, checkpoint contents and the clean-shutdown
        # marker's state (log_durability.py).
        self._durability = LogDurability.empty(directory, config)
        # Idempotent producers' epochs and last batches, at the log end offset, with their
        # snapshot files (producer_log_state.py).
        self._producers = ProducerLogState.empty(directory)
        # The aborted-transaction index and the ended-but-unreplicated transactions
        # (transaction_log_state.py).
        self._transactions = TransactionLogState.empty(directory)
        # Where the last compaction pass ended, and when something it kept for its delete
        # horizon may go (compaction_due). In memory: the first pass after an open is due.
        self._cleaned_to = 0
        self._compaction_due_ms = NEVER

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int) -> Log:
        """Create the log in `directory`, or load and recover the one that is there."""
        loaded = load_log(directory, config)
        log = cls(directory, config, loaded.segments, loaded.epochs)
        # No checkpoint write fsyncs the new segment's directory entry now: the first flush does.
        log._durability = LogDurability(
            directory, config, loaded.checkpointed, directory_dirty=loaded.created
        )
        log._producers = ProducerLogState(
            directory, loaded.producers.producers, loaded.snapshot_offsets
        )
        log._transactions = loaded.transactions
        if loaded.marker_found:
            log._durability.consume_clean_shutdown_marker()
        log._finish_open(
            loaded.log_start_offset, loaded.recovery_point, loaded.clean_shutdown, now_ms
        )
        return log

    def _finish_open(
        self, log_start_offset: int | None, recovery_point: int | None, clean: bool, now_ms: int
    ) -> None:
        log_end_offset = self.log_end_offset
        self._log_start_offset = max(log_start_offset or 0, self._local_log.base_offsets[0])
        if self._log_start_offset > log_end_offset:
            self.truncate_fully_and_start_at(self._log_start_offset)
        self._epochs.truncate_from_end(self.log_end_offset)
        self._epochs.truncate_from_start(self._log_start_offset)
        self._durability.on_open(
            self.log_end_offset if clean else min(recovery_point or 0, self.log_end_offset),
            now_ms=now_ms,
        )
        self.checkpoint()

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
    def recovery_point(self) -> int:
        """Every offset below it is on disk (fsynced); recovery re-checks from here."""
        return self._durability.recovery_point

    @property
    def has_unflushed_records(self) -> bool:
        """Records were appended since the last flush (the flush policy has work to check)."""
        return self._durability.has_unflushed_records

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        return self._epochs.entries()

    def segments(self) -> list[SegmentInfo]:
        """The segments, oldest first (for tests and tools)."""
        return self._local_log.segment_infos()

    def size_bytes(self) -> int:
        return self._local_log.size_bytes()

    def producer_entries(self) -> list[ProducerEntry]:
        """Every idempotent producer the partition remembers, by producer id."""
        return self._producers.entries()

    @property
    def producer_count(self) -> int:
        """How many idempotent producers the partition remembers (the metrics' gauge)."""
        return self._producers.producer_count

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer, at exactly this epoch, has a transaction open here: its next
        transactional batches need no new check with the coordinator (KIP-890), since the
        partition is already in that transaction and a marker ends it."""
        entry = self._producers.entry(producer_id)
        return (
            entry is not None
            and entry.producer_epoch == producer_epoch
            and entry.current_txn_first_offset != NO_OFFSET
        )

    def last_stable_offset(self, high_watermark: int) -> int:
        """The last stable offset (LSO) given the partition's high watermark: no read_committed
        reader sees an offset at or above it, because a transaction there is still open or its
        marker is not yet replicated (transaction_index.py). Never below the log start: a
        transaction open across a DeleteRecords (or retention) keeps its records beyond it
        unstable, not the offsets that are gone (Kafka clamps its first unstable offset too)."""
        stable = self._transactions.last_stable_offset(
            self._producers.open_transaction_first_offsets(),
            min(high_watermark, self.log_end_offset),
        )
        return max(stable, min(self._log_start_offset, high_watermark))

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTransaction]:
        """The aborted transactions whose records may lie in [fetch_offset, upper_bound), by
        first offset: what a read_committed fetch returns beside its batches."""
        self._check_open()
        return self._transactions.aborted(
            self._local_log.base_offsets_from(fetch_offset), fetch_offset, upper_bound
        )

    def transaction_index(self) -> dict[int, list[AbortedTransaction]]:
        """Each segment's aborted-transaction index entries (for tests and tools)."""
        return self._transactions.entries()

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """KIP-101: (largest epoch <= leader_epoch, end offset of that epoch), or (-1, -1)."""
        return self._epochs.end_offset_for_epoch(leader_epoch, self.log_end_offset)

    def start_leader_epoch(self, leader_epoch: int) -> None:
        """This replica leads from `leader_epoch` on, which starts at the log end (Kafka's
        maybeAssignEpochStartOffset at makeLeader). Without the entry, a follower holding
        batches of the previous epoch that this replica never got would ask for an epoch it
        does not know, be answered "undefined", and truncate to its high watermark, which may
        lie below records the previous leader acknowledged (the replication simulation found
        it). With it, the answer is where this log leaves that follower's (KIP-101).

        Kept in memory, and written by the first checkpoint after the epoch's first record
        (`checkpoint`): a broker taking over, or shutting down with, thousands of leaderships
        pays no file write each (~0.4-1.4 ms here). A restart before then loses nothing: the
        entry has no batches of its own until an append, and batches beyond the checkpointed
        recovery point are scanned at the next open, their epochs re-read from their headers."""
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
        """Validate producer batches, assign offsets from the log end offset, stamp the leader
        epoch (and LogAppendTime when the topic uses it) and store them — or store nothing and
        raise CorruptRecordError / RecordTooLargeError / InvalidRecordError /
        UnsupportedFormatError / UnsupportedCompressionError. With flush.messages=1 the append
        is fsynced before this returns. Control batches only when the broker writes them,
        transactional batches only when the caller verified the producer's transaction holds
        this partition (else INVALID_TXN_STATE).

        Idempotent batches (with a producer id) are checked against the producer state first:
        a stale epoch or a sequence gap raises SamsaError with INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or DUPLICATE_SEQUENCE_NUMBER; batches
        the log already holds (a retry whose answer was lost) store nothing and return their
        original offsets, with record_count 0."""
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
        )
        duplicate = self._producers.check_leader_append(plan.batches)
        if duplicate is not None:
            return duplicate
        self._append(plan, now_ms)
        return plan.info

    def append_as_follower(self, batches: bytes, *, now_ms: int) -> AppendInfo:
        """Store batches whose offsets the leader assigned (at or after the log end offset)."""
        self._check_open()
        plan = plan_follower_append(
            batches, log_end_offset=self.log_end_offset, segment_bytes=self.config.segment_bytes
        )
        self._append(plan, now_ms)
        return plan.info

    def _append(self, plan: AppendPlan, now_ms: int) -> None:
        self._durability.persist_marker_removal()
        segment_base_offset = self._local_log.append(plan, now_ms, self.config)
        epochs_changed = False
        for batch in plan.batches:
            if batch.partition_leader_epoch >= 0:
                epochs_changed |= self._epochs.assign(
                    batch.partition_leader_epoch, batch.base_offset
                )
        if epochs_changed:
            self._durability.checkpoint_epochs(self._epochs.entries())
        applied = self._producers.on_append(plan.batches)
        self._transactions.on_appended(applied.completed, applied.aborted, segment_base_offset)
        if self._durability.on_append(plan.info.record_count):
            self._flush(now_ms=now_ms)

    def _on_segment_rolled(self, base_offset: int) -> None:
        """The LocalLog created the segment at `base_offset`, before an append goes into it: the
        next flush fsyncs the directory, and the producer state is snapshotted there."""
        self._durability.on_roll()
        self._producers.on_roll(base_offset)

    def reconfigure(self, config: LogConfig) -> None:
        """The topic's configuration changed: appends, rolls, retention, compaction and the
        flush policy (flush.messages, flush.ms) follow `config` from now on."""
        self.config = config
        self._durability.reconfigure(config)

    def expire_producers(self, *, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers whose newest batch is `producer.id.expiration.ms` old."""
        return self._producers.expire(now_ms=now_ms, expiration_ms=expiration_ms)

    # --- reading -------------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None
    ) -> ReadResult:
        """Whole batches from the one holding `start_offset`, up to `max_bytes` (at least one
        whole batch, KIP-74), only those whose last offset is below `max_offset` (the high
        watermark or LSO; None = the log end offset). Raises OffsetOutOfRangeError outside
        [log_start_offset, log_end_offset]."""
        self._check_open()
        self._check_in_range(start_offset)
        upper = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        max_bytes = min(max(max_bytes, 0), limits.fetch_partition_bytes_max)
        records, first_offset, next_offset = self._local_log.read(start_offset, max_bytes, upper)
        return ReadResult(
            records, first_offset, next_offset, self._log_start_offset, self.log_end_offset
        )

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp_ms`."""
        self._check_open()
        return self._local_log.offset_for_timestamp(timestamp_ms, self._log_start_offset)

    def _check_in_range(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the log [{self._log_start_offset}, "
                f"{self.log_end_offset}]: reset to the log start or end offset"
            )

    # --- scrubbing (scrub.py decides, services/broker/scrubber.py drives) -----------------------

    def closed_segments(self) -> list[tuple[int, int, int]]:
        """(base_offset, next segment's base offset, size_bytes) of each closed segment."""
        return self._local_log.closed_segments()

    def read_closed_segment(
        self, base_offset: int, size_bytes: int, position: int, length: int
    ) -> bytes | None:
        """Up to `length` bytes at `position` of the closed segment at `base_offset`, read from
        the file as it is now; None when that segment is gone or changed size (retention,
        compaction) since the scrubber started on it."""
        self._check_open()
        return self._local_log.read_closed_segment(base_offset, size_bytes, position, length)

    def truncate_at_batch(self, base_offset: int, size_bytes: int, position: int) -> int | None:
        """Cut the log at byte `position` of the segment at `base_offset` (the start of a bad
        batch the scrubber found; everything before it checked sound) and drop every later
        segment (a log is a prefix). Returns the new log end offset, or None — nothing changed —
        when that segment is gone or changed size since (retention, compaction, truncation).
        Only a replica outside the ISR may call this: it re-fetches everything it drops."""
        self._check_open()
        if not self._local_log.can_cut_at(base_offset, size_bytes, position):
            return None
        self._durability.persist_marker_removal()
        self._local_log.cut_at(base_offset, position)
        self._durability.on_truncate(self.log_end_offset, forget_unflushed=True)
        self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        self._epochs.truncate_from_end(self.log_end_offset)
        self._on_truncated()
        self.flush()
        self.checkpoint()
        return self.log_end_offset

    # --- truncation and deletion ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Replication: drop every batch holding an offset >= `offset`, across segments. A batch
        that straddles `offset` is dropped whole (the log end offset becomes its base offset);
        leaders only ever ask for batch boundaries (KIP-101 end offsets, high watermarks)."""
        self._check_open()
        if offset >= self.log_end_offset:
            # No batch to drop, but an epoch may start at the log end with nothing written in it
            # (this replica became leader, then lost it before an append: start_leader_epoch).
            # A follower must not keep claiming it (Kafka's truncateTo does the same).
            if self._epochs.truncate_from_end(self.log_end_offset):
                self._durability.checkpoint_epochs(self._epochs.entries())
            return
        if offset < self._local_log.base_offsets[0]:
            self.truncate_fully_and_start_at(offset)
            return
        self._durability.persist_marker_removal()
        self._local_log.truncate_to(offset)
        self._durability.on_truncate(self.log_end_offset, forget_unflushed=False)
        self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        self._epochs.truncate_from_end(self.log_end_offset)
        self._on_truncated()
        self.checkpoint()

    def _on_truncated(self) -> None:
        """Rebuild the producer state, and the transaction index from where its replay began;
        what is written again from the new log end is new to the cleaner."""
        self._cleaned_to = min(self._cleaned_to, self.log_end_offset)
        rebuilt = self._producers.on_truncate(self._local_log.segments)
        self._transactions.on_replayed(rebuilt.replayed_from, rebuilt.completed, rebuilt.aborted)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at `offset` (a follower that fell
        below the leader's log start offset)."""
        self._check_open()
        assert offset >= 0
        self._durability.persist_marker_removal()
        self._local_log.truncate_fully_and_start_at(offset, self.config.index_interval_bytes)
        self._log_start_offset = offset
        self._cleaned_to = min(self._cleaned_to, offset)
        self._durability.on_truncate_fully(offset)
        self._epochs.clear()
        self._producers.on_truncate_fully()
        self._transactions.on_truncate_fully()
        self._durability.sync_directory()
        self.checkpoint()

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (<= log end offset), delete
        the segments wholly below it, checkpoint it. Returns the log start offset."""
        self._check_open()
        if not 0 <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records below {offset}: the log ends at {self.log_end_offset}"
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._delete_oldest(retention.segments_below(self._local_log.base_offsets, offset))
        return self._log_start_offset

    def apply_retention(self, *, now_ms: int, high_watermark: int) -> int:
        """Delete closed segments past retention.ms / retention.bytes or below the log start
        offset, wholly below the partition's `high_watermark` (never the active segment);
        returns how many were deleted."""
        self._check_open()
        if len(self._local_log.segments) == 1:  # only the active segment: the common idle case
            return 0
        count = retention.retention_count(
            self._local_log.segments,
            self._local_log.base_offsets,
            log_start_offset=self._log_start_offset,
            high_watermark=high_watermark,
            config=self.config,
            now_ms=now_ms,
        )
        self._delete_oldest(count)
        return count

    def _delete_oldest(self, count: int) -> None:
        """Delete the `count` oldest segments, then persist the (possibly moved) log start: never
        below the first segment left."""
        assert 0 <= count < len(self._local_log.segments), "the active segment is never deleted"
        if count:
            self._durability.persist_marker_removal()
        self._local_log.delete_oldest(count)
        self._log_start_offset = max(self._log_start_offset, self._local_log.base_offsets[0])
        self._epochs.truncate_from_start(self._log_start_offset)
        if count:
            self._transactions.retain(self._local_log.base_offsets)
            self._durability.sync_directory()
        self.checkpoint()

    # --- compaction ----------------------------------------------------------------------------

    def compact(self, *, now_ms: int, high_watermark: int) -> CompactionResult:
        """One whole compaction pass on this thread (`plan_compaction`, the job's `run`, then
        `finish_compaction`), due or not; the broker's cleaner task asks `compaction_due` first
        and runs the middle step on a worker thread."""
        job = self.plan_compaction(now_ms=now_ms, high_watermark=high_watermark)
        if job is None:
            return NOTHING_CLEANED
        return self.finish_compaction(job, job.run())

    def compaction_due(self, *, now_ms: int, high_watermark: int) -> bool:
        """min.cleanable.dirty.ratio of the cleanable bytes was written since the last pass, or
        something that pass kept for its delete horizon may go now (policy.compaction_due)."""
        self._check_open()
        if not self.config.compact:
            return False
        closed = self._local_log.closed_below(self.last_stable_offset(high_watermark))
        return policy.compaction_due(
            [(segment.base_offset, segment.size_bytes) for segment in closed],
            cleaned_to=self._cleaned_to,
            dirty_ratio=self.config.min_cleanable_dirty_ratio,
            due_ms=self._compaction_due_ms,
            now_ms=now_ms,
        )

    def plan_compaction(self, *, now_ms: int, high_watermark: int) -> CleaningJob | None:
        """cleanup.policy=compact: the pass over the closed segments wholly below the last
        stable offset (never the active one; the partition's `high_watermark` bounds it) that
        keeps the newest record per key, removes aborted transactions' batches and the COMMIT
        markers no longer needed, and keeps the newest batch of each live idempotent producer
        whole (cleaner.py); None when there is nothing to clean."""
        self._check_open()
        if not self.config.compact or len(self._local_log.segments) == 1:
            return None
        self._durability.persist_marker_removal()
        cleanable_end = self.last_stable_offset(high_watermark)
        aborted = self._transactions.aborted(
            self._local_log.base_offsets, self._log_start_offset, cleanable_end
        )
        return CleaningJob.plan(
            self._local_log.closed_below(cleanable_end),
            now_ms=now_ms,
            delete_retention_ms=self.config.delete_retention_ms,
            keep_whole=self._producers.newest_batch_base_offsets(),
            aborted=AbortedRanges(aborted),
        )

    def finish_compaction(self, job: CleaningJob, cleaned: Cleaned) -> CompactionResult:
        """Swap in what `job` cleaned, crash-safely, unless its segments changed meanwhile or
        the log was closed (then its files are discarded and the pass counts for nothing)."""
        if self._closed:
            job.discard()
            return NOTHING_CLEANED
        result = cleaner.finish(job, cleaned, self._local_log)
        if result is None:
            return NOTHING_CLEANED
        self._cleaned_to = job.cleaned_to
        self._compaction_due_ms = cleaned.due_ms
        return result

    # --- durability ----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment from the recovery point on; the recovery point becomes the log
        end offset. Closed segments' index files are written and fsynced too."""
        self._check_open()
        self._flush(now_ms=None)

    def maybe_flush(self, *, now_ms: int) -> bool:
        """Flush when flush.messages records are unflushed or flush.ms has passed."""
        self._check_open()
        if not self._durability.flush_due(now_ms=now_ms):
            return False
        self._flush(now_ms=now_ms)
        return True

    def _flush(self, *, now_ms: int | None) -> None:
        """Flush the segments from the one holding the recovery point on (`now_ms` restarts
        flush.ms's clock, None leaves it)."""
        unflushed = self._local_log.segments_from(self._durability.recovery_point)
        self._transactions.sync()  # index entries below the new recovery point are durable
        self._durability.flush(unflushed, self.log_end_offset, now_ms=now_ms)

    def checkpoint(self) -> None:
        """Write the recovery point, log start offset and leader-epoch checkpoints atomically
        (those whose content changed since they were last written).

        An epoch that starts at the log end holds no record yet (start_leader_epoch) and is left
        out of the file until its first record: losing it in a restart is what a crash before
        that record does anyway, and writing it cost every partition a broker led an fsync at
        shutdown (5,000 led empty partitions: 7 s to stop)."""
        log_end_offset = self.log_end_offset
        entries = [entry for entry in self._epochs.entries() if entry[1] < log_end_offset]
        self._durability.checkpoint(self._log_start_offset, entries)

    def close(self) -> None:
        """Flush, write every index file, checkpoint and the producer state, then the
        clean-shutdown marker. The state is snapshotted at the log end (so a clean open replays
        nothing), or, when empty, every snapshot is deleted (so a clean open without one is
        empty); the marker's write fsyncs the directory after both.

        Two kinds of log close without an fsync, which is what lets a broker holding thousands
        of partitions stop within seconds (~2 ms of fsyncs each otherwise): one untouched since
        a clean open (every change to its files persists the marker's removal first, so they
        are what the last close left: the marker goes back as it was, and if an OS crash loses
        it the next open re-checks the log, which never lies), and one that holds no record (an
        open without the marker has nothing to re-check). Both still write a changed
        checkpoint (a log start that DeleteRecords moved), and an index file the open found
        damaged is rewritten (indexes are checked at every open, so it needs no fsync)."""
        if self._closed:
            return
        if self._durability.marker_removal_unsynced:
            # Only an index the open found damaged and rebuilt is written.
            self._local_log.write_indexes(fsync=False)
            self.checkpoint()
            self._durability.restore_clean_shutdown_marker()
        elif len(self._local_log.segments) == 1 and self._local_log.segments[0].size_bytes == 0:
            self.checkpoint()
            self._producers.close(self.log_end_offset)
        else:
            self.flush()
            self._local_log.write_indexes(fsync=True)
            self.checkpoint()
            self._producers.close(self.log_end_offset)
            self._durability.write_clean_shutdown_marker()
        self._local_log.close()
        self._closed = True

    def _check_open(self) -> None:
        assert not self._closed, "the log is closed"
