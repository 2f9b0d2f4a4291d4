"""Log compaction, pure: keep the newest record per key, rewrite batches without the rest.

Theory of operation (Kafka's LogCleaner, simplified). Compaction runs over the closed segments
wholly below the last stable offset only (the cleanable range ends there or at the active
segment's base offset, whichever is lower: cleaner.py) in two passes:

1. `build_key_map` reads every decoded batch of that range and maps each key to the offset of
   its newest record.
2. `compact_batch` rewrites one batch: a record survives only if it has a key and is its key's
   newest; a newest record with a null value (a tombstone) survives until delete.retention.ms
   after the pass that first cleaned it (Kafka's delete horizon, KIP-534; delete_horizon.py says
   why not its record timestamp), so that consumers have that long to see the delete.

Choices a reviewer should know:
- Keyless records go, as Kafka's cleaner drops them. A compacted topic's leader refuses them
  (append_info.py, as Kafka's LogValidator does), but a topic whose cleanup.policy became compact
  (AlterConfigs) may hold some from before; a batch kept whole (below) keeps its own.
- The newest batch of each idempotent producer the log remembers is kept whole (`keep_whole`, by
  base offset): should the producer state ever be rebuilt from the log alone, its last sequence
  is still there (a re-encoded batch's last_offset_delta, hence its last sequence, can shrink).
  Such a batch may keep a record its key's newest superseded; should that newest be a
  tombstone, it stays past its horizon while an older record of its key is left (and goes
  at the earliest in the pass after the one that removes that record): removed first, it
  would leave the older value as the last a reader from the log start sees, and the deleted
  key would come back (Kafka keeps the batch too, but filters its records, which Samsa's
  codec cannot do without shrinking the last offset).
- Transactions (Kafka's transaction-aware cleaning). The cleanable range ends at the last stable
  offset, so every transactional batch in it belongs to a transaction whose marker is written and
  replicated; the aborted-transaction index (`AbortedRanges`: producer id, first offset, marker
  offset) says which ended in an abort. An aborted transaction's batches are removed whole and
  their keys never enter the map (an aborted record must not shadow a committed one); a committed
  transaction's records are compacted like any others, and re-encoded batches stay
  transactional.
- Markers (control batches). A COMMIT marker goes (`RemovableMarkers`) once three things hold:
  its transaction has no record left (an earlier pass removed them: the markers are judged on
  the log as this pass finds it, as Kafka's cleaner does), a later batch of its producer is in
  the cleanable range (committed, so no truncation takes it; a producer's last batch there is
  never removed, so a replay of the log from a producer snapshot taken while the transaction
  was open always reaches a batch that ends it), and its timestamp is delete.retention.ms old
  (Kafka keeps markers that long). An ABORT marker stays with its transaction-index entry,
  departing from Kafka on purpose: a replica out of the ISR may hold an aborted transaction's
  records copied before this one removed them and, without the marker, would join them to the
  producer's next transaction and show them if that one commits. A missing COMMIT marker can
  only join records that a newer record of their key superseded (nothing else removes a
  committed record), so whichever way that transaction ends there, each key's newest record is
  what a reader sees. Aborts are rare; commits are not, so this bounds what a topic written in
  transactions keeps (`__consumer_offsets` above all).
- A batch whose records all survive is returned as the same bytes object (no re-encode); a batch
  with none is dropped; otherwise it is re-encoded keeping its base offset, partition leader
  epoch, producer id/epoch, base sequence, compression, timestamp type and each surviving
  record's offset delta and timestamp, so offsets never change. The codec derives
  last_offset_delta from the last surviving record, so when a batch's last record is removed its
  last_offset_delta shrinks with it: the offsets of surviving records are what is preserved.

Invariants: every offset in the output existed in the input with the same key, value, headers and
timestamp; output batches keep the input order.
"""

from __future__ import annotations

import bisect
from collections.abc import Container, Iterable
from dataclasses import dataclass, field

