"""What a partition log makes durable, and how: fsyncs, checkpoints, the clean-shutdown marker.

Theory of operation (Kafka's recovery point and checkpoint files, as LocalLog and UnifiedLog keep
them; DESIGN.md §3). Nothing is fsynced on append unless flush.messages says so (1 = fsync every
append): `on_append` counts the records and answers whether that many wait. `flush` fsyncs the
files the partition wrote beside a new log without fsync (its topic id, with the directory and
its entry in the data directory: once per created log, `persist_partition_files`), then the
log's segments from the one holding the recovery point on (after the transaction index files,
producer_transactions.py, so that every index entry below the new recovery point is durable),
then the producer snapshots the rolls since wrote without fsync (recovery trusts every snapshot
at or below the recovery point: Kafka's flush after a roll fsyncs it too), then, when a file was
created or deleted since the last flush, the directory; the recovery point then becomes the log
end offset. `maybe_flush` is the periodic check (flush.messages or flush.ms). A truncation lowers
the recovery point to the new log end offset, never raises it; replication's fdatasyncs the segment
it cut first (`sync_tail_cut`).

Checkpoints (recovery point, log start offset, leader epochs; where the cleaner got to, through
`checkpoint_cleaner`) are written atomically (checkpoint_file.py), and only those whose content
changed: what each file holds on disk is remembered, and an absent file means its default
(loading.py), so a brand-new log writes none and creating thousands of partitions costs no
fsyncs. `Log` (log.py) decides when to flush and checkpoint, and hands in the log start
offset, which it keeps.

`close` writes the clean-shutdown marker last; `open` deletes it after loading without waiting for
the deletion to be durable (`consume_clean_shutdown_marker`) — the first change to the log's files
waits for it instead (`persist_marker_removal`), so a broker restarting 10,000 logs does not pay
10,000 directory fsyncs. Two kinds of log close without an fsync, which is what lets a broker
holding thousands of partitions stop within seconds (~2 ms of fsyncs each otherwise): one
untouched since a clean open (every change to its files persists the marker's removal first, so
they are what the last close left: the marker goes back as it was, `restore_clean_shutdown_marker`,
and if an OS crash loses it the next open re-checks the log, which never lies), and one that holds
no record (an open without the marker has nothing to re-check). Both still write a changed
checkpoint (a log start that DeleteRecords moved), and an index file the open found damaged is
rewritten (indexes are checked at every open, so it needs no fsync). A log that closes with
records snapshots its producer state at the log end (so a clean open replays nothing), or, when
the state is empty, deletes every snapshot (so a clean open without one is empty).

Invariant: recovery_point <= the log end offset (a truncation passes the new one in). This module
only calls methods of the log's parts it is given (its LocalLog, leader-epoch cache and producer
and transaction state) and of `Segment` objects, and the functions of checkpoint_file.py; it must
not import log.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.services.broker.log import policy
from samsa.services.broker.log.checkpoint_file import (
    fsync_directory,
    fsync_file,
    write_atomically,
    write_atomically_many,
)
from samsa.services.broker.log.checkpoint_format import encode_checkpoint
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.loading import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
)

if TYPE_CHECKING:
    from pathlib import Path

    from samsa.services.broker.log.leader_epoch import LeaderEpochCache
    from samsa.services.broker.log.local_log import LocalLog
    from samsa.services.broker.log.producer_transactions import ProducerTransactions


class LogDurability:
    """One log's recovery point, unflushed-record count, checkpoint contents on disk and
    clean-shutdown marker state, over the log's parts it is given. Every method runs on the
    log's thread."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        checkpointed: dict[str, bytes],
        *,
        directory_dirty: bool,
        local_log: LocalLog,
        epochs: LeaderEpochCache,
        producer_txns: ProducerTransactions,
    ) -> None:
        self._directory = directory
        self._config = config
        self._local_log = local_log
        self._epochs = epochs
        self._producer_txns = producer_txns
        # What each checkpoint file holds on disk, so that unchanged ones are not rewritten.
        self._checkpointed = checkpointed
        self._recovery_point = 0
        self._unflushed_records = 0
        self._last_flush_ms = 0
        # A segment file was created or deleted since the last flush: it fsyncs the directory.
        self._directory_dirty = directory_dirty
        # The clean-shutdown marker was unlinked at open and no directory fsync has followed yet.
        self._marker_removal_unsynced = False
        # Files the partition keeps beside the log (its topic id) not yet made durable.
        self._unsynced_partition_files: list[Path] = []

    @property
    def recovery_point(self) -> int:
        """Every offset below it is on disk (fsynced); recovery re-checks from here."""
        return self._recovery_point

    @property
    def has_unflushed_records(self) -> bool:
        return self._unflushed_records > 0

    @property
    def marker_removal_unsynced(self) -> bool:
        return self._marker_removal_unsynced

    # --- the clean-shutdown marker -------------------------------------------------------------

    def consume_clean_shutdown_marker(self) -> None:
        """Delete the marker found at open (a crash from now on must not look like a clean
        shutdown), leaving the deletion's directory fsync to `persist_marker_removal`."""
        (self._directory / CLEAN_SHUTDOWN_FILE).unlink()
        self._marker_removal_unsynced = True

    def persist_marker_removal(self) -> None:
        """Make the clean-shutdown marker's removal durable before the first change to the log's
        files after a clean open. Until then the files are exactly what `close` left, so a
        marker that an OS crash brings back still tells the truth; after a change it would lie,
        and the next open would trust segments that are not what close left (the unflushed tail
        would skip its re-check). One directory fsync per log, paid only by logs that are
        written to, instead of one per log at open."""
        if self._marker_removal_unsynced:
            fsync_directory(self._directory)
            self._marker_removal_unsynced = False

    def restore_clean_shutdown_marker(self) -> None:
        """Put back the marker a clean open consumed, before any change to the log's files:
        no fsync, since the files are still what the close that wrote it left."""
        assert self._marker_removal_unsynced, "the log's files changed since the clean open"
        (self._directory / CLEAN_SHUTDOWN_FILE).touch()
        self._marker_removal_unsynced = False

    def write_clean_shutdown_marker(self) -> None:
        """The last write of `close`; it fsyncs the directory after everything before it."""
        write_atomically(self._directory / CLEAN_SHUTDOWN_FILE, b"")

    def reconfigure(self, config: LogConfig) -> None:
        """flush.messages and flush.ms from `config` from now on."""
        self._config = config

    # --- the log's steps -----------------------------------------------------------------------

    def on_open(self, recovery_point: int | None, *, clean: bool, now_ms: int) -> None:
        """The loaded log's recovery point: its log end after a clean shutdown, else the
        checkpointed `recovery_point` (0 when corrupt) but never above the log end; flush.ms
        counts from `now_ms`."""
        log_end_offset = self._local_log.log_end_offset
        self._recovery_point = log_end_offset if clean else min(recovery_point or 0, log_end_offset)
        self._last_flush_ms = now_ms

    def on_append(self, record_count: int) -> bool:
        """Count appended records; True when flush.messages of them wait (the log flushes)."""
        self._unflushed_records += record_count
        return self._unflushed_records >= self._config.flush_messages

    def on_roll(self) -> None:
        """A segment file was created (and maybe an empty one deleted): the next flush fsyncs
        the directory."""
        self._directory_dirty = True

    def on_truncate(self, log_end_offset: int, *, forget_unflushed: bool) -> None:
        """The log lost its tail (segment files deleted or cut). `forget_unflushed` zeroes the
        unflushed-record count (the scrubber's cut, which flushes right after); otherwise it
        stays, for the records below the new log end that may still be unflushed."""
        self._directory_dirty = True
        self._recovery_point = min(self._recovery_point, log_end_offset)
        if forget_unflushed:
            self._unflushed_records = 0

    def on_truncate_fully(self, offset: int) -> None:
        """The log restarts empty at `offset`: nothing is left to flush (the log fsyncs the
        directory itself, after the producer snapshots are gone too)."""
        self._recovery_point = offset
        self._unflushed_records = 0

    def on_delete_front(self, first_base_offset: int) -> None:
        """The segments below `first_base_offset` are deleted (their deletion made durable):
        nothing below it is left to recover, so the recovery point is at least there (Kafka's
        updateLogStartOffset). Otherwise a restart after retention took every segment would
        find the recovery point below the log end and drop the producer snapshot there, the
        only record of the producers left."""
        self._recovery_point = max(self._recovery_point, first_base_offset)

    def sync_tail_cut(self) -> None:
        """fdatasync the segment a replication truncation just cut (its new size), before any
        checkpoint can outlive it: the leader-epoch checkpoint the next append writes is
        durable, and after an OS crash that brought the cut batches back the new epoch would
        claim the old epoch's records at its offsets, which KIP-101 then never truncates. The
        segments it deleted need no fsync here: that checkpoint fsyncs the directory, and so
        does the next flush (`on_truncate`)."""
        self._local_log.segments[-1].flush(indexes=False)

    def sync_directory(self) -> None:
        """Make segment files' creations and deletions durable now."""
        fsync_directory(self._directory)

    # --- flushing ------------------------------------------------------------------------------

    def sync_before_records(self, path: Path) -> None:
        """`path`, written beside the log without an fsync, is made durable by the next flush
        before any record (`persist_partition_files`)."""
        self._unsynced_partition_files.append(path)

    def persist_partition_files(self) -> None:
        """fsync the files `sync_before_records` named, the directory, and its entry in the data
        directory: a flushed record never outlives the topic id that says whose it is (a
        directory whose id an OS crash emptied holding flushed records is refused at open, not
        wiped). Once per created log, at its first flush: creating partitions costs no fsync."""
        if not self._unsynced_partition_files:
            return
        for path in self._unsynced_partition_files:
            fsync_file(path)
        fsync_directory(self._directory)
        fsync_directory(self._directory.parent)
        self._unsynced_partition_files.clear()
        self._directory_dirty = False  # every entry so far is durable

    def maybe_flush(self, *, now_ms: int) -> bool:
        """Flush when flush.messages records are unflushed or flush.ms has passed since the
        last flush; answers whether it did."""
        if not policy.should_flush(
            self._config,
            unflushed_records=self._unflushed_records,
            last_flush_ms=self._last_flush_ms,
            now_ms=now_ms,
        ):
            return False
        self.flush(now_ms=now_ms)
        return True

    def flush(self, *, now_ms: int | None) -> None:
        """fsync the transaction index files written since the last flush, then every segment
        from the one holding the recovery point on (closed ones' index files are written and
        fsynced too), the producer snapshots up to the log end written without, and the
        directory when it changed; the recovery point becomes the log end offset. `now_ms`
        restarts flush.ms's clock; None leaves it (an explicit `Log.flush`)."""
        self.persist_partition_files()
        log_end_offset = self._local_log.log_end_offset
        unflushed = self._local_log.segments_from(self._recovery_point)
        self._producer_txns.sync()
        for segment in unflushed:
            segment.flush(indexes=segment.closed)
        if self._producer_txns.sync_snapshots(0, log_end_offset):
            self._directory_dirty = True  # their entries too (a roll set it already)
        if self._directory_dirty:
            fsync_directory(self._directory)
            self._directory_dirty = False
        self._recovery_point = log_end_offset
        self._unflushed_records = 0
        if now_ms is not None:
            self._last_flush_ms = now_ms

    # --- checkpoints ---------------------------------------------------------------------------

    def checkpoint(self, log_start_offset: int) -> None:
        """Write the recovery point, log start offset and leader-epoch checkpoints atomically
        (those whose content changed since they were last written).

        An epoch that starts at the log end holds no record yet (Log.start_leader_epoch) and is
        left out of the file until its first record: a broker taking over, or shutting down
        with, thousands of leaderships pays no file write each (~0.4-1.4 ms here; 5,000 led
        empty partitions took 7 s to stop). A restart before then loses nothing: the entry has
        no batches of its own until an append, and batches beyond the checkpointed recovery
        point are scanned at the next open, their epochs re-read from their headers."""
        log_end_offset = self._local_log.log_end_offset
        entries = [entry for entry in self._epochs.entries() if entry[1] < log_end_offset]
        self._write_checkpoints(
            {
                RECOVERY_POINT_CHECKPOINT_FILE: encode_checkpoint([(self._recovery_point,)]),
                LOG_START_OFFSET_CHECKPOINT_FILE: encode_checkpoint([(log_start_offset,)]),
                LEADER_EPOCH_CHECKPOINT_FILE: encode_checkpoint(entries),
            }
        )

    def checkpoint_epochs(self, epoch_entries: list[tuple[int, int]]) -> None:
        """Write the leader-epoch checkpoint alone (an append that started a new epoch)."""
        self._write_checkpoints({LEADER_EPOCH_CHECKPOINT_FILE: encode_checkpoint(epoch_entries)})

    def checkpoint_cleaner(
        self, cleaned_to: int, due_ms: int, first_cleaned: list[tuple[int, int]]
    ) -> None:
        """Write where the cleaner got to, atomically, when it changed (log_compaction.py):
        (cleaned_to, due_ms), then the first-cleaned ranges (delete_horizon.py)."""
        entries = [(cleaned_to, due_ms), *first_cleaned]
        self._write_checkpoints({CLEANER_OFFSET_CHECKPOINT_FILE: encode_checkpoint(entries)})

    # --- closing -------------------------------------------------------------------------------

    def close(self, log_start_offset: int) -> None:
        """Make the log's close durable, as the module docstring says: flush, write every index
        file, checkpoint and the producer state, then the marker — or, for a log untouched since
        a clean open or one that holds no record, no fsync. The caller closes the segments."""
        local_log = self._local_log
        if self._marker_removal_unsynced:
            # Only an index the open found damaged and rebuilt is written.
            local_log.write_indexes(fsync=False)
            self.checkpoint(log_start_offset)
            self.restore_clean_shutdown_marker()
        elif len(local_log.segments) == 1 and local_log.segments[0].size_bytes == 0:
            self.checkpoint(log_start_offset)
            self._producer_txns.close(local_log.log_end_offset, local_log.base_offsets)
        else:
            self.flush(now_ms=None)
            local_log.write_indexes(fsync=True)
            self.checkpoint(log_start_offset)
            self._producer_txns.close(local_log.log_end_offset, local_log.base_offsets)
            self.write_clean_shutdown_marker()

    def _write_checkpoints(self, contents: dict[str, bytes]) -> None:
        changed = {
            name: data for name, data in contents.items() if self._checkpointed.get(name) != data
        }
        if changed:
            write_atomically_many({self._directory / name: data for name, data in changed.items()})
            self._checkpointed.update(changed)
