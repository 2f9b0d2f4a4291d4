"""The clients of the replication simulation (replication_sim.py): a plain acks=all producer and
an idempotent one (KIP-98), over the broker's own `produce`, and the acknowledgements the
acks=all settling rule (`settled`) releases.

The plain producer sends 1 to 3 records b"v<n>" to the controller's leader (sometimes, as a
stale client, to any live broker). The idempotent producer (one producer id) keeps up to
IN_FLIGHT_MAX batches unacknowledged, sends its oldest unsent batch first, and sends a batch
again, in order, after a failure or when its broker goes down (`_forget_produces`). When the
leader lost its state (its records deleted) it resets its sequences as KIP-360 does. Every
acknowledged record is recorded in `acked`, the offset it was answered with, for the checks.
On a compacted topic every record is keyed (replication_checks.compaction_key), and after each
produce the leader appended, a batch with a keyless record must be refused (INVALID_RECORD).
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.requests.produce import ReplicationWait, produce
from samsa.services.broker.requests.produce_wait import settled
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_checks import SafetyViolation, compaction_key
from tests.unit.broker.replication_cluster import TOPIC, Broker, ClusterState

# The idempotent producer (KIP-98): one producer id and epoch, at most 5 batches unacknowledged.
PRODUCER_ID = 7
IN_FLIGHT_MAX = 5
# Answers to the oldest unacknowledged batch that mean the leader lost the producer's state.
STATE_LOST = (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


@dataclass
class IdempotentBatch:
    """One batch of an idempotent (or transactional, transaction_sim.py) producer: records
    `sequence`, `sequence + 1`, ... (the idempotent producer's values are b"p<sequence>"). It is
    sent, and after a failure sent again, in sequence order."""

    sequence: int
    values: list[bytes]
    sent_to: int | None = None  # the broker it is in flight to; None: (re)send it
    acknowledged: bool = False
    attempts: int = 0


@dataclass
class Produce:
    """One acks=all produce waiting at its leader."""

    broker_id: int
    values: list[bytes]
    wait: ReplicationWait
    batch: IdempotentBatch | None = None


class ReplicationProducers(ClusterState):
    """The producers, as methods of the simulation (which inherits them): the steps "produce"
    and "idempotent", and `_settle` after every step."""

    produces: list[Produce]
    batches: list[IdempotentBatch]
    next_sequence: int
    producer_epoch: int
    epoch_first_sequence: int
    sequence_reset_needed: bool
    next_value: int

    def _forget_produces(self, broker_id: int) -> None:
        # The client's connection broke: those produces were not acknowledged (the idempotent
        # producer sends its batches again).
        for pending in self.produces:
            if pending.broker_id == broker_id and pending.batch is not None:
                pending.batch.sent_to = None
        self.produces = [p for p in self.produces if p.broker_id != broker_id]
        for batch in self.batches:
            if batch.sent_to == broker_id:
                batch.sent_to = None

    def _step_produce(self) -> bool:
        live = self._live()
        if not live:
            return False
        # Usually the leader the controller names; sometimes a broker a stale client picked.
        leader = self.state().leader
        target = self.brokers.get(leader) if self.rng.random() < 0.9 else self.rng.choice(live)
        if target is None or target.host is None:
            return False
        numbers = range(self.next_value, self.next_value + self.rng.randint(1, 3))
        values = [b"v%d" % n for n in numbers]
        self.next_value += len(values)
        keys = [compaction_key(value) for value in values] if self.compaction else None
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30_000)
        records = build_batch(values, keys=keys)
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=records)
        response, waits = produce(target.host, request, self.now_ms, internal_write_refusal=None)
        result = response.topics[0].partitions[0]
        if waits:
            self.produces.append(Produce(target.broker_id, values, waits[0]))
        elif result.error_code == 0:
            self._acknowledge(values, result.base_offset)
        else:
            self.counts["produce refused"] += 1
            return True
        if self.compaction:
            self._produce_keyless(target)
        return True

    def _produce_keyless(self, leader: Broker) -> None:
        """Compaction mode, to the leader that just appended a produce: a batch with a keyless
        record is refused whole, INVALID_RECORD (Kafka's "Compacted topic cannot accept message
        without key"), and nothing of it is stored."""
        hosted = leader.hosted()
        assert hosted is not None and leader.host is not None
        end_before = hosted.log.log_end_offset
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30_000)
        records = build_batch([b"keyed", b"keyless"], keys=[b"k0", None])
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=records)
        response, waits = produce(leader.host, request, self.now_ms, internal_write_refusal=None)
        result = response.topics[0].partitions[0]
        if waits or result.error_code != ErrorCode.INVALID_RECORD:
            raise SafetyViolation(
                f"broker {leader.broker_id} answered {ErrorCode(result.error_code).name} to a "
                "keyless record on the compacted topic, not INVALID_RECORD"
            )
        if hosted.log.log_end_offset != end_before:
            raise SafetyViolation(f"broker {leader.broker_id} stored a refused keyless batch")
        self.counts["keyless produces refused"] += 1

    def _step_idempotent(self) -> bool:
        """The idempotent producer sends its first batch not in flight (a retry, in order), or
        a new batch when fewer than IN_FLIGHT_MAX are unacknowledged."""
        if not self._reset_sequences_if_needed():
            return False
        batch = next((b for b in self.batches if b.sent_to is None), None)
        if batch is None:
            if len(self.batches) >= IN_FLIGHT_MAX:
                return False
            count = self.rng.randint(1, 3)
            sequences = range(self.next_sequence, self.next_sequence + count)
            batch = IdempotentBatch(self.next_sequence, [b"p%d" % n for n in sequences])
            self.next_sequence += count
            self.batches.append(batch)
        elif batch is not self.batches[0] and self.batches[0].sent_to is None:
            return False
        return self._send_idempotent(batch)

    def _reset_sequences_if_needed(self) -> bool:
        """KIP-360, as the SDK does it (producer_sequences.py): once the oldest unacknowledged
        batch was refused because the leader lost this producer's state (its records deleted),
        and nothing is in flight, bump the epoch and number the batches left from 0 again.
        Returns whether the producer may send."""
        if not self.sequence_reset_needed:
            return True
        if any(b.sent_to is not None for b in self.batches):
            return False  # what is in flight finishes first
        self.producer_epoch += 1
        self.epoch_first_sequence = self.batches[0].sequence if self.batches else self.next_sequence
        self.sequence_reset_needed = False
        self.counts["idempotent epoch bumps (KIP-360)"] += 1
        return True

    def _send_idempotent(self, batch: IdempotentBatch) -> bool:
        leader = self.brokers.get(self.state().leader)
        if leader is None or leader.host is None:
            return False
        records = build_batch(
            batch.values,
            keys=[compaction_key(value) for value in batch.values] if self.compaction else None,
            producer_id=PRODUCER_ID,
            producer_epoch=self.producer_epoch,
            base_sequence=batch.sequence - self.epoch_first_sequence,
        )
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30_000)
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=records)
        hosted = leader.hosted()
        end_before = -1 if hosted is None else hosted.log.log_end_offset
        response, waits = produce(leader.host, request, self.now_ms, internal_write_refusal=None)
        result = response.topics[0].partitions[0]
        if result.error_code == 0 and 0 <= result.base_offset < end_before:
            self.counts["idempotent retries answered from the log"] += 1
        batch.attempts += 1
        if batch.attempts > 1:
            self.counts["idempotent batches sent again"] += 1
        if waits:
            batch.sent_to = leader.broker_id
            self.produces.append(Produce(leader.broker_id, batch.values, waits[0], batch))
        elif result.error_code == 0:
            self._acknowledge_batch(batch, result.base_offset)
        elif result.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            # Written before, its offsets forgotten (the batch left the broker's dedupe window
            # with deleted records): a success without offsets, as the SDK and Kafka take it.
            self.counts["idempotent batches answered as duplicates"] += 1
            self._acknowledge_batch(batch, None)
        else:
            self.counts[f"idempotent refused: {ErrorCode(result.error_code).name}"] += 1
            if result.error_code in STATE_LOST and batch is self.batches[0]:
                self.sequence_reset_needed = True
        return True

    def _acknowledge_batch(self, batch: IdempotentBatch, base_offset: int | None) -> None:
        """`base_offset` None: acknowledged without offsets (a duplicate)."""
        batch.acknowledged = True
        batch.sent_to = None
        if base_offset is not None:
            self._acknowledge(batch.values, base_offset)
        while self.batches and self.batches[0].acknowledged:
            self.batches.pop(0)

    def _settle(self) -> None:
        """Answer the acks=all produces whose wait is over, as await_replication does."""
        still = []
        for pending in self.produces:
            if not settled(pending.wait):
                still.append(pending)
            elif pending.wait.result.error_code == 0:
                if pending.batch is None:
                    self._acknowledge(pending.values, pending.wait.result.base_offset)
                else:
                    self._acknowledge_batch(pending.batch, pending.wait.result.base_offset)
            else:
                self.counts["produce failed after append"] += 1
                if pending.batch is not None:
                    pending.batch.sent_to = None  # sent again, in order
        self.produces = still

    def _acknowledge(self, values: list[bytes], base_offset: int) -> None:
        for index, value in enumerate(values):
            self.acked[base_offset + index] = value
        self.counts["records acknowledged"] += len(values)
