"""Loading a partition log from its directory (Kafka's LogLoader): what `Log.open` runs first.

Theory of operation. `load_log` lists the directory once, reads the checkpoints (recovery point,
log start offset, leader epochs) and opens the segments; it returns them with what it learnt
(`LoadedLog`), and `Log.open` (log.py) builds the running log from that. Interrupted compactions
are completed or undone first. Without the clean-shutdown marker (an unclean stop) every segment
from the one holding the recovery point onward is re-checked batch by batch (framing, CRC,
increasing offsets); the first bad byte truncates its segment and every later segment is deleted,
the deletions made durable at once by a directory fsync (rare: only a cut with segments after it).
A trusted segment (below) re-read because its index files fail their check is different: its bytes
were durable, so a bad batch there is corruption at rest, and this replica may be in the ISR
(after a clean stop the broker registers as clean), where a shortened log loses acknowledged
records (DESIGN §4). Nothing is cut and no later segment deleted (segment_loading.py keeps the
segment whole, and no read skips the bad batch's offsets); the first such batch is returned
(`LoadedLog.corrupt`, a CorruptBatch as the scrubber's) and PartitionHost marks the replica
corrupt with it: the scrubber reports it, and the repair cuts there once it is out of the ISR.
A mark made before (by the scrubber, or by an earlier open) is read back from its file, and the
lower of the two kept and written (corrupt_mark.py): no open re-checks a trusted closed segment
whose index files pass, so a restart would otherwise forget it until the scrubber's next pass.
The recovery point is taken as at least the first segment's base offset: the records below it
are deleted, so none needs recovering, and the segments re-checked are the same either way; but
a checkpoint below it (a crash after retention deleted segments and before it checkpointed,
log_truncation.py) would otherwise make the producer snapshot at the first segment unusable.
Segments below the recovery point, and all segments after a clean shutdown, load their index files
after a sanity check (rebuilt from the log when they fail it) and have their tail re-framed; the
active segment's last batch is CRC-checked. The leader-epoch cache is fed the epochs of re-checked
batches that are newer than its checkpointed ones (a batch compaction removed would otherwise move
its epoch's start up to the first batch left), then (by `Log.open`) trimmed to [log start offset,
log end offset). The producer state is rebuilt last, from the newest snapshot and the batches
after it (producer_snapshots.py; after an unclean stop, from one at or below the recovery point,
as Kafka's recovery does, and the snapshots above it are written again as the replay passes their
segments), and the aborted-transaction index entries from where that replay started are rebuilt
with it (transaction_log_state.py); a `.txnindex` file that fails its check, clean shutdown or
not, makes the replay start at or below its segment. The transactions ended by a marker still at
or above the partition's checkpointed high watermark (the caller passes it) stay unstable: those
the snapshot lists and those the replay ended. A corrupt leader-epoch checkpoint is rebuilt
by re-checking the whole log; a corrupt offset checkpoint reads as None and the caller picks a
safe value. An empty directory gets one empty segment at the checkpointed log start offset (0
when there is none).

Where the cleaner got to (log_compaction.py) is read from its own checkpoint; a missing, garbled
or negative one reads as "never cleaned", so it never fails an open (Log.open then ignores one
outside the log).

This module also names the files a log directory holds besides its segments, and what an absent
checkpoint file means: log_durability.py writes them, this module reads them, and it must not
import log.py.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from samsa.services.broker.log.checkpoint_file import TEMP_SUFFIX, fsync_directory, read_if_exists
from samsa.services.broker.log.checkpoint_format import (
    CorruptCheckpointError,
    decode_checkpoint,
    encode_checkpoint,
)
from samsa.services.broker.log.compaction import NEVER
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.corrupt_mark import load_mark
from samsa.services.broker.log.leader_epoch import LeaderEpochCache
from samsa.services.broker.log.producer_snapshots import (
    Rebuilt,
    rebuild,
    snapshot_offsets,
    sync_snapshot,
)
from samsa.services.broker.log.producer_state import ProducerStateTable
from samsa.services.broker.log.scrub import CorruptBatch
from samsa.services.broker.log.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    Segment,
    parse_base_offset,
    segment_path,
)
from samsa.services.broker.log.segment_loading import open_segment
from samsa.services.broker.log.transaction_log_state import TransactionLogState

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = "clean-shutdown"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
# Where the last compaction pass ended and when a pass is next due for what it kept (Kafka's
# cleaner-offset-checkpoint, per partition): an entry "cleaned_to due_ms", then one "end_offset
# first_cleaned_ms" per range the passes first cleaned (delete_horizon.py).
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# The checkpoints `Log.checkpoint` writes (the cleaner's is written when a pass is swapped in).
CHECKPOINT_FILES = (
    RECOVERY_POINT_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
)
# The cleaner's state before any pass: nothing cleaned, nothing due for a delete horizon.
NEVER_CLEANED = (0, NEVER)
# What an absent checkpoint file means, encoded as `checkpoint` would write it: a log whose values
# are still these has nothing to write.
DEFAULT_CHECKPOINTS = {
    RECOVERY_POINT_CHECKPOINT_FILE: encode_checkpoint([(0,)]),
    LOG_START_OFFSET_CHECKPOINT_FILE: encode_checkpoint([(0,)]),
    LEADER_EPOCH_CHECKPOINT_FILE: encode_checkpoint([]),
    CLEANER_OFFSET_CHECKPOINT_FILE: encode_checkpoint([NEVER_CLEANED]),
}


class LoadedLog(NamedTuple):
    """A log directory as `load_log` found and recovered it, for `Log.open` to finish."""

    segments: list[Segment]  # oldest first, never empty; all but the last closed
    epochs: LeaderEpochCache  # not yet trimmed to the log's offsets
    checkpointed: dict[str, bytes]  # what each checkpoint file holds on disk (or its default)
    log_start_offset: int | None  # checkpointed; None when that checkpoint is corrupt
    recovery_point: int  # checkpointed (0 when it or the epochs' is corrupt), >= first base
    clean_shutdown: bool  # the segments were trusted without a re-check
    marker_found: bool  # the clean-shutdown marker is there, still to be consumed
    created: bool  # the directory held no segment: its one segment is new
    producers: Rebuilt  # the producer state at the log end offset, and how it was rebuilt
    snapshot_offsets: list[int]  # the producer-state snapshots kept, ascending
    transactions: TransactionLogState  # the aborted-transaction index, rebuilt where replayed
    # Checkpointed (cleaned_to, due_ms, first-cleaned ranges); NEVER_CLEANED when missing or bad.
    cleaner: tuple[int, int, list[tuple[int, int]]]
    loaded_ms: int  # the clock at the load: the append time of what the rebuild replayed
    # The first bad batch found in a trusted segment, kept whole, or marked so before (None
    # when none is known): persisted (corrupt_mark.py).
    corrupt: CorruptBatch | None = None


def load_log(
    directory: Path, config: LogConfig, high_watermark: int = 0, *, now_ms: int
) -> LoadedLog:
    """Create the log's first segment in `directory`, or load and recover the ones there.
    `high_watermark` is the partition's checkpointed one (0 when unknown: nothing is settled
    until the partition says): the transactions ended below it are settled. `now_ms` is the
    producers' append time where the snapshots do not hold it (producer_entry.py)."""
    names = _list_directory(directory)
    marker_found = CLEAN_SHUTDOWN_FILE in names
    clean_shutdown = marker_found
    checkpointed = _read_checkpoints(directory, names)
    recovery_point = _parse_offset(checkpointed[RECOVERY_POINT_CHECKPOINT_FILE])
    log_start_offset = _parse_offset(checkpointed[LOG_START_OFFSET_CHECKPOINT_FILE])
    cleaner = _parse_cleaner(checkpointed[CLEANER_OFFSET_CHECKPOINT_FILE])
    try:
        epochs = LeaderEpochCache.from_checkpoint(
            decode_checkpoint(checkpointed[LEADER_EPOCH_CHECKPOINT_FILE] or b"0\n0\n", fields=2)
        )
    except CorruptCheckpointError:
        # Rebuild the cache from every batch's leader epoch: re-check the whole log.
        epochs, clean_shutdown, recovery_point = LeaderEpochCache(), False, 0
    segments, corrupt = _load_segments(
        directory,
        names,
        config,
        epochs,
        recovery_point=recovery_point or 0,
        clean=clean_shutdown,
    )
    created = not segments
    if created:
        segments = [Segment.create(directory, log_start_offset or 0, config.index_interval_bytes)]
    corrupt = load_mark(directory, names, segments, corrupt)  # a mark made before, kept too
    # Nothing below the first segment is left to recover (Kafka's UnifiedLog raises its recovery
    # point to the local log start at open too). Retention makes its deletions durable before it
    # checkpoints the raised recovery point, so a crash in between leaves a lower one on disk
    # (as logs written before 51a2872 kept): taken as it is, it would drop the producer snapshot
    # at the first segment, the only record of the producers of the deleted batches.
    recovery_point = max(recovery_point or 0, segments[0].base_offset)
    snapshots = snapshot_offsets(names)
    transactions, cut = TransactionLogState.load(directory, names)
    base_offsets = [segment.base_offset for segment in segments]
    transactions.retain(base_offsets)
    # The replay must start at or below the recovery point after an unclean stop, and at or
    # below every segment whose index file was cut, to rebuild what it lost (clean or not).
    bounds = set(cut).intersection(base_offsets)
    if not clean_shutdown:
        bounds.add(recovery_point)
    newest_usable = min(bounds, default=None)
    if created:
        producers = Rebuilt(ProducerStateTable(), segments[0].base_offset, [], [])
    else:
        producers = rebuild(
            directory,
            snapshots,
            segments,
            empty_without_snapshot=newest_usable is None,
            newest_usable=newest_usable,
            high_watermark=high_watermark,
            clock_ms=now_ms,
        )
    # Unsettled: what the snapshot replayed from lists (below where the replay began), then the
    # transactions the replay ended; those the high watermark passed are settled at once.
    completed = [*producers.unsettled, *producers.completed]
    transactions.on_replayed(producers.replayed_from, completed, producers.aborted)
    transactions.on_high_watermark(high_watermark)
    producers = _sync_repaired(directory, producers, snapshots, transactions, recovery_point)
    return LoadedLog(
        segments,
        epochs,
        checkpointed,
        log_start_offset,
        recovery_point,
        clean_shutdown,
        marker_found,
        created,
        producers,
        snapshots,
        transactions,
        cleaner,
        now_ms,
        corrupt,
    )


