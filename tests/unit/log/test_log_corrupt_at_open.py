"""Goal: a bad batch found at open in a durable segment (below the recovery point, or any after a
clean close) is corruption at rest: the open cuts nothing and deletes no segment (the replica may
be in the ISR, and a shortened log there loses acknowledged records: DESIGN §4), never lets a
read skip its offsets (a hole reads as a compaction gap), and exposes where it is
(`Log.corrupt_at_open`, a CorruptBatch as the scrubber's) for the partition to mark the replica
corrupt; the scrubber's repair (`truncate_at_batch`) then cuts there.

Method: real files in tmp_path. A segment's .index is deleted (the open re-reads the segment) and
one byte of one batch flipped: in its payload (CRC fails, framing intact: the batch is kept and
served as stored) or in its length or magic (framing lost: reads reaching it are refused with
StorageError, appends too when it is in the active segment). Both a clean close and an unclean
stop after a flush and checkpoint (everything below the recovery point trusted).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, read_batches, small_config

from samsa.common.errors import StorageError
from samsa.common.record.header import check_batch
from samsa.services.broker.log.corrupt_mark import CORRUPT_MARK_FILE, write_mark
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.scrub import CorruptBatch

PAYLOAD, LENGTH, MAGIC = 100, 9, 16  # byte positions inside a batch


def filled(directory: Path) -> Log:
    log = Log.open(directory, small_config(), now_ms=0)
    for index in range(40):
        log.append_as_leader(
            batch(b"value %d " % index + b"." * 100, timestamp=1_000 + index),
            leader_epoch=index // 10,
            now_ms=1,
        )
    return log


def stop(log: Log, *, clean: bool) -> None:
    if clean:
        log.close()
    else:  # unclean, but everything is below the recovery point
        log.flush()
        log.checkpoint()
        log._local_log.close()


def damage(directory: Path, base_offset: int, nth: int, at: int) -> tuple[int, int]:
    """Flip byte `at` of the segment's `nth` batch and lose its .index; (position, file size)."""
    path = directory / f"{base_offset:020d}.log"
    data = bytearray(path.read_bytes())
    position = 0
    for _ in range(nth):
        position += check_batch(data, position).size_bytes
    data[position + at] ^= 0x55
    path.write_bytes(bytes(data))
    (directory / f"{base_offset:020d}.index").unlink()
    return position, len(data)


def log_files(directory: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in sorted(directory.glob("*.log"))}


@pytest.mark.parametrize("clean", [True, False])
def test_a_bad_batch_in_a_durable_segment_is_kept_served_as_stored_and_exposed(
    tmp_path: Path, clean: bool
) -> None:
    """Offsets 1..9 were once cut with segments 10.. kept: reads skipped them as a compaction
    gap (silent loss); then the cut deleted every later segment (a clean-registered ISR member
    left with offsets 0..0 of 0..39)."""
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    stored = read_batches(log)
    stop(log, clean=clean)
    position, size = damage(tmp_path, bases[0], 1, PAYLOAD)
    files = log_files(tmp_path)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert log_files(tmp_path) == files, "nothing cut, no segment deleted"
    assert [s.base_offset for s in reopened.segments()] == bases
    assert reopened.log_end_offset == 40
    assert reopened.corrupt_at_open == CorruptBatch(1, bases[0], size, position)
    served = [reopened.read(offset, 1).records for offset in range(40)]
    assert served[0] == stored[0] and served[2:] == stored[2:], "no offset skipped"
    bad = (tmp_path / f"{bases[0]:020d}.log").read_bytes()[position : position + len(stored[1])]
    assert served[1] == bad != stored[1], "the bad batch as stored: the reader's CRC check fails"
    assert reopened.append_as_leader(batch(b"more"), leader_epoch=4, now_ms=2).first_offset == 40
    found = reopened.corrupt_at_open
    assert reopened.truncate_at_batch(found.segment_base_offset, size, found.position) == 1
    assert [s.base_offset for s in reopened.segments()] == bases[:1]  # the repair cuts
    assert read_batches(reopened) == stored[:1]


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("at", [LENGTH, MAGIC])
def test_a_bad_frame_in_a_closed_durable_segment_refuses_reads_past_it(
    tmp_path: Path, clean: bool, at: int
) -> None:
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    stored = read_batches(log)
    stop(log, clean=clean)
    position, _ = damage(tmp_path, bases[1], 2, at)
    files = log_files(tmp_path)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert log_files(tmp_path) == files and reopened.log_end_offset == 40
    found = reopened.corrupt_at_open
    assert found == CorruptBatch(bases[1] + 2, bases[1], position, position)
    for offset in range(bases[1] + 2, bases[2]):
        with pytest.raises(StorageError, match=f"offsets from {bases[1] + 2} are unreadable"):
            reopened.read(offset, 4096)
    assert [reopened.read(o, 1).records for o in range(bases[1] + 2)] == stored[: bases[1] + 2]
    assert [reopened.read(o, 1).records for o in range(bases[2], 40)] == stored[bases[2] :]
    reopened.close()  # kept unrepaired: the next open finds it again
    again = Log.open(tmp_path, small_config(), now_ms=0)
    assert again.corrupt_at_open == found and log_files(tmp_path) == files
    assert again.truncate_at_batch(bases[1], position, position) == bases[1] + 2
    assert read_batches(again) == stored[: bases[1] + 2]


