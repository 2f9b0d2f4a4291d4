"""What a segment's other files hold, for `samsa dump-log`: the `.index` and `.timeindex`
entries and whether they agree with the `.log`, the `.txnindex` aborted transactions, and the
producer-state `.snapshot` files. dump.py reads the `.log` itself.

Theory of operation. Each file is decoded by its own module's decoder (OffsetIndex.parse,
TimeIndex.parse, transaction_index.decode_entries, producer_snapshot_codec.decode_snapshot), so
the formats are defined once. The index files are bounded (limits.index_bytes_max) and held
whole; the log they are checked against is not: `OffsetIndexCheck` and `TimeIndexCheck` are fed
the log's batch headers in file order (`on_batch`, from a dump.LogDump walk) and keep only what
concerns an entry, then `mismatches` lists every entry the log contradicts:

- an offset-index entry (offset O -> position P) must name a batch that starts at P with base
  offset O: Samsa indexes a batch by its base offset (offset_index.py; Kafka by its last), so
  the broker's lookups start at that very batch. Entries must strictly increase in both keys;
- a time-index entry (timestamp T -> offset O) must name the batch that ends at O, whose max
  timestamp is T and no earlier batch's above it (time_index.py: T was the segment's largest
  timestamp when O's batch reached it). Entries must strictly increase in both keys.

`sanity_check` is the broker's own check at startup (OffsetIndex.decode / TimeIndex.decode, what
Kafka's --index-sanity-check runs): it needs only the log's size, not its batches.

Pure: bytes and headers in, entries and messages out.
"""

from __future__ import annotations

from typing import NamedTuple

from samsa.common import limits
from samsa.common.record.header import BatchHeader
from samsa.services.broker.log.offset_index import CorruptIndexError, OffsetIndex
from samsa.services.broker.log.producer_entry import NO_APPEND_TIME, CorruptSnapshotError
from samsa.services.broker.log.producer_snapshot_codec import ProducerSnapshot, decode_snapshot
from samsa.services.broker.log.time_index import TimeIndex
from samsa.services.broker.log.transaction_index import AbortedTransaction, decode_entries

# An exclusive bound on relative offsets when the segment's next offset is not known.
_ANY_RELATIVE_OFFSET = limits.segment_relative_offset_max + 1


def offset_index_entries(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(offset, position) of each entry of a .index file, in file order; CorruptIndexError
    when its size is not a whole number of entries (or over the limit)."""
    index = OffsetIndex.parse(data)
    return [
        (base_offset + relative, position)
        for relative, position in zip(index.relative_offsets, index.positions, strict=True)
    ]


def time_index_entries(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, offset) of each entry of a .timeindex file, in file order."""
    index = TimeIndex.parse(data)
    return [
        (timestamp, base_offset + relative)
        for timestamp, relative in zip(index.timestamps, index.relative_offsets, strict=True)
    ]


def sanity_check(data: bytes, *, time: bool, log_size_bytes: int) -> str | None:
    """What the broker's startup check finds wrong with an index file, None when it passes."""
    try:
        if time:
            TimeIndex.decode(data, relative_offset_end=_ANY_RELATIVE_OFFSET)
        else:
            OffsetIndex.decode(
                data, log_size_bytes=log_size_bytes, relative_offset_end=_ANY_RELATIVE_OFFSET
            )
    except CorruptIndexError as error:
        return str(error)
    return None


def _order_problems(entries: list[tuple[int, int]], names: tuple[str, str]) -> list[str]:
    """An entry whose keys do not both exceed the previous entry's."""
    problems = []
    for index in range(1, len(entries)):
        for key in (0, 1):
            if entries[index][key] <= entries[index - 1][key]:
                problems.append(
                    f"entry {index}: {names[key]} {entries[index][key]} does not exceed the "
                    f"previous entry's {entries[index - 1][key]}"
                )
    return problems


class OffsetIndexCheck:
    """The .index entries against the batches of the .log (see the module docstring)."""

    def __init__(self, entries: list[tuple[int, int]]) -> None:
        self.entries = entries
        self._wanted = {position for _, position in entries}
        self._found: dict[int, BatchHeader] = {}

    def on_batch(self, position: int, header: BatchHeader) -> None:
        if position in self._wanted:
            self._found[position] = header

    def mismatches(self, log_bytes: int) -> list[str]:
        """Every entry the log contradicts; `log_bytes`: how much of the log was walked."""
        problems = _order_problems(self.entries, ("offset", "position"))
        for index, (offset, position) in enumerate(self.entries):
            header = self._found.get(position)
            if header is None:
                where = "past the end of" if position >= log_bytes else "not at a batch of"
                problems.append(
                    f"entry {index}: offset {offset} -> position {position}, which is {where} "
                    f"the log ({log_bytes} bytes walked)"
                )
            elif header.base_offset != offset:
                problems.append(
                    f"entry {index}: offset {offset} -> position {position}, but the batch there "
                    f"holds offsets {header.base_offset}..{header.last_offset} (an entry names "
                    f"its batch's base offset)"
                )
        return problems


class TimeIndexCheck:
    """The .timeindex entries against the batches of the .log (see the module docstring)."""

    def __init__(self, entries: list[tuple[int, int]]) -> None:
        self.entries = entries
        self._wanted = {offset for _, offset in entries}
        self._max_timestamp = -1
        # last offset -> (the batch's max timestamp, the largest up to and including it)
        self._found: dict[int, tuple[int, int]] = {}

    def on_batch(self, position: int, header: BatchHeader) -> None:
        self._max_timestamp = max(self._max_timestamp, header.max_timestamp)
        if header.last_offset in self._wanted:
            self._found[header.last_offset] = (header.max_timestamp, self._max_timestamp)

    def mismatches(self, log_bytes: int) -> list[str]:
        """Every entry the log contradicts; `log_bytes`: how much of the log was walked."""
        problems = _order_problems(self.entries, ("timestamp", "offset"))
        for index, (timestamp, offset) in enumerate(self.entries):
            found = self._found.get(offset)
            if found is None:
                problems.append(
                    f"entry {index}: timestamp {timestamp} -> offset {offset}, which is the last "
                    f"offset of no batch in the log ({log_bytes} bytes walked)"
                )
            elif found[0] != timestamp:
                problems.append(
                    f"entry {index}: timestamp {timestamp} -> offset {offset}, but the batch "
                    f"ending there has max timestamp {found[0]}"
                )
            elif found[1] != timestamp:
                problems.append(
                    f"entry {index}: timestamp {timestamp} -> offset {offset}, but an earlier "
                    f"batch already reached timestamp {found[1]}"
                )
        return problems


class TxnIndexDump(NamedTuple):
    """The aborted transactions of a .txnindex file, and what follows its valid prefix."""

    entries: list[AbortedTransaction]
    valid_bytes: int
    problem: str | None


def dump_txn_index(data: bytes) -> TxnIndexDump:
    entries, valid_bytes = decode_entries(data)
    problem = None
    if valid_bytes < len(data):
        problem = (
            f"the entry at byte {valid_bytes} is torn, fails its CRC or contradicts the one "
            f"before: the broker drops the {len(data) - valid_bytes} bytes from there"
        )
    return TxnIndexDump(entries, valid_bytes, problem)


def dump_snapshot(data: bytes) -> tuple[ProducerSnapshot | None, str | None]:
    """A producer-state snapshot's producers and unsettled transactions, or why it does not
    decode (the broker then rebuilds the state from the log)."""
    try:
        return decode_snapshot(data, loaded_ms=NO_APPEND_TIME), None
    except CorruptSnapshotError as error:
        return None, str(error)
