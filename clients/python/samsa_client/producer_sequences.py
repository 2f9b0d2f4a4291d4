"""Sequencing for the idempotent producer: producer id, epoch and per-partition sequences — pure.

Theory of operation (Kafka's idempotent producer, KIP-98; epoch bumps, KIP-360). With idempotence
(the default), batches get their sequence when first drained — `next_sequence` per partition for
the current (producer id, epoch) — and keep it on every retry, so the broker drops duplicates and
rejects gaps (OUT_OF_ORDER_SEQUENCE_NUMBER). Without idempotence, order under retries holds only
with max.in.flight.requests.per.connection=1, exactly as in Kafka.

Resets. When the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID for the oldest
unfinished batch of a partition (it lost our state, or an earlier batch never arrived), that
partition's sequences can no longer be trusted. `reset_required` then stops draining; once what
is in flight has finished the driver gets a new epoch and calls `set_producer_id`. The driver
bumps the epoch itself (KIP-360: an idempotent producer needs no broker to reset its sequences,
`bumped_producer_epoch`) and calls InitProducerId only for the first id, when the epoch would
pass PRODUCER_EPOCH_MAX, or after INVALID_PRODUCER_EPOCH. OUT_OF_ORDER_SEQUENCE_NUMBER for a
batch behind an unfinished one is only that earlier batch's failure echoing, and is retried.

Unresolved sequences (Kafka's markSequenceUnresolved and maybeResolveSequences). A batch that
fails for good after it went out with a sequence (retries or delivery.timeout.ms exhausted, or
a non-retriable answer after an attempt whose outcome is unknown) may or may not be in the log,
so its partition's sequence is *unresolved*: no new batch is drained there, but the sequenced
batches after it go on, retries with the epoch and sequence they were sent with (a broker that
wrote them answers with a duplicate; re-sequenced in a new epoch they would be written twice).
A later batch acked proves no gap: resolved. OUT_OF_ORDER_SEQUENCE_NUMBER for the oldest batch
left proves one: a reset. When no sequenced batch of the partition is left and neither came,
`resolve_sequences` requires a reset. A batch the broker refused, every earlier attempt refused
as too large (batch_completion.py: `maybe_written`), is not in the log: a reset at once when no
older batch of its partition is unfinished (an older one's outcome may be unknown). A
transactional producer resets at once: its transaction can only abort, and nothing queued is
sent again.

Per partition, as in Kafka (each partition entry keeps its own producer id and epoch): brokers
check epochs and sequences per partition, so only the partitions that need it move to the new
epoch and restart at sequence 0. The others keep their (id, epoch) and sequences: a batch there
whose answer was lost (a broker killed mid-request) is retried with the sequence it was sent
with, so the broker drops it if it was written. Moving it to the new epoch would make it a new
batch to the broker, and a second copy.

Written before. A batch that fails after a *newer* batch of its partition was acked under the
same epoch was written (the broker takes sequences only in order) and its response was lost: it
completes as a success without an offset (Kafka's rule for DUPLICATE_SEQUENCE_NUMBER, which also
completes that way) as soon as that newer ack arrives, and is never re-sent — re-sending would
trust the broker to still remember its sequence, and one that lost it (an unclean election) would
append it twice, after records already acked behind it. As in Kafka, a batch of a partition whose
broker lost our state (UNKNOWN_PRODUCER_ID), whose earlier attempt had an unknown outcome and no
such proof, may be written twice: only then is a batch in doubt moved to a new epoch.
"""

from __future__ import annotations

from samsa.client.producer_batch import PartitionState, ProducerBatch
from samsa.common.errors import ErrorCode
from samsa.common.record import header

# Kafka wraps sequence numbers at Integer.MAX_VALUE (DefaultRecordBatch.incrementSequence).
SEQUENCE_MODULUS = 2**31
# The producer epoch is an int16 in the batch header (Kafka's Short.MAX_VALUE).
PRODUCER_EPOCH_MAX = 2**15 - 1

# Errors about our sequence: "written before" (a success without offset), else retried, with a
# producer-id reset when the batch is the oldest unfinished of its partition.
SEQUENCE_ERRORS = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
    }
)