def _sync_repaired(
    directory: Path,
    producers: Rebuilt,
    snapshots: list[int],
    transactions: TransactionLogState,
    recovery_point: int,
) -> Rebuilt:
    """A replay that wrote a snapshot at or below the recovery point (after an unclean stop,
    the one there was torn or missing; after a clean one, every snapshot above a cut index file
    or none usable) makes it and the index files it rebuilt durable now: the next unclean open
    replays from that snapshot and trusts every index file below it as synced, so a kill -9
    before the next flush would leave them to an OS crash. Rare (a snapshot or an index file
    lost); a clean open that replayed nothing returns at once."""
    repaired = [o for o in snapshots if producers.replayed_from < o <= recovery_point]
    if not repaired:
        return producers
    transactions.sync()
    for offset in repaired:
        sync_snapshot(directory, offset)
    fsync_directory(directory)
    return producers._replace(unsynced=tuple(o for o in producers.unsynced if o not in repaired))


def _list_directory(directory: Path) -> set[str]:
    """The log directory's file names once interrupted compactions are completed and leftover
    temporary files deleted (the directory is created when missing). One listing serves the
    whole open: a broker restarting 10,000 logs pays for each system call 10,000 times."""
    try:
        names = set(os.listdir(directory))
    except FileNotFoundError:
        directory.mkdir(parents=True)
        return set()
    if any(name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for name in names):
        _complete_swaps(directory)
        names = set(os.listdir(directory))
    for name in [name for name in names if name.endswith(TEMP_SUFFIX)]:
        (directory / name).unlink()
        names.discard(name)
    return names


