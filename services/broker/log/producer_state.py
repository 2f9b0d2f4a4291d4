"""The producer state of one partition: idempotent producers' epochs and last batches (KIP-98).

Theory of operation (Kafka's ProducerStateManager and ProducerAppendInfo). An idempotent producer
stamps each batch with (producer_id, producer_epoch, base_sequence); sequences count records per
partition and wrap from SEQUENCE_MAX to 0. For each producer the table keeps one ProducerEntry
(producer_entry.py, with the types this module answers in): its current epoch, the metadata of its
last BATCHES_KEPT batches (the dedupe window) and the largest batch timestamp seen (for expiry).
Validate, then apply:

- `check_leader_append(batches)` changes nothing. It answers None (write the append),
  DuplicateAppend (the append was written before: answer with its original offsets) or
  AppendRefused (write nothing). Each batch is checked against the state the earlier batches of
  the same append would leave:
  * no entry: the batch must start at sequence 0, else UNKNOWN_PRODUCER_ID (the entry expired or
    was never written; the producer bumps its epoch and restarts at 0, KIP-360);
  * an older epoch: INVALID_PRODUCER_EPOCH (a newer instance fenced this one);
  * a newer epoch: it must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
  * the same epoch: a duplicate when a kept batch has the same first and last sequence; written
    when it continues the last kept sequence; DUPLICATE_SEQUENCE_NUMBER when it lies at or below
    the last kept sequence but left the window (written, offsets forgotten); else
    OUT_OF_ORDER_SEQUENCE_NUMBER (a gap);
  * a new non-transactional batch of a producer whose transaction is open here:
    INVALID_TXN_STATE (Kafka's rule; it would move the epoch under the open transaction).
  A duplicate is answered only when the whole append is duplicates whose original batches are
  consecutive in the log; a retried batch mixed with others is refused with INVALID_REQUEST.
- `apply(batches, now_ms)` is the only mutator and checks nothing: the leader calls it after a
  successful write, followers for replicated batches, the log for replay at load (one code path,
  DESIGN §5). A new epoch drops the old epoch's batches, as in Kafka. `now_ms` is the broker's
  clock at the append, the entries' last_append_ms (producer_entry.py says why, and what a
  replay passes).
- `expire(now_ms, expiration_ms)` forgets producers silent for expiration_ms
  (transactional.id.expiration / producer.id.expiration.ms in Kafka), except those with an open
  transaction and, on the coordinator topics (`keep_exhausted`), those at PRODUCER_EPOCH_MAX: a
  coordinator partition whose writer id was rotated fences the retired id at that epoch
  (services/coordinator/coordinator_partition.py), and nobody writes with that id again to keep
  its entry fresh, so it must outlive any earlier owner however long that one sleeps.
- Snapshots (producer_snapshot_codec.py) hold every entry with all its kept batches, so that a
  table rebuilt from a snapshot plus the batches after it equals the one that saw everything.

Transactions. A transactional batch opens the producer's transaction on this partition when none
is open (`current_txn_first_offset`); a transaction marker (a control batch: producer id and
epoch, no sequence, written by the broker for the coordinator) closes it, and `apply` returns it
as a CompletedTransaction for the log's last stable offset and aborted-transaction index
(transaction_index.py). Markers carry the epoch the coordinator bumped at the transaction's end
(KIP-890), so `check_marker` refuses one that is not above the producer's epoch unless it is a
retry of the last marker (no transaction opened since, and the same type: a COMMIT at the epoch
of an ABORT written here, say by an operator's AbortTransaction, is refused as
INVALID_PRODUCER_EPOCH, which its coordinator takes as moot and logs, as Kafka's does); a late
produce of the ended transaction then fails the data batches' own epoch check.

Batches whose producer_id is negative (NO_PRODUCER_ID) are not idempotent and are ignored by both
check and apply; `check_leader_append` passes over markers, which have their own check.

Invariants: entries are keyed by producer_id >= 0; each holds up to BATCHES_KEPT batches (none
only when a marker created it), oldest first, all of its current epoch, each with
last_offset >= base_offset; last_timestamp is at least the max_timestamp of every kept batch; an
open transaction starts at or before the entry's first kept batch of it.
Pure: no I/O, no clock (the caller passes now_ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT
from samsa.services.broker.log.producer_entry import (
    BATCHES_KEPT,
    NO_APPEND_TIME,
    NO_MARKER_TYPE,
    NO_OFFSET,
    NO_PRODUCER_ID,
    PRODUCER_EPOCH_MAX,
    SEQUENCE_MAX,
    SEQUENCE_MODULUS,
    AppendRefused,
    BatchMetadata,
    CompletedTransaction,
    CorruptSnapshotError,
    DuplicateAppend,
    MarkerWrittenBefore,
    ProducerBatchInfo,
    ProducerEntry,
    after_marker,
    last_sequence_of,
    next_entry,
)

_MARKER_NAMES = {CONTROL_TYPE_ABORT: "ABORT", CONTROL_TYPE_COMMIT: "COMMIT"}

# Re-exported: the table's users import its types from here.
__all__ = [
    "BATCHES_KEPT",
    "NO_APPEND_TIME",
    "NO_MARKER_TYPE",
    "NO_OFFSET",
    "NO_PRODUCER_ID",
    "PRODUCER_EPOCH_MAX",
    "SEQUENCE_MAX",
    "AppendRefused",
    "BatchMetadata",
    "CompletedTransaction",
    "CorruptSnapshotError",
    "DuplicateAppend",
    "MarkerWrittenBefore",
    "ProducerBatchInfo",
    "ProducerEntry",
    "ProducerStateTable",
]


def _check_marker(
    entry: ProducerEntry | None, producer_id: int, producer_epoch: int, marker_type: int
) -> AppendRefused | MarkerWrittenBefore | None:
    """Whether a transaction marker of (producer_id, producer_epoch) may be written. The
    coordinator bumps the epoch at every transaction end and writes the markers with the new
    epoch, so a marker must carry an epoch above the producer's: one at its epoch either was
    written already (no transaction open since, and the marker written then of the same type: a
    retry) or is late and would close the next transaction (refused, KIP-890). One of the other
    type at that epoch is refused too: that transaction already ended the other way here (an
    operator's AbortTransaction, then its coordinator's COMMIT), and answering it as written
    would hide the conflict."""
    if not 0 <= producer_epoch <= PRODUCER_EPOCH_MAX:
        return AppendRefused(
            ErrorCode.INVALID_RECORD,
            f"a marker for producer {producer_id} carries producer_epoch {producer_epoch}: "
            f"epochs are 0..{PRODUCER_EPOCH_MAX}",
        )
    if entry is None or producer_epoch > entry.producer_epoch:
        return None
    if producer_epoch == entry.producer_epoch and entry.current_txn_first_offset == NO_OFFSET:
        if marker_type == entry.last_marker_type:
            return MarkerWrittenBefore()
        written = _MARKER_NAMES.get(entry.last_marker_type, "no marker known")
        return AppendRefused(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"a {_MARKER_NAMES.get(marker_type, str(marker_type))} marker for producer "
            f"{producer_id} at epoch {producer_epoch}, whose transaction at that epoch ended "
            f"here with {written}: the outcomes conflict; it is not written",
        )
    return AppendRefused(
        ErrorCode.INVALID_PRODUCER_EPOCH,
        f"a marker for producer {producer_id} at epoch {producer_epoch} arrived after epoch "
        f"{entry.producer_epoch}"
        + (
            f" opened a transaction at offset {entry.current_txn_first_offset}"
            if producer_epoch == entry.producer_epoch
            else ""
        )
        + ": it is late, and writing it would end a newer transaction; it is not written",
    )


def _check_batch(
    entry: ProducerEntry | None, batch: ProducerBatchInfo
) -> BatchMetadata | AppendRefused | None:
    """One idempotent batch against its producer's entry: None when it is new and may be
    written, the kept BatchMetadata it duplicates, or why it is refused."""
    producer_id, epoch, sequence = batch.producer_id, batch.producer_epoch, batch.base_sequence
    last_sequence = last_sequence_of(batch)
    if not (0 <= epoch <= PRODUCER_EPOCH_MAX and 0 <= sequence <= SEQUENCE_MAX):
        return AppendRefused(
            ErrorCode.INVALID_RECORD,
            f"producer {producer_id}'s batch carries producer_epoch {epoch} and base_sequence "
            f"{sequence}: an idempotent batch needs an epoch in 0..{PRODUCER_EPOCH_MAX} and a "
            f"sequence in 0..{SEQUENCE_MAX}; fix the producer",
        )
    if entry is None:
        if sequence == 0:
            return None
        return AppendRefused(
            ErrorCode.UNKNOWN_PRODUCER_ID,
            f"producer {producer_id} (epoch {epoch}) has no state on this partition (expired or "
            f"never written) and its batch starts at sequence {sequence}, not 0: bump the "
            "producer epoch and restart this partition's sequence at 0 (KIP-360)",
        )
    if epoch < entry.producer_epoch:
        return AppendRefused(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"producer {producer_id} sent epoch {epoch} but this partition has seen epoch "
            f"{entry.producer_epoch}: a newer instance of the producer fenced this one; stop "
            "sending with it",
        )
    if epoch > entry.producer_epoch:
        if sequence == 0:
            return None
        return AppendRefused(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {producer_id} starts epoch {epoch} (after {entry.producer_epoch}) at "
            f"sequence {sequence}: expected sequence 0, a new epoch restarts the sequence",
        )
    return _check_same_epoch(entry, batch, last_sequence)


def _check_same_epoch(
    entry: ProducerEntry, batch: ProducerBatchInfo, last_sequence: int
) -> BatchMetadata | AppendRefused | None:
    sequence = batch.base_sequence
    for kept in entry.batches:
        if kept.first_sequence == sequence and kept.last_sequence == last_sequence:
            return kept
    latest = entry.batches[-1].last_sequence if entry.batches else -1
    expected = (latest + 1) % SEQUENCE_MODULUS
    if sequence == expected:
        return None
    where = f"producer {entry.producer_id} epoch {entry.producer_epoch}: batch "
    where += f"{sequence}..{last_sequence}"
    # At or below the latest sequence in serial-number arithmetic (RFC 1982), so that the wrap
    # changes nothing: a batch whose last sequence is less than half the ring behind the latest
    # is stale; one ahead of it (a gap, even across the wrap) is out of order. Never a duplicate
    # answer for a gap: the producer takes DUPLICATE_SEQUENCE_NUMBER as written.
    if entry.batches and (latest - last_sequence) % SEQUENCE_MODULUS < SEQUENCE_MODULUS // 2:
        return AppendRefused(
            ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
            f"{where} lies at or below the last written sequence {latest} but matches none of "
            f"the last {BATCHES_KEPT} batches kept (from sequence "
            f"{entry.batches[0].first_sequence}): it was written before and its offsets are "
            "forgotten; treat it as written and do not resend it",
        )
    return AppendRefused(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        f"{where}: expected sequence {expected}, got {sequence}; a batch before it is missing, "
        f"resend from sequence {expected} or bump the producer epoch",
    )


def _check_outside_transaction(
    entry: ProducerEntry | None, batch: ProducerBatchInfo
) -> AppendRefused | None:
    """Kafka's rule: written, such a batch could move the epoch under the open transaction,
    and the coordinator's marker (at the epoch it bumped) would be refused as late."""
    if entry is None or entry.current_txn_first_offset == NO_OFFSET:
        return None
    why = f"is open here since offset {entry.current_txn_first_offset}: send transactional batches"
    return AppendRefused(ErrorCode.INVALID_TXN_STATE, f"producer {batch.producer_id}'s txn {why}")


