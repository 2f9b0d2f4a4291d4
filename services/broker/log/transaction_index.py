"""Transactions on one partition, as readers see them: the last stable offset and the index of
aborted transactions (DESIGN §3 and §5; Kafka's TransactionIndex and the unstable-offset part of
ProducerStateManager). Pure: no I/O, no clock.

Theory of operation. A transaction's records sit in the log from its first batch to its marker
(producer_state.py opens it and reports it as a CompletedTransaction when the marker is
applied). A `read_committed` consumer may read only what is decided and replicated:

- The **last stable offset** (LSO) is the smaller of the high watermark and the first offset of
  every transaction that is still *unstable*: open, or ended by a marker not yet below the high
  watermark (a marker that could still be truncated away decides nothing). `UnstableTransactions`
  keeps the ended-but-unreplicated ones; the producer table gives the open ones.
- The **aborted-transaction index** lists, per segment, each aborted transaction as
  (producer_id, first_offset, last_offset = its ABORT marker, last_stable_offset when the marker
  was appended), in marker order, in the segment that holds the marker (`.txnindex` files, one
  fixed-size entry each, with a CRC so a torn tail is found and dropped; `aborted_entry` makes
  one). A read_committed fetch
  returns the aborted transactions overlapping what it returns (`collect_aborted`), and the
  consumer drops those producers' records from first_offset up to their ABORT marker.
  Committed transactions need no entry: their records are simply shown.

Search. Entries live with their markers, so those overlapping a fetch from offset F are in the
segment holding F and later ones; scanning stops at the first entry whose last_stable_offset
reaches the upper bound: no transaction aborted later can start below it (Kafka's rule).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeVar

import crc32c

from samsa.common.record.codec import CONTROL_TYPE_ABORT
from samsa.services.broker.log.producer_state import (
    CompletedTransaction,
    ProducerBatchInfo,
    ProducerStateTable,
)

# producer_id int64 | first_offset int64 | last_offset int64 | last_stable_offset int64 |
# crc uint32 (CRC-32C of the 32 bytes before it); big-endian.
_FIELDS = struct.Struct(">qqqq")
_CRC = struct.Struct(">I")
ENTRY_BYTES = _FIELDS.size + _CRC.size


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO when the marker was appended


def encode_entry(aborted: AbortedTransaction) -> bytes:
    fields = _FIELDS.pack(*aborted)
    return fields + _CRC.pack(crc32c.crc32c(fields))


def decode_entries(data: bytes) -> tuple[list[AbortedTransaction], int]:
    """The entries of an index file and the length of its valid prefix: decoding stops at the
    first entry that is cut short, fails its CRC, or is inconsistent (a torn write at a crash);
    the caller truncates the file there or rebuilds it from the log."""
    view = memoryview(data)
    entries: list[AbortedTransaction] = []
    position = 0
    while position + ENTRY_BYTES <= len(view):
        fields = view[position : position + _FIELDS.size]
        (crc,) = _CRC.unpack_from(view, position + _FIELDS.size)
        if crc32c.crc32c(fields) != crc:
            break
        entry = AbortedTransaction(*_FIELDS.unpack(fields))
        if not _consistent(entry, entries[-1] if entries else None):
            break
        entries.append(entry)
        position += ENTRY_BYTES
    return entries, position


def _consistent(entry: AbortedTransaction, previous: AbortedTransaction | None) -> bool:
    return (
        entry.producer_id >= 0
        and 0 <= entry.first_offset < entry.last_offset
        and (previous is None or previous.last_offset < entry.last_offset)
    )


def aborted_entry(
    aborted: CompletedTransaction, open_first_offsets: Iterable[int]
) -> AbortedTransaction:
    """The index entry of an aborted transaction, given the first offsets of the transactions
    still open once its marker was applied: its last_stable_offset is where every transaction
    aborted later must start (the first of those still open, else just past this marker), which
    is what lets `collect_aborted` stop early. The high watermark plays no part here."""
    stable = aborted.last_offset + 1
    for first_offset in open_first_offsets:
        stable = min(stable, first_offset)
    return AbortedTransaction(
        aborted.producer_id, aborted.first_offset, aborted.last_offset, stable
    )


class AppliedTransactions(NamedTuple):
    """What markers among applied batches ended: every transaction (for the last stable offset)
    and the index entries of the aborted ones, in marker order."""

    completed: list[CompletedTransaction]
    aborted: list[AbortedTransaction]


# Data batches are applied to the producer table in runs of at most this many (a replay of a
# whole segment streams its headers; a run bounds what is held at once).
_RUN_MAX = 1024


Batch = TypeVar("Batch", bound=ProducerBatchInfo)


def apply_batches(
    table: ProducerStateTable,
    batches: Iterable[Batch],
    marker_type: Callable[[Batch], int],
    now_ms: int,
) -> AppliedTransactions:
    """`table.apply` over `batches` appended at `now_ms`, one marker at a time: each aborted
    transaction's entry needs the transactions still open right after its own marker
    (`aborted_entry`), not after the whole append. `marker_type(marker)` is a control batch's
    control type (the caller reads the marker's record): the table keeps it, so that a marker
    at that epoch again is taken for a retry only when of the same type."""
    completed: list[CompletedTransaction] = []
    aborted: list[AbortedTransaction] = []
    run: list[Batch] = []
    for batch in batches:
        if not batch.is_control:
            run.append(batch)
            if len(run) >= _RUN_MAX:
                table.apply(run, now_ms)
                run.clear()
            continue
        if run:
            table.apply(run, now_ms)
            run.clear()
        kind = marker_type(batch)
        ended = table.apply((batch,), now_ms, kind)
        completed += ended
        if ended and kind == CONTROL_TYPE_ABORT:
            open_first_offsets = list(table.open_first_offsets())
            aborted += [aborted_entry(transaction, open_first_offsets) for transaction in ended]
    if run:
        table.apply(run, now_ms)
    return AppliedTransactions(completed, aborted)


def collect_aborted(
    segment_entries: Iterable[Iterable[AbortedTransaction]], fetch_offset: int, upper_bound: int
) -> list[AbortedTransaction]:
    """The aborted transactions overlapping [fetch_offset, upper_bound), sorted by first offset.
    `segment_entries`: the index entries of the segment holding fetch_offset and of each later
    one, in order (consumed lazily: scanning stops once complete, see the module doc)."""
    found: list[AbortedTransaction] = []
    for entries in segment_entries:
        for entry in entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return sorted(found, key=lambda aborted: aborted.first_offset)
    return sorted(found, key=lambda aborted: aborted.first_offset)


class UnstableTransactions:
    """Transactions ended by a marker not yet below the high watermark, for the LSO.

    Kept in marker order, hence by last offset: a move of the high watermark settles a prefix
    and a truncation drops a suffix, each paying only for what it removes (a move that settles
    nothing costs a store and one comparison; the leader's moves come with every acks=all
    produce). The partition tells every move (`on_high_watermark`, Kafka's
    ProducerStateManager.onHighWatermarkUpdated), so the list holds what lies above the high
    watermark, and reading the LSO changes nothing. What a replay of the log adds below the high
    watermark (after a truncation, at load) stays until the partition tells it again, which
    HostedPartition does at once (`log_changed`, and when it is created); the LSO never counts
    it meanwhile. The list is kept across restarts in the producer snapshots (`unsettled`,
    producer_snapshot_codec.py), since a marker is not stable until replicated, restart or not."""

    __slots__ = ("_ended", "high_watermark")

    def __init__(self) -> None:
        self._ended: deque[CompletedTransaction] = deque()
        # The last one told: a replay after a truncation snapshots only what lies above it.
        self.high_watermark = 0

    def on_completed(self, transactions: Sequence[CompletedTransaction]) -> None:
        """Markers after every kept one ended `transactions`, in marker order."""
        ended = self._ended
        assert not ended or not transactions or ended[-1].last_offset < transactions[0].last_offset
        ended.extend(transactions)

    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's high watermark moved: the transactions whose marker is now below it
        are decided, and forgotten."""
        self.high_watermark = high_watermark
        ended = self._ended
        while ended and ended[0].last_offset < high_watermark:
            ended.popleft()

    def on_truncate(self, log_end_offset: int) -> None:
        """Forget the transactions whose marker was truncated away (they are open again, which
        the rebuilt producer table says)."""
        ended = self._ended
        while ended and ended[-1].last_offset >= log_end_offset:
            ended.pop()

    def last_stable_offset(self, open_first_offsets: Iterable[int], high_watermark: int) -> int:
        """min(`high_watermark`, first offset of any open or unreplicated transaction). Only the
        transactions whose marker is at or above `high_watermark` count (a suffix of the list),
        so the answer is exact for any bound at or above the high watermark last told (a
        replica's ListOffsets reads at the log end), and a replayed one not yet settled is
        ignored."""
        stable = high_watermark
        for first_offset in open_first_offsets:
            stable = min(stable, first_offset)
        for ended in reversed(self._ended):
            if ended.last_offset < high_watermark:
                break
            stable = min(stable, ended.first_offset)
        return stable

    def unsettled(self) -> list[CompletedTransaction]:
        """The transactions kept, in marker order (what a producer snapshot lists)."""
        return list(self._ended)

    def __len__(self) -> int:
        return len(self._ended)