def _complete_swaps(directory: Path) -> None:
    """Finish or undo a compaction interrupted by a crash: a `.cleaned` file is before the
    commit point and is deleted; a `.swap` file is after it and replaces its segment's .log
    file, whose index files are stale and deleted (rebuilt by the load)."""
    changed = False
    for path in directory.iterdir():
        if path.name.endswith(CLEANED_SUFFIX):
            path.unlink()
            changed = True
        elif (base_offset := parse_base_offset(path.name, SWAP_SUFFIX)) is not None:
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                segment_path(directory, base_offset, suffix).unlink(missing_ok=True)
            os.replace(path, segment_path(directory, base_offset, LOG_SUFFIX))
            changed = True
    if changed:
        fsync_directory(directory)


def _load_segments(
    directory: Path,
    names: set[str],
    config: LogConfig,
    epochs: LeaderEpochCache,
    *,
    recovery_point: int,
    clean: bool,
) -> tuple[list[Segment], CorruptBatch | None]:
    """Open every segment; re-check the unflushed ones; drop what follows a bad byte there.
    Also answers where the first trusted segment found bad at rest is (kept whole)."""
    base_offsets = sorted(
        base_offset
        for name in names
        if (base_offset := parse_base_offset(name, LOG_SUFFIX)) is not None
    )
    segments: list[Segment] = []
    corrupt: CorruptBatch | None = None
    for index, base_offset in enumerate(base_offsets):
        next_base_offset = base_offsets[index + 1] if index + 1 < len(base_offsets) else None
        trusted = clean or (next_base_offset is not None and next_base_offset <= recovery_point)
        segment, scan, found = open_segment(
            directory,
            base_offset,
            config.index_interval_bytes,
            next_offset_end=next_base_offset,
            trusted=trusted,
        )
        segments.append(segment)
        corrupt = corrupt or found
        if scan is None:
            continue
        for leader_epoch, start_offset in scan.epoch_starts:
            # Only epochs the checkpoint lacks (Kafka's LogSegment.recover): compaction may have
            # removed an epoch's first batches, and a scan would move its start up past them.
            if leader_epoch > epochs.latest_epoch:
                epochs.assign(leader_epoch, start_offset)
        if scan.error is not None and not trusted:
            # A log is a prefix: nothing after the first bad byte of the unflushed part is kept.
            _log_dropped_segments(directory, base_offsets[index + 1 :])
            for later in segments_after(directory, base_offsets[index + 1 :]):
                later.unlink(missing_ok=True)
            if index + 1 < len(base_offsets):
                # No flush would fsync the directory for them (only a roll or a truncation sets
                # that), so an OS crash after records were flushed into the cut segment would
                # bring a deleted segment back over them, and the next open would cut them.
                fsync_directory(directory)
            break
    for segment in segments[:-1]:
        segment.closed = True
        segment.indexes.on_roll()
    return segments, corrupt