def _duplicate_append(
    duplicates: list[BatchMetadata], batch_count: int
) -> DuplicateAppend | AppendRefused:
    """The answer to an append in which `duplicates` of `batch_count` batches were written."""
    if len(duplicates) != batch_count:
        return AppendRefused(
            ErrorCode.INVALID_REQUEST,
            f"the append mixes {len(duplicates)} retried (duplicate) batches with "
            f"{batch_count - len(duplicates)} new or non-idempotent ones: send a retried batch "
            "alone, in an append of its own",
        )
    for previous, kept in pairwise(duplicates):
        if kept.base_offset != previous.last_offset + 1:
            return AppendRefused(
                ErrorCode.INVALID_REQUEST,
                f"the append's retried batches were written at offsets "
                f"{previous.base_offset}..{previous.last_offset} and "
                f"{kept.base_offset}..{kept.last_offset}, not consecutively: send a retried "
                "batch alone, in an append of its own",
            )
    return DuplicateAppend(duplicates[0].base_offset, duplicates[-1].last_offset)


class ProducerStateTable:
    """The entries of one partition, keyed by producer id. See the module docstring."""

    __slots__ = ("_entries", "_open")

    def __init__(self) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        # producer id -> current_txn_first_offset of the entries with an open transaction, kept
        # beside the entries so that every fetch's last stable offset costs no scan.
        self._open: dict[int, int] = {}

    def check_leader_append(
        self, batches: Sequence[ProducerBatchInfo]
    ) -> DuplicateAppend | AppendRefused | None:
        """Whether the leader may write `batches` (None), answers with the offsets of an earlier
        write (DuplicateAppend), or refuses them. Changes nothing."""
        pending: dict[int, ProducerEntry] = {}
        duplicates: list[BatchMetadata] = []
        for batch in batches:
            if batch.producer_id < 0 or batch.is_control:
                continue
            entry = pending.get(batch.producer_id, self._entries.get(batch.producer_id))
            outcome = _check_batch(entry, batch)
            if outcome is None and not batch.is_transactional:
                outcome = _check_outside_transaction(entry, batch)
            if isinstance(outcome, AppendRefused):
                return outcome
            if outcome is None:
                # The append's own entries serve its later batches' checks only: no time.
                pending[batch.producer_id] = next_entry(entry, batch, NO_APPEND_TIME)
            else:
                duplicates.append(outcome)
        if not duplicates:
            return None
        return _duplicate_append(duplicates, len(batches))

    def check_marker(
        self, producer_id: int, producer_epoch: int, marker_type: int
    ) -> AppendRefused | MarkerWrittenBefore | None:
        """Whether the leader may write a transaction marker of `marker_type` for this producer
        (None), must answer it as written before, or refuses it. Changes nothing."""
        entry = self._entries.get(producer_id)
        return _check_marker(entry, producer_id, producer_epoch, marker_type)

    def apply(
        self,
        batches: Iterable[ProducerBatchInfo],
        now_ms: int,
        marker_type: int = NO_MARKER_TYPE,
    ) -> list[CompletedTransaction]:
        """Record written batches, unchecked: after a leader write, on followers, in replay;
        `now_ms` is the broker's clock at their append (the entries' last_append_ms), and
        `marker_type` the control type of the marker among them (transaction_index.apply_batches
        applies each marker alone, with its type; NO_MARKER_TYPE: a later marker at its epoch
        is refused, never taken for its retry). Returns the transactions the batches' markers
        ended (those with records here)."""
        entries, opened = self._entries, self._open
        completed: list[CompletedTransaction] = []
        for batch in batches:
            producer_id = batch.producer_id
            if producer_id < 0:
                continue
            entry = entries.get(producer_id)
            if not batch.is_control:
                entries[producer_id] = after = next_entry(entry, batch, now_ms)
                if after.current_txn_first_offset != NO_OFFSET:
                    opened[producer_id] = after.current_txn_first_offset
                continue
            if entry is not None and entry.current_txn_first_offset != NO_OFFSET:
                completed.append(
                    CompletedTransaction(
                        producer_id, entry.current_txn_first_offset, batch.last_offset
                    )
                )
            entries[producer_id] = after_marker(entry, batch, now_ms, marker_type)
            opened.pop(producer_id, None)
        return completed

    def open_transactions(self) -> dict[int, int]:
        """producer id -> the first offset of its open transaction, for producers with one."""
        return dict(self._open)

    def open_first_offsets(self) -> Iterable[int]:
        """The first offsets of the open transactions (a view: do not keep it across changes)."""
        return self._open.values()

    def expire(self, now_ms: int, expiration_ms: int, *, keep_exhausted: bool = False) -> list[int]:
        """Forget producers whose last batch timestamp is expiration_ms or more before now_ms
        and that have no open transaction; the removed producer ids, sorted. With
        `keep_exhausted`, producers at PRODUCER_EPOCH_MAX are kept however old: no epoch above
        theirs exists, so their entry is a fence that refuses every earlier epoch for good."""
        expired = sorted(
            producer_id
            for producer_id, entry in self._entries.items()
            if entry.last_timestamp + expiration_ms <= now_ms
            and entry.current_txn_first_offset == NO_OFFSET
            and not (keep_exhausted and entry.producer_epoch == PRODUCER_EPOCH_MAX)
        )
        for producer_id in expired:
            del self._entries[producer_id]
        return expired

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def entries(self) -> list[ProducerEntry]:
        """Every entry, sorted by producer id."""
        return [self._entries[producer_id] for producer_id in sorted(self._entries)]

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateTable):
            return NotImplemented
        return self._entries == other._entries

    def __repr__(self) -> str:
        return f"ProducerStateTable({self.entries()!r})"

    @classmethod
    def from_entries(cls, entries: Iterable[ProducerEntry]) -> ProducerStateTable:
        """A table holding `entries` (a decoded snapshot: producer_snapshot_codec.py)."""
        table = cls()
        table._entries = {entry.producer_id: entry for entry in entries}
        table._open = {
            entry.producer_id: entry.current_txn_first_offset
            for entry in table._entries.values()
            if entry.current_txn_first_offset != NO_OFFSET
        }
        return table
