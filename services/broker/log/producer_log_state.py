"""The idempotent-producer state kept beside a partition log: the glue between `Log` and the core.

Theory of operation (Kafka's ProducerStateManager, as UnifiedLog drives it; DESIGN §5). The table
of each producer's epoch and last batches is producer_state.py's (pure); its snapshot files and
the replay from segments are producer_snapshots.py's. `ProducerLogState` holds the table as of the
log end offset with the offsets of the snapshot files kept, and `Log` (log.py) feeds it, through
its ProducerTransactions (producer_transactions.py), at each step that moves the log end:

- a leader append is checked before a byte is written (`check_leader_append`): a retry of
  batches the log holds answers their offsets and stores nothing, a gap or a stale epoch raises;
  a transaction marker must be alone in its append and pass the marker's epoch check (a retried
  marker stores nothing, a late one raises);
- every stored append, leader's or follower's, is applied unchecked (`on_append`), which returns
  the transactions its markers ended (transaction_log_state.py indexes the aborted ones);
- a roll snapshots the state at the new segment's base offset, without fsync (`on_roll`); the
  snapshot is fsynced later, once, by `sync_snapshots`: before a flush moves the recovery point
  to or past it, and before retention or DeleteRecords deletes the segments below it (Kafka
  fsyncs it in the flush that follows the roll). Recovery trusts the snapshots at or below the
  recovery point, and once the segments below one are gone it is the only record of their
  producers. Appends never fsync one. An empty state's snapshot is never fsynced: lost, the
  rebuild falls back to an older snapshot or to the log start, and finds the same state;
- each segment keeps the snapshot at its base until it goes (Kafka's one per segment): a roll,
  a deletion from the front or compaction's deletion of a segment drops those that belong to
  no segment left (`retain`; producer_snapshots.stray_offsets), and so does `close`;
- a truncation rebuilds the state from the newest snapshot left and the batches after it
  (`on_truncate`), a full truncation forgets it and its snapshots (`on_truncate_fully`). It has
  no clock: the replayed batches take the latest time the state was given (the open's, an
  append's or an expiry's), at or after each one's true append, so their age reads young, the
  safe side (producer_entry.py);
- `close` snapshots it durably at the log end, or deletes every snapshot when it is empty;
- every snapshot also lists the transactions ended by a marker the high watermark has not yet
  passed (the caller's, transaction_log_state.py), which a restart must not forget;
- expiry (`expire`) forgets silent producers; retention never touches the state (KIP-360).

Whether the state changed since the newest snapshot was written is tracked so that `close` writes
a snapshot only when the one at the log end would differ. This module only calls the functions of
producer_snapshots.py and must not import log.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from samsa.common.errors import InvalidRecordError, SamsaError
from samsa.services.broker.log import producer_snapshots
from samsa.services.broker.log.append_info import AppendInfo, PlannedBatch
from samsa.services.broker.log.producer_snapshots import Rebuilt
from samsa.services.broker.log.producer_state import (
    CompletedTransaction,
    DuplicateAppend,
    MarkerWrittenBefore,
    ProducerBatchInfo,
    ProducerEntry,
    ProducerStateTable,
)
from samsa.services.broker.log.transaction_index import AppliedTransactions, apply_batches

if TYPE_CHECKING:
    from pathlib import Path

    from samsa.services.broker.log.segment import Segment


class ProducerLogState:
    """One log's producer state at its log end offset, and the snapshot files kept for it. Every
    method runs on the log's thread."""

    def __init__(
        self,
        directory: Path,
        producers: ProducerStateTable,
        snapshot_offsets: list[int],
        unsynced: Iterable[int] = (),
        clock_ms: int = 0,
    ) -> None:
        self._directory = directory
        # The latest clock reading given (the open's, each append's and expiry's): what a
        # truncation's replay takes as the append time of the batches it passes.
        self._clock_ms = clock_ms
        self._producers = producers
        # The offsets of the snapshot files kept, ascending (producer_snapshots.py).
        self._snapshot_offsets = snapshot_offsets
        # Whether the state changed since the newest snapshot was written.
        self._changed = False
        # The offsets of the kept snapshots written without fsync that hold producers: those
        # the open's rebuild wrote or, after an unclean stop, replayed from (`unsynced`: a roll
        # at the recovery point wrote it after the flush that set it), then the rolls'. The
        # others found at open are durable: a flush or a deletion synced them before the
        # recovery point passed them, and an unclean open's rebuild replaced those above it
        # (producer_snapshots.py).
        self._unsynced: set[int] = set(unsynced)

    @classmethod
    def empty(cls, directory: Path) -> ProducerLogState:
        return cls(directory, ProducerStateTable(), [])

    @classmethod
    def loaded(
        cls, directory: Path, rebuilt: Rebuilt, snapshot_offsets: list[int], now_ms: int
    ) -> ProducerLogState:
        """The state the open at `now_ms` rebuilt, with the snapshots kept (some written by its
        replay)."""
        return cls(directory, rebuilt.producers, snapshot_offsets, rebuilt.unsynced, now_ms)

    def entries(self) -> list[ProducerEntry]:
        """Every idempotent producer the partition remembers, by producer id."""
        return self._producers.entries()

    @property
    def producer_count(self) -> int:
        """How many producers the partition remembers (a length: no list is built)."""
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        """The producer's entry, or None when the partition does not remember it."""
        return self._producers.entry(producer_id)

    def newest_batch_base_offsets(self) -> set[int]:
        """The base offset of each live producer's newest batch (compaction keeps them whole)."""
        return {
            entry.batches[-1].base_offset for entry in self._producers.entries() if entry.batches
        }

    def check_leader_append(self, batches: Sequence[ProducerBatchInfo]) -> AppendInfo | None:
        """None when the leader may write `batches`; the original offsets (record_count 0) when
        the log already holds them; raises SamsaError with the refusal's code otherwise.
        Changes nothing."""
        if any(batch.is_control for batch in batches):
            return self._check_marker(batches)
        verdict = self._producers.check_leader_append(batches)
        if verdict is None:
            return None
        if isinstance(verdict, DuplicateAppend):
            return _duplicate_info(verdict)
        raise SamsaError(verdict.message, verdict.code)

    def _check_marker(self, batches: Sequence[ProducerBatchInfo]) -> AppendInfo | None:
        """A transaction marker is appended alone (WriteTxnMarkers writes one per partition);
        a retried one answers MARKER_WRITTEN_BEFORE's empty info, a late one raises."""
        if len(batches) != 1:
            raise InvalidRecordError(
                f"an append holding a transaction marker has {len(batches)} batches: a marker "
                "is appended alone"
            )
        marker = batches[0]
        verdict = self._producers.check_marker(
            marker.producer_id, marker.producer_epoch, marker.control_type
        )
        if verdict is None:
            return None
        if isinstance(verdict, MarkerWrittenBefore):
            return MARKER_WRITTEN_BEFORE
        raise SamsaError(verdict.message, verdict.code)

    def on_append(self, batches: Sequence[PlannedBatch], now_ms: int) -> AppliedTransactions:
        """Record batches stored at `now_ms`, unchecked (leader writes, follower writes alike);
        returns the transactions their markers ended, with the aborted ones' index entries."""
        self._clock_ms = max(self._clock_ms, now_ms)
        if not any(batch.producer_id >= 0 for batch in batches):
            return AppliedTransactions([], [])
        self._changed = True
        return apply_batches(self._producers, batches, _marker_type, now_ms)

    def on_roll(
        self, base_offsets: Sequence[int], unsettled: Sequence[CompletedTransaction]
    ) -> None:
        """Snapshot the state, with the `unsettled` transactions, at the new segment's base
        offset (the last of `base_offsets`, the log end offset before the append being rolled
        for), without fsync: `sync_snapshots` fsyncs it later. A snapshot above the previous
        segment's base (a close's) goes."""
        base_offset = base_offsets[-1]
        self._write_snapshot(base_offset, durable=False, unsettled=unsettled)
        if len(self._producers):
            self._unsynced.add(base_offset)
        else:
            self._unsynced.discard(base_offset)
        self.retain(base_offsets)

    def retain(self, base_offsets: Sequence[int]) -> None:
        """Delete the snapshots of segments that are gone (`base_offsets` are those left)."""
        strays = producer_snapshots.stray_offsets(self._snapshot_offsets, base_offsets)
        if not strays:
            return
        producer_snapshots.delete_snapshots(self._directory, strays)
        gone = set(strays)
        self._snapshot_offsets = [o for o in self._snapshot_offsets if o not in gone]
        self._unsynced -= gone

    def sync_snapshots(self, first_offset: int, last_offset: int) -> bool:
        """fsync the unsynced snapshots at offsets in [first_offset, last_offset], each once;
        True when there were any (the caller fsyncs the directory for their entries)."""
        offsets = sorted(o for o in self._unsynced if first_offset <= o <= last_offset)
        for offset in offsets:
            producer_snapshots.sync_snapshot(self._directory, offset)
            self._unsynced.discard(offset)
        return bool(offsets)

    def on_truncate(self, segments: Sequence[Segment], high_watermark: int) -> Rebuilt:
        """After a truncation: drop the snapshots above the new log end and rebuild the state
        from the newest one left (or the log start) and the batches after it; returns what the
        replay passed over (the transaction index is rebuilt from it). The transactions ended
        below `high_watermark` are settled (the snapshots the replay writes leave them out)."""
        rebuilt = producer_snapshots.rebuild(
            self._directory,
            self._snapshot_offsets,
            segments,
            empty_without_snapshot=False,
            high_watermark=high_watermark,
            clock_ms=self._clock_ms,
        )
        self._producers = rebuilt.producers
        self._changed = True
        self._unsynced.intersection_update(self._snapshot_offsets)  # the rebuild deleted some
        self._unsynced.update(rebuilt.unsynced)
        return rebuilt

    def open_transaction_first_offsets(self) -> Iterable[int]:
        """The first offset of each producer's open transaction on this partition."""
        return self._producers.open_first_offsets()

    def on_truncate_fully(self) -> None:
        """The log restarts empty: forget every producer and delete every snapshot."""
        producer_snapshots.delete_snapshots(self._directory, self._snapshot_offsets)
        self._snapshot_offsets = []
        self._unsynced.clear()
        self._producers = ProducerStateTable()
        self._changed = False

    def expire(self, *, now_ms: int, expiration_ms: int, keep_exhausted: bool = False) -> list[int]:
        """Forget producers whose newest batch is `producer.id.expiration.ms` old
        (ProducerStateTable.expire)."""
        self._clock_ms = max(self._clock_ms, now_ms)
        expired = self._producers.expire(now_ms, expiration_ms, keep_exhausted=keep_exhausted)
        if expired:
            self._changed = True
        return expired

    def close(
        self,
        log_end_offset: int,
        base_offsets: Sequence[int],
        unsettled: Sequence[CompletedTransaction],
    ) -> None:
        """Snapshot the state, with the `unsettled` transactions, durably at the log end (so a
        clean open replays nothing; an older close's goes), or, when both are empty, delete every
        snapshot (so a clean open without one starts empty). Not when only the table is: expiry
        forgets a producer whose transaction ended, its marker maybe still above the high
        watermark, and the open must still know that transaction. A snapshot at the log end that
        the state has not changed since is kept, though it may list transactions settled since:
        the open settles them again with the checkpointed high watermark."""
        if not len(self._producers) and not unsettled:
            producer_snapshots.delete_snapshots(self._directory, self._snapshot_offsets)
            self._snapshot_offsets = []
            self._unsynced.clear()
        elif self._changed or self._snapshot_offsets[-1:] != [log_end_offset]:
            self._write_snapshot(log_end_offset, durable=True, unsettled=unsettled)
            self.retain(base_offsets)

    def _write_snapshot(
        self, offset: int, *, durable: bool, unsettled: Sequence[CompletedTransaction]
    ) -> None:
        """Snapshot the state as of `offset` (the log end offset)."""
        producer_snapshots.write_snapshot(
            self._directory, offset, self._producers, durable=durable, unsettled=unsettled
        )
        if offset not in self._snapshot_offsets:
            self._snapshot_offsets.append(offset)
        if durable:
            self._unsynced.discard(offset)
        self._changed = False


# What a retried marker's append answers: it stored nothing, and its offset is not known.
MARKER_WRITTEN_BEFORE = AppendInfo(
    first_offset=-1,
    last_offset=-1,
    max_timestamp=-1,
    offset_of_max_timestamp=-1,
    log_append_time_ms=-1,
    record_count=0,
    size_bytes=0,
)


def _marker_type(batch: PlannedBatch) -> int:
    return batch.control_type


def _duplicate_info(duplicate: DuplicateAppend) -> AppendInfo:
    """What a retried append that the log already holds answers: its original offsets."""
    return AppendInfo(
        first_offset=duplicate.base_offset,
        last_offset=duplicate.last_offset,
        max_timestamp=-1,
        offset_of_max_timestamp=-1,
        log_append_time_ms=-1,
        record_count=0,
        size_bytes=0,
    )