from samsa.common.record.codec import (
    CONTROL_TYPE_COMMIT,
    RecordBatch,
    build_batch,
    read_control_marker,
)
from samsa.common.record.header import BatchHeader, stamp_log_append_time
from samsa.services.broker.log.delete_horizon import FirstCleaned
from samsa.services.broker.log.transaction_index import AbortedTransaction

OFFSET_MAX = 2**63 - 1
NEVER = 2**63 - 1  # a time that never comes (Kafka's Long.MAX_VALUE)


class AbortedRanges:
    """Which transactional data batches belong to aborted transactions, from the aborted-
    transaction index's entries: a batch of producer P at base offset b is aborted when an entry
    of P spans first_offset <= b <= its marker's offset. One producer's transactions never
    overlap, so the answer does not depend on the order batches are asked about."""

    def __init__(self, aborted: Iterable[AbortedTransaction] = ()) -> None:
        self._ranges: dict[int, list[tuple[int, int]]] = {}
        for entry in aborted:
            self._ranges.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset)
            )
        for ranges in self._ranges.values():
            ranges.sort()

    def contains(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self._ranges.get(header.producer_id)
        if not ranges:
            return False
        # The last transaction of the producer starting at or before the batch.
        index = bisect.bisect_right(ranges, (header.base_offset, OFFSET_MAX)) - 1
        return index >= 0 and header.base_offset <= ranges[index][1]


NO_ABORTED = AbortedRanges()


class RemovableMarkers:
    """The COMMIT markers a pass may remove (the rules are in the module docstring). `see`
    every batch of the cleanable range in log order before anything is removed, then ask
    `offsets`."""

    def __init__(self, *, now_ms: int, delete_retention_ms: int) -> None:
        self._horizon = now_ms - delete_retention_ms  # markers at or before it are old enough
        self._with_records: set[int] = set()  # producers with a batch since their last marker
        self._last_offset: dict[int, int] = {}  # producer id -> the last offset of its batches
        self._candidates: list[tuple[int, int]] = []  # (producer id, marker offset)
        self._delete_retention_ms = delete_retention_ms
        # When the earliest empty COMMIT marker still too young to go will be old enough.
        self.young_until_ms = NEVER

    def see(self, batch: RecordBatch) -> None:
        header = batch.header
        producer_id = header.producer_id
        if producer_id < 0:
            return
        self._last_offset[producer_id] = header.last_offset
        if not header.is_control:
            self._with_records.add(producer_id)
        elif producer_id in self._with_records:
            self._with_records.discard(producer_id)
        elif read_control_marker(batch)[0] == CONTROL_TYPE_COMMIT:
            if header.max_timestamp <= self._horizon:
                self._candidates.append((producer_id, header.base_offset))
            else:
                old_enough_at = header.max_timestamp + self._delete_retention_ms
                self.young_until_ms = min(self.young_until_ms, old_enough_at)

    def offsets(self) -> set[int]:
        """The removable markers' offsets."""
        return {
            offset
            for producer_id, offset in self._candidates
            if self._last_offset[producer_id] > offset
        }


def update_key_map(
    key_map: dict[bytes, int], batch: RecordBatch, aborted: AbortedRanges = NO_ABORTED
) -> None:
    """Record the batch's keys at their offsets (later batches win: feed them in log order);
    markers and aborted transactions' batches have none that count."""
    if batch.header.is_control or aborted.contains(batch.header):
        return
    key_map.update(zip(batch.keys, batch.offsets(), strict=True))  # type: ignore[arg-type]
    key_map.pop(None, None)  # type: ignore[call-overload]


def build_key_map(
    batches: Iterable[RecordBatch], aborted: AbortedRanges = NO_ABORTED
) -> dict[bytes, int]:
    """Map each key to the offset of its newest record."""
    key_map: dict[bytes, int] = {}
    for batch in batches:
        update_key_map(key_map, batch, aborted)
    return key_map


@dataclass(frozen=True)
class CleaningRules:
    """What one pass keeps of each batch: `key_map` from `build_key_map`, the time and
    delete.retention.ms for tombstones, the batches kept whole (by base offset), the aborted
    transactions, the markers to remove (by offset: `RemovableMarkers`) and when earlier passes
    first cleaned each offset (a tombstone goes delete.retention.ms after that; never in the
    pass that first cleans it)."""

    key_map: dict[bytes, int]
    now_ms: int
    delete_retention_ms: int
    keep_whole: Container[int] = ()
    aborted: AbortedRanges = NO_ABORTED
    removed_markers: Container[int] = ()
    first_cleaned: FirstCleaned = field(default_factory=FirstCleaned)
    # Filled by `compact_batch` as the pass goes, in log order: the keys with a record older than
    # their newest that an earlier pass left (only a batch kept whole keeps one), so that their
    # tombstone stays whatever its horizon.
    shadowed: set[bytes] = field(default_factory=set)

    def tombstone_horizon_ms(self, header: BatchHeader) -> int:
        """When the batch's tombstones may go: delete.retention.ms after the pass that first
        cleaned it (this one, when none did before)."""
        first_cleaned_ms = self.first_cleaned.first_cleaned_ms(header.base_offset)
        if first_cleaned_ms is None:
            first_cleaned_ms = self.now_ms
        return first_cleaned_ms + self.delete_retention_ms


def compact_batch(raw: bytes, batch: RecordBatch, rules: CleaningRules) -> bytes | None:
    """The batch without superseded or keyless records: `raw` itself, a re-encoded batch, or
    None (an aborted transaction's batch, a marker to remove, or no record left)."""
    header = batch.header
    if header.is_control:
        return None if header.base_offset in rules.removed_markers else raw
    offsets = batch.offsets()
    if header.base_offset in rules.keep_whole:
        _note_shadowed(batch.keys, offsets, rules)
        return raw
    if rules.aborted.contains(header):
        return None
    tombstones_expired = rules.tombstone_horizon_ms(header) <= rules.now_ms
    key_map = rules.key_map
    survivors = [
        index
        for index, (key, value, offset) in enumerate(
            zip(batch.keys, batch.values, offsets, strict=True)
        )
        if key is not None
        and key_map.get(key) == offset
        and not (value is None and tombstones_expired and key not in rules.shadowed)
    ]
    if tombstones_expired and len(survivors) < len(offsets):
        _note_shadowed(batch.keys, offsets, rules)
    if len(survivors) == len(offsets):
        return raw
    if not survivors:
        return None
    return _rebuild(batch, survivors)


def _note_shadowed(keys: list[bytes | None], offsets: list[int], rules: CleaningRules) -> None:
    """Note in `rules.shadowed` the keys of the batch's records that are not their key's newest
    while that newest lies where an earlier pass cleaned: only a batch kept whole leaves one
    there (any other pass removes it), and a tombstone of the key removed past its horizon
    would let that older record be what a reader from the log start sees last (the key would
    come back)."""
    cleaned_end = rules.first_cleaned.end
    for key, offset in zip(keys, offsets, strict=True):
        newest = rules.key_map.get(key) if key is not None else None
        if newest is not None and newest != offset and newest < cleaned_end:
            rules.shadowed.add(key)  # type: ignore[arg-type]


def _rebuild(batch: RecordBatch, survivors: list[int]) -> bytes:
    header = batch.header
    headers = [batch.headers[index] for index in survivors]
    rebuilt = build_batch(
        [batch.values[index] for index in survivors],
        keys=[batch.keys[index] for index in survivors],
        # The stored timestamps, not batch.timestamps(): under LogAppendTime those all read as
        # the append time, which is re-stamped below.
        timestamps=[header.base_timestamp + batch.timestamp_deltas[index] for index in survivors],
        headers=headers if any(headers) else None,
        offset_deltas=[batch.offset_deltas[index] for index in survivors],
        compression=header.compression,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
    )
    if not header.is_log_append_time:
        return rebuilt
    buffer = bytearray(rebuilt)
    stamp_log_append_time(buffer, 0, len(buffer), header.max_timestamp)
    return bytes(buffer)
