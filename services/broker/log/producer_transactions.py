"""A partition log's idempotent producers and transactions, which the log always feeds together.

Theory of operation (DESIGN §5; Kafka's ProducerStateManager with the transaction index, as
UnifiedLog drives them). Two parts follow the log end offset, and every step that moves it feeds
both, producer state first:

- Idempotent producers: each producer's epoch and last 5 batches (producer_state.py, pure) are
  kept in a ProducerLogState (producer_log_state.py). A leader append is checked against it
  before a byte is written (`check_leader_append`): a retry of batches the log holds answers
  their offsets and stores nothing, a gap or a stale epoch raises. Follower appends and replays
  feed the same table without checks. It is snapshotted at each roll and at close, rebuilt at
  open (loading.py) and after truncation (producer_snapshots.py); retention never touches it,
  expiry (`expire`) does.
- Transactions: the markers that end transactions are applied with the producer state, which
  answers the transactions they ended; a TransactionLogState (transaction_log_state.py) keeps
  each aborted one's entry in the `.txnindex` file of the segment holding its marker, and the
  ended transactions whose marker the high watermark has not passed (which every producer
  snapshot lists, so that a restart keeps them). From them and the open
  transactions come the last stable offset (`last_stable_offset`) and what a read_committed
  fetch must skip (`aborted`). The index is synced before a flush moves the recovery point
  (`sync`) and rebuilt from where every replay of the log began (`on_truncate`).

`Log` (log.py) owns one `ProducerTransactions` and calls it at each step; appends and reads pay no
Python call for it beyond those they paid before (the leader's check and the aborted transactions
are the parts' own methods, and the transaction index is called only when an append ended a
transaction; `last_stable_offset` pays one). This module only calls methods of the two parts and
must not import log.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from samsa.services.broker.log.producer_state import NO_OFFSET

if TYPE_CHECKING:
    from samsa.services.broker.log.append_info import AppendInfo, PlannedBatch
    from samsa.services.broker.log.producer_log_state import ProducerLogState
    from samsa.services.broker.log.producer_state import ProducerBatchInfo, ProducerEntry
    from samsa.services.broker.log.segment import Segment
    from samsa.services.broker.log.transaction_index import AbortedTransaction
    from samsa.services.broker.log.transaction_log_state import TransactionLogState


class ProducerTransactions:
    """One log's producer state and transaction state. Every method runs on the log's thread."""

    def __init__(self, producers: ProducerLogState, transactions: TransactionLogState) -> None:
        self._producers = producers
        self._transactions = transactions
        # None when the leader may write the batches; the original offsets (record_count 0)
        # when the log already holds them; raises SamsaError with the refusal's code otherwise
        # (ProducerLogState.check_leader_append, bound here: no extra call per append).
        self.check_leader_append: Callable[[Sequence[ProducerBatchInfo]], AppendInfo | None] = (
            producers.check_leader_append
        )
        # The aborted transactions overlapping [fetch_offset, upper_bound), given the base
        # offsets of the segment holding fetch_offset and of every later one
        # (TransactionLogState.aborted, bound here: no extra call per read_committed fetch).
        self.aborted: Callable[[Sequence[int], int, int], list[AbortedTransaction]] = (
            transactions.aborted
        )

    # --- reading -------------------------------------------------------------------------------

    def entries(self) -> list[ProducerEntry]:
        """Every idempotent producer the partition remembers, by producer id."""
        return self._producers.entries()

    @property
    def producer_count(self) -> int:
        return self._producers.producer_count

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer, at exactly this epoch, has a transaction open here."""
        entry = self._producers.entry(producer_id)
        return (
            entry is not None
            and entry.producer_epoch == producer_epoch
            and entry.current_txn_first_offset != NO_OFFSET
        )

    def last_stable_offset(
        self, high_watermark: int, log_end_offset: int, log_start_offset: int
    ) -> int:
        """min(`high_watermark` (at most the log end offset), the first offset of every open or
        not yet replicated transaction), but never below the log start (Log.last_stable_offset)."""
        stable = self._transactions.last_stable_offset(
            self._producers.open_transaction_first_offsets(), min(high_watermark, log_end_offset)
        )
        return max(stable, min(log_start_offset, high_watermark))

    def transaction_index(self) -> dict[int, list[AbortedTransaction]]:
        """Each segment's aborted-transaction index entries (for tests and tools)."""
        return self._transactions.entries()

    def newest_batch_base_offsets(self) -> set[int]:
        """The base offset of each live producer's newest batch (compaction keeps them whole)."""
        return self._producers.newest_batch_base_offsets()

    # --- the log's steps -----------------------------------------------------------------------

    def on_append(
        self, batches: Sequence[PlannedBatch], segment_base_offset: int, now_ms: int
    ) -> None:
        """Stored batches (leader's or follower's), unchecked, in the segment at
        `segment_base_offset`, at `now_ms`: the aborted transactions their markers ended are
        indexed there."""
        applied = self._producers.on_append(batches, now_ms)
        if applied.completed or applied.aborted:
            self._transactions.on_appended(applied.completed, applied.aborted, segment_base_offset)

    def on_roll(self, base_offsets: Sequence[int]) -> None:
        """A segment was created at the last of `base_offsets`: snapshot the producer state
        there, with the transactions not yet settled (and drop a snapshot that belongs to no
        segment, ProducerLogState.retain)."""
        self._producers.on_roll(base_offsets, self._transactions.unsettled())

    def sync_snapshots(self, first_offset: int, last_offset: int) -> bool:
        """fsync the producer snapshots in [first_offset, last_offset] written without; True
        when there were any (the caller fsyncs the directory)."""
        return self._producers.sync_snapshots(first_offset, last_offset)

    def on_truncate(self, segments: Sequence[Segment]) -> None:
        """The log lost its tail: rebuild the producer state from the newest snapshot left, and
        the transaction index from where that replay began."""
        rebuilt = self._producers.on_truncate(segments, self._transactions.high_watermark)
        self._transactions.on_replayed(rebuilt.replayed_from, rebuilt.completed, rebuilt.aborted)

    def on_truncate_fully(self) -> None:
        """The log restarts empty: forget every producer, snapshot and index entry."""
        self._producers.on_truncate_fully()
        self._transactions.on_truncate_fully()

    def retain(self, base_offsets: Sequence[int]) -> None:
        """Forget the producer snapshots and index entries of segments that are gone
        (retention, DeleteRecords, compaction's deletion of an emptied segment)."""
        self._producers.retain(base_offsets)
        self._transactions.retain(base_offsets)

    def sync(self) -> None:
        """fsync the index files written since the last sync (before a flush moves the recovery
        point, so that every entry below it is durable)."""
        self._transactions.sync()

    def expire(self, *, now_ms: int, expiration_ms: int, keep_exhausted: bool = False) -> list[int]:
        """Forget producers whose newest batch is `producer.id.expiration.ms` old
        (ProducerStateTable.expire)."""
        return self._producers.expire(
            now_ms=now_ms, expiration_ms=expiration_ms, keep_exhausted=keep_exhausted
        )

    def close(self, log_end_offset: int, base_offsets: Sequence[int]) -> None:
        """Snapshot the producer state and the transactions not yet settled durably at the log
        end, or delete every snapshot when it is empty (ProducerLogState.close)."""
        self._producers.close(log_end_offset, base_offsets, self._transactions.unsettled())