def test_a_bad_frame_in_the_active_segment_refuses_appends_until_repaired(
    tmp_path: Path,
) -> None:
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    log.close()
    position, _ = damage(tmp_path, bases[-1], 5, LENGTH)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    assert reopened.corrupt_at_open == CorruptBatch(bases[-1] + 5, bases[-1], position, position)
    assert reopened.log_end_offset == bases[-1] + 5  # what is framed; the rest kept on disk
    with pytest.raises(StorageError):
        reopened.append_as_leader(batch(b"more"), leader_epoch=4, now_ms=2)
    reopened.reconfigure(small_config(retention_ms=1))  # every segment expired
    assert reopened.apply_retention(now_ms=10**13, high_watermark=bases[-1] + 5) == 3
    assert [s.base_offset for s in reopened.segments()] == bases[-1:], "no roll over it"
    assert reopened.truncate_at_batch(bases[-1], position, position) == bases[-1] + 5
    assert reopened.append_as_leader(batch(b"more"), leader_epoch=4, now_ms=2).first_offset == 35


def test_a_bad_batch_kept_in_the_active_segment_is_set_aside_so_appends_leave_its_size(
    tmp_path: Path,
) -> None:
    """Appends to the segment holding the kept batch would change the size the repair checks
    (`can_cut_at`), and the repair would then be dropped as if the segment were gone: the open
    rolls it, and the repair still cuts there after appends."""
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    stored = read_batches(log)
    log.close()
    position, size = damage(tmp_path, bases[-1], 5, PAYLOAD)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    found = reopened.corrupt_at_open
    assert found == CorruptBatch(bases[-1] + 5, bases[-1], size, position)
    assert [s.base_offset for s in reopened.segments()] == [*bases, 40], "rolled at its end"
    assert reopened.append_as_leader(batch(b"more"), leader_epoch=4, now_ms=2).first_offset == 40
    assert log_files(tmp_path)[f"{bases[-1]:020d}.log"] == size
    assert reopened.truncate_at_batch(bases[-1], size, position) == bases[-1] + 5
    assert read_batches(reopened) == stored[: bases[-1] + 5]


@pytest.mark.parametrize("clean", [True, False])
def test_a_timestamp_lookup_never_answers_past_an_unframed_tail(
    tmp_path: Path, clean: bool
) -> None:
    """A lookup whose answer the unframed records could hold was answered from the next segment,
    as if they were not there (offset 20 for the timestamp of offset 12); MAX_TIMESTAMP ignored
    them too. Both are refused, as a read of them is; a lookup the framed part answers is not."""
    log = filled(tmp_path)  # offset n is stamped 1_000 + n
    bases = [s.base_offset for s in log.segments()]
    stop(log, clean=clean)
    damage(tmp_path, bases[1], 2, LENGTH)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    bad = bases[1] + 2
    assert reopened.offset_for_timestamp(1_000 + bad - 1) == (bad - 1, 1_000 + bad - 1)
    for timestamp in (1_000 + bad, 1_000 + bases[2], 10**6):
        with pytest.raises(StorageError, match=f"offsets from {bad} are unreadable"):
            reopened.offset_for_timestamp(timestamp)
    assert reopened.max_timestamp_record(bad) == (bad - 1, 1_000 + bad - 1)
    with pytest.raises(StorageError, match=f"offsets from {bad} are unreadable"):
        reopened.max_timestamp_record(bad + 1)
    reopened.delete_records(bases[2])  # the unframed records are below the log start now
    assert reopened.offset_for_timestamp(0) == (bases[2], 1_000 + bases[2])
    assert reopened.max_timestamp_record(40) == (39, 1_039)


@pytest.mark.parametrize("clean", [True, False])
def test_a_kept_bad_batch_is_remembered_across_restarts_until_the_repair(
    tmp_path: Path, clean: bool
) -> None:
    """The close wrote index files that describe the kept batch as sound, so the next open
    trusted the closed segment and re-checked nothing: it forgot the corruption (and the
    broker registered clean). The mark is kept in a file (corrupt_mark.py) until the repair."""
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    log.close()
    position, size = damage(tmp_path, bases[0], 1, PAYLOAD)
    reopened = Log.open(tmp_path, small_config(), now_ms=0)
    found = reopened.corrupt_at_open
    assert found == CorruptBatch(1, bases[0], size, position)
    assert (tmp_path / CORRUPT_MARK_FILE).exists()
    stop(reopened, clean=clean)
    again = Log.open(tmp_path, small_config(), now_ms=0)
    assert again.corrupt_at_open == found, "remembered"
    assert again.truncate_at_batch(bases[0], size, position) == 1
    assert not (tmp_path / CORRUPT_MARK_FILE).exists(), "the repair deletes it"
    stop(again, clean=clean)
    assert Log.open(tmp_path, small_config(), now_ms=0).corrupt_at_open is None


def test_a_corrupt_mark_whose_segment_changed_is_dropped_at_open(tmp_path: Path) -> None:
    """A crash between the repair's cut and the mark's deletion leaves a mark naming a segment
    that no longer has its size (or is gone): it is stale, and the open drops it."""
    log = filled(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    (_, _, size), *_ = log.closed_segments()
    log.close()
    write_mark(tmp_path, CorruptBatch(3, bases[0], size - 1, 300))
    assert Log.open(tmp_path, small_config(), now_ms=0).corrupt_at_open is None
    assert not (tmp_path / CORRUPT_MARK_FILE).exists()
    write_mark(tmp_path, CorruptBatch(bases[1] + 1, bases[1] + 1, size, 300))  # no such segment
    assert Log.open(tmp_path, small_config(), now_ms=0).corrupt_at_open is None
    mark = CorruptBatch(bases[1] + 2, bases[1], log.closed_segments()[1][2], 300)
    write_mark(tmp_path, mark)  # as the scrubber's: the segment re-checks sound at open
    assert Log.open(tmp_path, small_config(), now_ms=0).corrupt_at_open == mark