def _log_dropped_segments(directory: Path, base_offsets: list[int]) -> None:
    """Say which whole segments recovery deletes after a cut (segment_loading.py logged the cut)."""
    if not base_offsets:
        return
    dropped_bytes = sum(
        path.stat().st_size
        for base_offset in base_offsets
        if (path := segment_path(directory, base_offset, LOG_SUFFIX)).exists()
    )
    log.warning(
        "%s: recovery deletes the %d segments after the cut (base offsets %d..%d, %d bytes)",
        directory,
        len(base_offsets),
        base_offsets[0],
        base_offsets[-1],
        dropped_bytes,
        extra={
            "log_dir": str(directory),
            "offset": base_offsets[0],
            "segments": len(base_offsets),
            "discarded_bytes": dropped_bytes,
        },
    )


def segments_after(directory: Path, base_offsets: list[int]) -> Iterator[Path]:
    for base_offset in base_offsets:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            yield segment_path(directory, base_offset, suffix)


def _read_checkpoints(directory: Path, names: set[str]) -> dict[str, bytes]:
    """Each checkpoint file's bytes, the default's encoding when the file is absent (the two
    mean the same, and `checkpoint` then has nothing to write while the value stays so)."""
    checkpointed = {}
    for name in (*CHECKPOINT_FILES, CLEANER_OFFSET_CHECKPOINT_FILE):
        data = read_if_exists(directory / name) if name in names else None
        checkpointed[name] = DEFAULT_CHECKPOINTS[name] if data is None else data
    return checkpointed


def _parse_cleaner(data: bytes) -> tuple[int, int, list[tuple[int, int]]]:
    """The cleaner checkpoint's (cleaned_to, due_ms, first-cleaned ranges), or NEVER_CLEANED
    with no range when it is corrupt: the next pass is then due, which costs a pass and loses
    nothing (a tombstone's horizon counts from that pass: it stays longer, never shorter)."""
    try:
        entries = decode_checkpoint(data, fields=2)
    except CorruptCheckpointError:
        return (*NEVER_CLEANED, [])
    if not entries or entries[0][0] < 0:
        return (*NEVER_CLEANED, [])
    (cleaned_to, due_ms), *first_cleaned = entries
    return cleaned_to, due_ms, [(end, time_ms) for end, time_ms in first_cleaned]


def _parse_offset(data: bytes) -> int | None:
    """A one-offset checkpoint, or None when corrupt (the caller picks a safe value)."""
    try:
        entries = decode_checkpoint(data, fields=1)
    except CorruptCheckpointError:
        return None
    if len(entries) != 1 or entries[0][0] < 0:
        return None
    return entries[0][0]
