"""What a segment's `.log` file holds, batch by batch, for `samsa dump-log` (Kafka's
kafka-dump-log.sh): every batch's header fields, whether its CRC holds, with deep iteration its
records, and where the file stops being a valid log, judged as recovery judges it.

Theory of operation. `LogDump` walks the file from position 0 by the batches' own framing
(header.batch_size_at, the magic), reading it through a `read(position, size)` callable in
chunks of READ_CHUNK_BYTES (or one batch, when larger): a multi-GiB segment is never held in
memory, only one chunk or one batch (at most limits.batch_bytes_max) at a time. Per batch it
reports the header, `crc_valid`, and the first rule header.check_batch finds broken (the CRC,
unknown attributes, counts); with `deep` it decodes the records (codec.decode_batch without the
CRC, so a batch whose CRC alone is wrong still shows what it holds) and reads a control batch's
marker (read_control_marker).

The verdict is recovery's own: every batch is also fed to a recovery.SegmentScan, which says
where recovery would cut the file and why (a torn or corrupt batch, offsets that go backwards).
A batch that fails a check but is still framed (its length and magic are sane) is shown and
the walk goes on past it, as Kafka's tool does; the walk stops where framing fails (a length no
batch can have, a wrong magic: nothing after it can be found), at a torn tail, or at the
`max_bytes` limit (a batch that does not end within it is not read, and that is no fault).

Pure: the caller's `read` does the I/O; nothing here opens a file, and the same bytes give the
same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from samsa.common.errors import SamsaError
from samsa.common.record.codec import (
    CONTROL_TYPE_COMMIT,
    RecordBatch,
    decode_batch,
    read_control_marker,
)
from samsa.common.record.header import (
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    HEADER_BYTES,
    LOG_OVERHEAD,
    MAGIC,
    NO_SEQUENCE,
    BatchHeader,
    batch_size_at,
    check_batch,
    compute_crc,
    read_header,
)
from samsa.services.broker.log.producer_entry import SEQUENCE_MODULUS, last_sequence_of
from samsa.services.broker.log.recovery import SegmentScan

# Bytes per read of the .log file: many small batches per call, little memory.
READ_CHUNK_BYTES = 1024 * 1024
# The recovery scan is fed batches only to judge them: its indexes must take no entry.
_NO_INDEX_ENTRIES = 2**62
COMPRESSION_NAMES = {COMPRESSION_NONE: "none", COMPRESSION_ZSTD: "zstd"}

Read = Callable[[int, int], bytes]


class RecordDump(NamedTuple):
    """One record as --print-data-log shows it; `marker` is a control record's (type name,
    coordinator epoch), None for data."""

    offset: int
    timestamp: int
    sequence: int
    key: bytes | None
    value: bytes | None
    header_keys: tuple[str, ...]
    marker: tuple[str, int] | None


class BatchDump(NamedTuple):
    """One batch: where it is, its header, and what is wrong with it (None: nothing)."""

    position: int
    header: BatchHeader
    crc_valid: bool
    problem: str | None
    records: tuple[RecordDump, ...] | None = None  # with deep iteration, when they decode
    records_error: str | None = None  # with deep iteration, why they do not

    @property
    def last_sequence(self) -> int:
        """Kafka's lastSequence: base sequence + last offset delta, wrapped; -1 without one."""
        if self.header.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return last_sequence_of(self.header)

    @property
    def compression_name(self) -> str:
        return COMPRESSION_NAMES.get(self.header.compression, f"unknown({self.header.compression})")


class LogVerdict(NamedTuple):
    """How the walk ended and what recovery would make of what it read."""

    end_position: int  # the end of the last batch walked
    stop: str | None  # why the walk stopped before the end of the file (framing, torn tail)
    limited: bool  # it stopped at max_bytes: the rest was not read
    recovery_error: str | None  # the first thing recovery refuses; None: the bytes read are valid
    valid_bytes: int  # recovery's valid prefix: where it would cut the file

    @property
    def corrupt(self) -> bool:
        return self.recovery_error is not None or self.stop is not None


class _Window:
    """The bytes last read, to slice batches from without a read per batch."""

    __slots__ = ("_data", "_end", "_read", "_start")

    def __init__(self, read: Read, end: int) -> None:
        self._read, self._end = read, end
        self._start, self._data = 0, b""

    def at(self, position: int, size: int) -> tuple[bytes, int]:
        """Bytes holding [position, position + size) as far as the end allows, and where
        `position` is in them."""
        held_end = self._start + len(self._data)
        if position < self._start or (position + size > held_end and held_end < self._end):
            want = min(max(size, READ_CHUNK_BYTES), self._end - position)
            self._data, self._start = self._read(position, want), position
        return self._data, position - self._start


