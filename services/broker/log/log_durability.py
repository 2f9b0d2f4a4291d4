"""What a partition log makes durable, and when: fsyncs, checkpoints, the clean-shutdown marker.

Theory of operation (Kafka's recovery point and checkpoint files, as LocalLog and UnifiedLog keep
them; DESIGN.md §3). Nothing is fsynced on append unless flush.messages says so (1 = fsync every
append): `on_append` counts the records and answers whether that many wait. `flush` fsyncs the
segments it is handed (the log's, from the one holding the recovery point on) and, when a segment
file was created or deleted since the last flush, the directory; the recovery point then becomes
the log end offset. `flush_due` is the periodic check (flush.messages or flush.ms). A truncation
lowers the recovery point to the new log end offset, never raises it.

Checkpoints (recovery point, log start offset, leader epochs) are written atomically, and only
those whose content changed: what each file holds on disk is remembered, and an absent file means
its default (loading.py), so a brand-new log writes none and creating thousands of partitions
costs no fsyncs. `Log` decides when to checkpoint.

`close` writes the clean-shutdown marker last; `open` deletes it after loading without waiting for
the deletion to be durable (`consume_clean_shutdown_marker`) — the first change to the log's files
waits for it instead (`persist_marker_removal`), so a broker restarting 10,000 logs does not pay
10,000 directory fsyncs.

Invariant: recovery_point <= the log end offset, which `Log` (log.py) passes in at every step
that moves it. This module only calls methods on `Segment` objects and the functions of
checkpoint_file.py, and must not import log.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from samsa.services.broker.log import policy
from samsa.services.broker.log.checkpoint_file import (
    fsync_directory,
    write_atomically,
    write_atomically_many,
)
from samsa.services.broker.log.checkpoint_format import encode_checkpoint
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.loading import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
)

if TYPE_CHECKING:
    from pathlib import Path

    from samsa.services.broker.log.segment import Segment


class LogDurability:
    """One log's recovery point, unflushed-record count, checkpoint contents on disk and
    clean-shutdown marker state. Every method runs on the log's thread."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        checkpointed: dict[str, bytes],
        *,
        directory_dirty: bool,
    ) -> None:
        self._directory = directory
        self._config = config
        # What each checkpoint file holds on disk, so that unchanged ones are not rewritten.
        self._checkpointed = checkpointed
        self._recovery_point = 0
        self._unflushed_records = 0
        self._last_flush_ms = 0
        # A segment file was created or deleted since the last flush: it fsyncs the directory.
        self._directory_dirty = directory_dirty
        # The clean-shutdown marker was unlinked at open and no directory fsync has followed yet.
        self._marker_removal_unsynced = False

    @classmethod
    def empty(cls, directory: Path, config: LogConfig) -> LogDurability:
        return cls(directory, config, {}, directory_dirty=False)

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

    def on_open(self, recovery_point: int, *, now_ms: int) -> None:
        """The loaded log's recovery point; flush.ms counts from `now_ms`."""
        self._recovery_point = recovery_point
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

    def sync_directory(self) -> None:
        """Make segment files' creations and deletions durable now."""
        fsync_directory(self._directory)

    # --- flushing ------------------------------------------------------------------------------

    def flush_due(self, *, now_ms: int) -> bool:
        """flush.messages records are unflushed or flush.ms has passed since the last flush."""
        return policy.should_flush(
            self._config,
            unflushed_records=self._unflushed_records,
            last_flush_ms=self._last_flush_ms,
            now_ms=now_ms,
        )

    def flush(
        self, segments: Sequence[Segment], log_end_offset: int, *, now_ms: int | None
    ) -> None:
        """fsync `segments` (closed ones' index files are written and fsynced too) and the
        directory when it changed; the recovery point becomes `log_end_offset`. `now_ms`
        restarts flush.ms's clock; None leaves it (an explicit `Log.flush`)."""
        for segment in segments:
            segment.flush(indexes=segment.closed)
        if self._directory_dirty:
            fsync_directory(self._directory)
            self._directory_dirty = False
        self._recovery_point = log_end_offset
        self._unflushed_records = 0
        if now_ms is not None:
            self._last_flush_ms = now_ms

    # --- checkpoints ---------------------------------------------------------------------------

    def checkpoint(self, log_start_offset: int, epoch_entries: list[tuple[int, int]]) -> None:
        """Write the recovery point, log start offset and leader-epoch checkpoints atomically
        (those whose content changed since they were last written)."""
        self._write_checkpoints(
            {
                RECOVERY_POINT_CHECKPOINT_FILE: encode_checkpoint([(self._recovery_point,)]),
                LOG_START_OFFSET_CHECKPOINT_FILE: encode_checkpoint([(log_start_offset,)]),
                LEADER_EPOCH_CHECKPOINT_FILE: encode_checkpoint(epoch_entries),
            }
        )

    def checkpoint_epochs(self, epoch_entries: list[tuple[int, int]]) -> None:
        """Write the leader-epoch checkpoint alone (an append that started a new epoch)."""
        self._write_checkpoints({LEADER_EPOCH_CHECKPOINT_FILE: encode_checkpoint(epoch_entries)})

    def _write_checkpoints(self, contents: dict[str, bytes]) -> None:
        changed = {
            name: data for name, data in contents.items() if self._checkpointed.get(name) != data
        }
        if changed:
            write_atomically_many({self._directory / name: data for name, data in changed.items()})
            self._checkpointed.update(changed)