class ProducerSequences:
    """The producer's identity and the sequence rules; partitions keep their own counters."""

    def __init__(self, idempotent: bool, transactional: bool = False) -> None:
        self.idempotent = idempotent
        self.transactional = transactional
        # Partitions whose sequence is unresolved, once each (or was, until an ack: pruned by
        # resolve_sequences).
        self.unresolved: list[PartitionState] = []
        self.producer_id = header.NO_PRODUCER_ID
        self.producer_epoch = header.NO_PRODUCER_EPOCH
        # Idempotence needs a (new) producer id and epoch before anything is drained.
        self.reset_required = idempotent

    def sending_allowed(self) -> bool:
        return not (self.idempotent and self.reset_required)

    def assign(self, state: PartitionState, batch: ProducerBatch) -> None:
        """At a batch's first drain in this epoch: its base sequence (the old bytes are stale)."""
        if self.idempotent and batch.base_sequence == header.NO_SEQUENCE:
            if state.producer_id == header.NO_PRODUCER_ID:  # the partition's first batch
                state.producer_id, state.producer_epoch = self.producer_id, self.producer_epoch
            batch.base_sequence = state.next_sequence
            state.next_sequence = (state.next_sequence + len(batch.values)) % SEQUENCE_MODULUS
            batch.encoded = None

    def on_acked(self, state: PartitionState, batch: ProducerBatch) -> bool:
        """True when this ack proves older batches of the partition written. It also resolves
        the partition's sequence: what failed for good before it was written (a piece that
        failed shares its batch's id; the rest's sequences follow it)."""
        if not self.idempotent:
            return False
        if batch.batch_id >= state.unresolved_batch_id:
            state.unresolved_batch_id = -1
        if batch.batch_id > state.last_acked_batch_id:
            state.last_acked_batch_id = batch.batch_id
            return True
        return False

    def written_before(
        self, state: PartitionState, batch: ProducerBatch, error_code: ErrorCode
    ) -> bool:
        """A failed attempt of `batch` that was in fact written: a newer batch was acked under
        the same epoch, or the broker says the sequence is a duplicate."""
        return self.known_written(state, batch) or (
            self.idempotent and error_code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
        )

    def known_written(self, state: PartitionState, batch: ProducerBatch) -> bool:
        """An attempt of `batch` was written: a newer batch of its partition was acked under the
        same epoch, and the broker accepts sequences only in order."""
        return (
            self.idempotent
            and batch.base_sequence != header.NO_SEQUENCE
            and state.last_acked_batch_id > batch.batch_id
        )

    def on_sequence_error(
        self, state: PartitionState, batch: ProducerBatch, error_code: ErrorCode
    ) -> bool:
        """True when `error_code` is about our sequence (then the batch is retried); requires
        a reset when the batch is the oldest unfinished of its partition (the broker lost our
        state); behind an unfinished batch it is that batch's failure echoing."""
        if not (self.idempotent and error_code in SEQUENCE_ERRORS):
            return False
        if _oldest_unfinished(state, batch):
            self.reset_required = state.reset_required = True
        return True

    def on_final_failure(
        self, state: PartitionState, batch: ProducerBatch, refused: bool = False
    ) -> None:
        """The batch went out with a sequence and will never be acked. `refused`: the broker
        refused it and no earlier attempt may have written it, so the next sequences have a gap;
        with no older batch unfinished (whose outcome may be unknown) that is a reset now, as
        Kafka's adjustSequenceNumbers. Otherwise the partition's sequence is unresolved
        (module docstring)."""
        if not (self.idempotent and batch.base_sequence != header.NO_SEQUENCE):
            return
        if self.transactional or (refused and _oldest_unfinished(state, batch)):
            self.reset_required = state.reset_required = True
            return
        if not any(state is other for other in self.unresolved):
            self.unresolved.append(state)
        state.unresolved_batch_id = max(state.unresolved_batch_id, batch.batch_id)

    def resolve_sequences(self) -> None:
        """Kafka's maybeResolveSequences: an unresolved partition with no sequenced batch left
        (in flight or waiting for its retry) and no later ack may have a gap: a reset."""
        if not self.unresolved:
            return
        waiting = []
        for state in self.unresolved:
            if state.unresolved_batch_id < 0:
                continue  # resolved by an ack
            if state.in_flight or any(b.base_sequence != header.NO_SEQUENCE for b in state.queue):
                waiting.append(state)
            else:
                self.reset_required = state.reset_required = True
        self.unresolved = waiting

    def set_producer_id(
        self, producer_id: int, producer_epoch: int, partitions: list[PartitionState]
    ) -> None:
        """A new (producer id, epoch). Partitions that need a reset, and those with no sequenced
        batch still unfinished, move to it: sequence 0, and every queued batch is sequenced
        (and encoded) again when drained. A partition with a sequenced batch waiting for its
        retry keeps its old (id, epoch) and sequences, so that retry can be recognised. The
        caller checks that nothing is in flight."""
        assert self.idempotent, "set_producer_id without enable.idempotence"
        assert producer_id >= 0 and producer_epoch >= 0
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.reset_required = False
        for state in partitions:
            retry_waiting = any(b.base_sequence != header.NO_SEQUENCE for b in state.queue)
            if retry_waiting and not state.reset_required:
                continue
            for batch in state.queue:
                # Known-written batches were completed when a newer one was acked.
                assert not self.known_written(state, batch)
                batch.base_sequence = header.NO_SEQUENCE
                batch.encoded = None
            state.producer_id, state.producer_epoch = producer_id, producer_epoch
            state.next_sequence = 0
            state.last_acked_batch_id = -1
            state.reset_required = False
            state.unresolved_batch_id = -1


def _oldest_unfinished(state: PartitionState, batch: ProducerBatch) -> bool:
    """No older batch of the partition is in flight or queued (`batch` is neither now)."""
    older_in_flight = bool(state.in_flight) and state.in_flight[0].batch_id < batch.batch_id
    older_queued = bool(state.queue) and state.queue[0].batch_id < batch.batch_id
    return not older_in_flight and not older_queued


def bumped_producer_epoch(producer_id: int, producer_epoch: int) -> int | None:
    """The epoch to reset sequences with, without asking a broker (KIP-360); None when a new
    producer id is needed: there is none yet, or the epoch would pass PRODUCER_EPOCH_MAX."""
    if producer_id == header.NO_PRODUCER_ID or producer_epoch >= PRODUCER_EPOCH_MAX:
        return None
    return producer_epoch + 1