class LogDump:
    """A walk of one `.log` file; iterate `batches()`, then read `verdict`."""

    def __init__(
        self,
        read: Read,
        size_bytes: int,
        *,
        base_offset: int | None = None,
        deep: bool = False,
        max_bytes: int | None = None,
    ) -> None:
        """`size_bytes` is the file's size, `base_offset` the segment's (its file name; None
        when the name does not say: the first batch's base offset stands in)."""
        self._size = size_bytes
        self._end = size_bytes if max_bytes is None else min(size_bytes, max_bytes)
        self._window = _Window(read, self._end)
        self._base_offset = base_offset
        self._deep = deep
        self._scan: SegmentScan | None = None
        self.verdict: LogVerdict | None = None

    def batches(self) -> Iterator[BatchDump]:
        """Every batch the framing finds, in file order; sets `verdict` when done."""
        position, stop, limited, tail_bytes = 0, None, False, 0
        while position < self._end:
            data, at = self._window.at(position, HEADER_BYTES)
            try:
                size = batch_size_at(data, at)
            except SamsaError as error:
                stop, tail_bytes = _at_file_position(str(error), at, position), LOG_OVERHEAD
                break
            if size == 0 or position + size > self._end:
                if position + max(size, LOG_OVERHEAD) > self._size:
                    stop = (
                        f"batch at position {position} is torn: {self._size - position} bytes "
                        f"remain of {size or 'a header'}"
                    )
                    tail_bytes = self._size - position
                else:
                    limited = True
                break
            data, at = self._window.at(position, size)
            header = read_header(data, at)
            if header.magic != MAGIC:
                stop = (
                    f"batch at position {position} has magic {header.magic}, expected {MAGIC}: "
                    f"the bytes there are not a batch"
                )
                tail_bytes = size
                break
            self._judge(data, at, size, header)
            yield self._batch(data, at, position, size, header)
            position += size
        self._finish(position, stop, limited, tail_bytes)

    def _judge(self, data: bytes, at: int, size: int, header: BatchHeader) -> None:
        """Feed the batch to the recovery scan (until it stops at a bad one)."""
        if self._scan is None:
            base = header.base_offset if self._base_offset is None else self._base_offset
            self._scan = SegmentScan(max(0, base), _NO_INDEX_ENTRIES)
        if not self._scan.done:
            with memoryview(data) as view:
                self._scan.feed(view[at : at + size], end_of_file=False)

    def _batch(
        self, data: bytes, at: int, position: int, size: int, header: BatchHeader
    ) -> BatchDump:
        crc_valid = compute_crc(data, at, at + size) == header.crc
        problem = None
        try:
            check_batch(data, at)
        except SamsaError as error:
            problem = _at_file_position(str(error), at, position)
        if not self._deep:
            return BatchDump(position, header, crc_valid, problem)
        try:
            batch = decode_batch(data, at, verify_crc=False)
            records = dump_records(batch)
        except SamsaError as error:
            return BatchDump(position, header, crc_valid, problem, None, str(error))
        return BatchDump(position, header, crc_valid, problem, records)

    def _finish(self, position: int, stop: str | None, limited: bool, tail_bytes: int) -> None:
        scan = self._scan
        if scan is None:
            scan = self._scan = SegmentScan(max(0, self._base_offset or 0), _NO_INDEX_ENTRIES)
        if not scan.done and not limited:
            # What is left from the end of the last batch walked: nothing (a clean end), or the
            # torn or unframed bytes the walk stopped at, which the scan judges in its own words.
            data, at = self._window.at(position, tail_bytes)
            with memoryview(data) as view:
                scan.feed(view[at : at + tail_bytes], end_of_file=True)
        error = scan.error
        if error is not None:  # the scan read each batch from a buffer of its own
            error = _at_file_position(error, 0, scan.valid_bytes)
            prefix = f"at position {scan.valid_bytes}: "
            if error.startswith(prefix) and f"position {scan.valid_bytes} " in error[len(prefix) :]:
                error = error[len(prefix) :]  # the codec's message names the position already
        self.verdict = LogVerdict(position, stop, limited, error, scan.valid_bytes)


def _at_file_position(message: str, buffer_position: int, file_position: int) -> str:
    """A codec message about the batch at `buffer_position` of a buffer, about the file."""
    return message.replace(f"position {buffer_position} ", f"position {file_position} ")


def dump_records(batch: RecordBatch) -> tuple[RecordDump, ...]:
    """The records of a decoded batch; a control batch's one record with its marker."""
    base_sequence = batch.header.base_sequence
    if base_sequence == NO_SEQUENCE:
        sequences = [NO_SEQUENCE] * len(batch)
    else:
        sequences = [(base_sequence + delta) % SEQUENCE_MODULUS for delta in batch.offset_deltas]
    marker = None
    if batch.header.is_control:
        marker_type, coordinator_epoch = read_control_marker(batch)
        marker = ("COMMIT" if marker_type == CONTROL_TYPE_COMMIT else "ABORT", coordinator_epoch)
    return tuple(
        RecordDump(
            offset,
            timestamp,
            sequence,
            key,
            value,
            tuple(name for name, _ in headers),
            marker,
        )
        for offset, timestamp, sequence, key, value, headers in zip(
            batch.offsets(),
            batch.timestamps(),
            sequences,
            batch.keys,
            batch.values,
            batch.headers,
            strict=True,
        )
    )


def dump_log_bytes(
    data: bytes, *, base_offset: int | None = None, deep: bool = False, max_bytes: int | None = None
) -> tuple[list[BatchDump], LogVerdict]:
    """`LogDump` over bytes held in memory (tests, small files): the batches and the verdict."""
    dump = LogDump(
        lambda position, size: data[position : position + size],
        len(data),
        base_offset=base_offset,
        deep=deep,
        max_bytes=max_bytes,
    )
    batches = list(dump.batches())
    assert dump.verdict is not None
    return batches, dump.verdict
