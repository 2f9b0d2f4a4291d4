"""The corrupt mark: where a replica's log is known bad, kept on disk until the repair.

Theory of operation. A replica whose log holds a bad batch at rest is marked corrupt (the
scrubber's finding, or a trusted segment's re-check at open: PartitionHost.mark_corrupt) and
stays so until, out of the ISR, it truncates there (`Log.truncate_at_batch`). The mark was kept
in memory only, and a restart forgot it: the index files written at close describe the bad
batch as a sound one, so the next open trusts the segment and re-checks nothing in it (a closed
segment is not CRC-checked at open), and the scrubber's checkpointed cursor has moved past it,
so it was found again a pass later at best. Meanwhile the broker registered in the ISR as a
clean replica, could be elected and served the bad batch as good.

So the mark is written to `<log-dir>/corrupt-batch` (a checkpoint: atomic and fsynced) when it is
made, read back by the open (loading.py), which marks the replica with it again, and deleted once
the repair's cut is durable (log_truncation.py). It names the segment and the byte position of
the bad batch, as `CorruptBatch` does; an open keeps it only while that segment is still there
with the size it had (a repair, retention or compaction since has made it stale: it is deleted).
A crash between a cut and the deletion leaves such a stale mark; one garbled or missing reads as
none, as the open's own re-check may still find the batch.

This module must not import log.py.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from samsa.services.broker.log.checkpoint_file import (
    fsync_directory,
    read_if_exists,
    write_atomically,
)
from samsa.services.broker.log.checkpoint_format import (
    CorruptCheckpointError,
    decode_checkpoint,
    encode_checkpoint,
)
from samsa.services.broker.log.scrub import CorruptBatch
from samsa.services.broker.log.segment import Segment

log = logging.getLogger(__name__)

CORRUPT_MARK_FILE = "corrupt-batch"
_FIELDS = 4  # offset, segment base offset, segment size in bytes, byte position


def write_mark(directory: Path, corrupt: CorruptBatch) -> None:
    """Make `corrupt` the log's mark, durably (a crash leaves the old mark or this one)."""
    entry = (
        corrupt.offset,
        corrupt.segment_base_offset,
        corrupt.segment_size_bytes,
        corrupt.position,
    )
    write_atomically(directory / CORRUPT_MARK_FILE, encode_checkpoint([entry]))


def clear_mark(directory: Path) -> None:
    """Delete the log's mark, durably; nothing to do when there is none."""
    try:
        (directory / CORRUPT_MARK_FILE).unlink()
    except FileNotFoundError:
        return
    fsync_directory(directory)


def load_mark(
    directory: Path, names: set[str], segments: Sequence[Segment], found: CorruptBatch | None
) -> CorruptBatch | None:
    """The replica's corrupt mark at open: the lower of the one the open `found` and the one on
    disk (kept only while its segment is there with the size it had). The result is written,
    so that the next open knows it too, and a stale mark deleted."""
    stored = _read(directory) if CORRUPT_MARK_FILE in names else None
    if stored is not None and not _still_there(stored, segments):
        log.info("%s: a stale corrupt mark dropped (its segment changed)", directory)
        clear_mark(directory)
        stored = None
    if stored is None:
        chosen = found
    elif found is None:
        chosen = stored
    else:
        chosen = min(stored, found, key=lambda corrupt: corrupt.offset)
    if chosen is not None and chosen != stored:
        write_mark(directory, chosen)
    return chosen


def _read(directory: Path) -> CorruptBatch | None:
    try:
        entries = decode_checkpoint(
            read_if_exists(directory / CORRUPT_MARK_FILE) or b"", fields=_FIELDS
        )
    except CorruptCheckpointError:
        return None
    if len(entries) != 1 or min(entries[0]) < 0:
        return None
    return CorruptBatch(*entries[0])


def _still_there(corrupt: CorruptBatch, segments: Sequence[Segment]) -> bool:
    """The mark's segment is loaded with the size it had, and the bad batch lies inside it."""
    for segment in segments:
        if segment.base_offset == corrupt.segment_base_offset:
            return (
                segment.size_bytes == corrupt.segment_size_bytes
                and 0 <= corrupt.position <= corrupt.segment_size_bytes
                and segment.base_offset <= corrupt.offset
            )
    return False
