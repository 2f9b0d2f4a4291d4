"""The replication simulation (replication_sim.py) with a transactional producer, its
coordinator's two phases, and read_committed readers: transactions under leader changes,
follower truncation, kills and restarts, over the services' own code.

The producer (transactional id "t", producer id TXN_PRODUCER_ID) runs one transaction at a time,
each at the epoch the coordinator handed it, sequences from 0. Its batches (values b"t<txn>.<i>")
are checked the way txn_verification.py checks them: they pass when the leader's log already has
the transaction open at that epoch, and otherwise only while the coordinator's transaction at
that epoch is undecided (the coordinator adds the partition, KIP-890 part 2). A failed batch is
sent again in order. The producer commits once every batch is acknowledged, or aborts at any
time; a new instance of the producer may fence it (InitProducerId), which aborts its open
transaction. The coordinator then bumps the epoch and writes the marker to whoever leads
(`write_txn_markers`, the broker's own code) until one is acknowledged; only then may the next
transaction begin. Any batch ever sent may also arrive again late, from a zombie or a delayed
retry (`_step_late`): it must never land in a later transaction.

A reader consumes read_committed from the leader; it and the invariants transactions add to the
replication checks are in transaction_checks.py, which `TransactionSimulation` inherits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.requests.produce import ReplicationWait, produce
from samsa.services.broker.requests.produce_wait import settled
from samsa.services.broker.requests.txn_markers import write_txn_markers
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_checks import compaction_key
from tests.unit.broker.replication_cluster import KEY, TOPIC
from tests.unit.broker.replication_producers import IN_FLIGHT_MAX, IdempotentBatch
from tests.unit.broker.replication_sim import Simulation
from tests.unit.broker.transaction_checks import TransactionChecks

TXN_PRODUCER_ID = 9
TRANSACTIONAL_ID = "t"
BATCHES_PER_TRANSACTION_MAX = 6
COMMIT_SHARE = 0.8  # the share of ends that commit, once every batch is acknowledged
LATE_MARKER_SHARE = 0.3  # the share of late arrivals that are markers, not batches
ABORT_UNFLUSHED_SHARE = 0.05  # the share of ends that abort with batches not yet acknowledged
TRANSACTION_STEP_WEIGHTS: dict[str, float] = {
    "txn_send": 12,
    "txn_end": 4,
    "txn_marker": 6,
    "late": 1.5,
    "fence": 0.3,
    "read_committed": 4,
}
# Retriable answers to a transactional batch: the producer sends it again, in order.
RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


@dataclass
class Transaction:
    number: int
    epoch: int  # the epoch its batches carry
    batches: list[IdempotentBatch] = field(default_factory=list)
    next_sequence: int = 0
    added: bool = False  # the coordinator added the partition (a batch was verified)
    committed: bool | None = None  # the coordinator's decision; None: still open
    marker_waiting_at: int | None = None  # the broker its marker waits to be replicated on
    complete: bool = False

    @property
    def marker_epoch(self) -> int:
        return self.epoch + 1  # the coordinator bumps the epoch at every end (KIP-890)


@dataclass
class TxnProduce:
    broker_id: int
    wait: ReplicationWait
    transaction: Transaction
    batch: IdempotentBatch | None  # None: the transaction's marker


class TransactionSimulation(TransactionChecks, Simulation):
    def __init__(self, root: Path, seed: int, **options: bool) -> None:
        super().__init__(root, seed, **options)
        self.transactions: list[Transaction] = []
        self.epoch = 0  # the epoch the coordinator hands the producer's next transaction
        self.txn_produces: list[TxnProduce] = []
        self.sent: list[tuple[int, int, list[bytes]]] = []  # (epoch, sequence, values) ever sent
        self.reader_position = 0
        self.reader_seen: dict[bytes, int] = {}  # transactional value -> the offset it was read at

    def step_weights(self) -> dict[str, float]:
        return super().step_weights() | TRANSACTION_STEP_WEIGHTS

    def current(self) -> Transaction | None:
        last = self.transactions[-1] if self.transactions else None
        return None if last is None or last.complete else last

    # --- the producer ----------------------------------------------------------------------------

    def _step_txn_send(self) -> bool:
        transaction = self.current()
        if transaction is None:
            transaction = Transaction(len(self.transactions), self.epoch)
            self.transactions.append(transaction)
        if transaction.committed is not None:
            return False
        unacknowledged = [b for b in transaction.batches if not b.acknowledged]
        batch = next((b for b in unacknowledged if b.sent_to is None), None)
        if batch is None:
            full = len(transaction.batches) >= BATCHES_PER_TRANSACTION_MAX
            if full or len(unacknowledged) >= IN_FLIGHT_MAX:
                return False
            count = self.rng.randint(1, 3)
            first = transaction.next_sequence
            values = [b"t%d.%d" % (transaction.number, first + i) for i in range(count)]
            batch = IdempotentBatch(first, values)
            transaction.next_sequence += count
            transaction.batches.append(batch)
        elif batch is not unacknowledged[0] and unacknowledged[0].sent_to is None:
            return False  # in order: the first one not acknowledged goes first
        self.sent.append((transaction.epoch, batch.sequence, batch.values))
        result, wait, leader_id = self._send_transactional(
            transaction.epoch, batch.sequence, batch.values
        )
        if result is None:
            return False
        if wait is not None:
            batch.sent_to = leader_id
            self.txn_produces.append(TxnProduce(leader_id, wait, transaction, batch))
        elif result.error_code == 0:
            self._acknowledge_txn_batch(batch, result.base_offset)
        else:
            self._refused(transaction, result.error_code)
        return True

    def _send_transactional(
        self, epoch: int, sequence: int, values: list[bytes]
    ) -> tuple[broker_pb2.ProduceResponse.PartitionResponse | None, ReplicationWait | None, int]:
        """Send one transactional batch to the controller's leader, checked as the broker's
        txn_verification does: (its result, its replication wait, the leader), or None results
        when there is no live leader."""
        leader = self.brokers.get(self.state().leader)
        hosted = None if leader is None else leader.hosted()
        if leader is None or leader.host is None or hosted is None:
            return None, None, -1
        verified, refused = self._verify(hosted, epoch)
        records = build_batch(
            values,
            keys=[compaction_key(value) for value in values] if self.compaction else None,
            producer_id=TXN_PRODUCER_ID,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        )
        request = broker_pb2.ProduceRequest(
            acks=-1, timeout_ms=30_000, transactional_id=TRANSACTIONAL_ID
        )
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=records)
        response, waits = produce(
            leader.host,
            request,
            self.now_ms,
            internal_write_refusal=None,
            transactional=(verified, refused),
        )
        return response.topics[0].partitions[0], (waits[0] if waits else None), leader.broker_id

    def _verify(
        self, hosted: HostedPartition, epoch: int
    ) -> tuple[set[tuple[str, int]], dict[tuple[str, int], tuple[ErrorCode, str]]]:
        """txn_verification.py's decision, with the coordinator's answer from this model."""
        if not hosted.is_leader:
            return set(), {}  # produce() answers the leadership error
        if hosted.log.has_open_transaction(TXN_PRODUCER_ID, epoch):
            return {KEY}, {}
        transaction = self.current()
        if transaction is not None and transaction.committed is None and transaction.epoch == epoch:
            transaction.added = True
            return {KEY}, {}
        self.counts["transactional batches refused by the coordinator"] += 1
        return set(), {KEY: (ErrorCode.INVALID_TXN_STATE, "not in an open transaction")}

    def _refused(self, transaction: Transaction, code: int) -> None:
        self.counts[f"transactional refused: {ErrorCode(code).name}"] += 1
        if code not in RETRIABLE and transaction.committed is None:
            self._decide(transaction, committed=False)  # the producer aborts

    def _acknowledge_txn_batch(self, batch: IdempotentBatch, base_offset: int) -> None:
        batch.acknowledged = True
        batch.sent_to = None
        self._acknowledge(batch.values, base_offset)

    def _step_txn_end(self) -> bool:
        transaction = self.current()
        if transaction is None or transaction.committed is not None or not transaction.batches:
            return False
        if all(b.acknowledged for b in transaction.batches):
            self._decide(transaction, committed=self.rng.random() < COMMIT_SHARE)
            return True
        if self.rng.random() < ABORT_UNFLUSHED_SHARE:
            self._decide(transaction, committed=False)
            return True
        return False  # commit_transaction() flushes first: it waits for the batches

    def _step_fence(self) -> bool:
        """A new instance of the producer calls InitProducerId: the coordinator aborts the open
        transaction; the old instance's batches in flight are a zombie's (see `_step_late`)."""
        transaction = self.current()
        if transaction is None or transaction.committed is not None:
            return False
        self.txn_produces = [p for p in self.txn_produces if p.transaction is not transaction]
        for batch in transaction.batches:
            batch.sent_to = None
        self._decide(transaction, committed=False)
        self.epoch += 1  # the new instance's epoch is above the abort marker's
        self.counts["producers fenced"] += 1
        return True

    def _step_late(self) -> bool:
        """Something sent before arrives again: a batch (a zombie's, or a retry the network
        delayed), or an ended transaction's marker (a coordinator's retry, or one that lost
        its partition and did not know it). Neither may touch a later transaction."""
        ended = [t for t in self.transactions if t.complete and t.added]
        if ended and self.rng.random() < LATE_MARKER_SHARE:
            transaction = self.rng.choice(ended)
            result = self._write_marker(transaction, late=True)
            if result is not None:
                outcome = "refused" if result.error_code else "answered"
                self.counts[f"late markers {outcome}"] += 1
            return result is not None
        if not self.sent:
            return False
        epoch, sequence, values = self.rng.choice(self.sent)
        leader = self.brokers.get(self.state().leader)
        hosted = None if leader is None else leader.hosted()
        end_before = -1 if hosted is None else hosted.log.log_end_offset
        result, _, _ = self._send_transactional(epoch, sequence, values)
        if result is None:
            return False
        if result.error_code:
            self.counts["late batches refused"] += 1
        elif result.base_offset >= end_before:
            self.counts["late batches appended"] += 1  # to their own transaction, still open
        else:
            self.counts["late batches answered from the log"] += 1
        return True

    # --- the coordinator -------------------------------------------------------------------------

    def _decide(self, transaction: Transaction, *, committed: bool) -> None:
        """EndTxn's phase 1: the decision is durable, and the epoch is bumped."""
        transaction.committed = committed
        self.epoch = max(self.epoch, transaction.marker_epoch)
        self.counts["transactions committed" if committed else "transactions aborted"] += 1
        if not transaction.added:
            transaction.complete = True  # no partition joined it: no marker to write

    def _step_txn_marker(self) -> bool:
        """Phase 2: the marker, written to whoever leads until one is acknowledged."""
        transaction = self.current()
        if transaction is None or transaction.committed is None:
            return False
        if transaction.marker_waiting_at is not None:
            return False
        result = self._write_marker(transaction, late=False)
        if result is not None and result.error_code:
            self.counts[f"markers refused: {ErrorCode(result.error_code).name}"] += 1
        return result is not None

    def _write_marker(
        self, transaction: Transaction, *, late: bool
    ) -> broker_pb2.WriteTxnMarkersResponse.PartitionResult | None:
        """WriteTxnMarkers of `transaction`'s marker at the controller's leader (None: no live
        leader). A late one's replication is not waited for."""
        leader = self.brokers.get(self.state().leader)
        if leader is None or leader.host is None:
            return None
        request = broker_pb2.WriteTxnMarkersRequest(timeout_ms=30_000)
        marker = request.markers.add(
            producer_id=TXN_PRODUCER_ID,
            producer_epoch=transaction.marker_epoch,
            committed=bool(transaction.committed),
            coordinator_epoch=0,
        )
        marker.topics.add(name=TOPIC, partitions=[0])
        response, waits = write_txn_markers(leader.host, request, self.now_ms)
        result = response.markers[0].topics[0].partitions[0]
        if late:
            return result
        if waits:
            transaction.marker_waiting_at = leader.broker_id
            self.txn_produces.append(TxnProduce(leader.broker_id, waits[0], transaction, None))
        elif result.error_code == 0:
            self._marker_written(transaction)
        return result

    def _marker_written(self, transaction: Transaction) -> None:
        transaction.complete = True
        self.counts["markers acknowledged"] += 1

    # --- acknowledgements ------------------------------------------------------------------------

    def _settle(self) -> None:
        super()._settle()
        still = []
        for pending in self.txn_produces:
            if not settled(pending.wait):
                still.append(pending)
                continue
            transaction, batch = pending.transaction, pending.batch
            ok = pending.wait.result.error_code == 0
            if batch is None:
                transaction.marker_waiting_at = None
                if ok:
                    self._marker_written(transaction)
            elif ok:
                self._acknowledge_txn_batch(batch, pending.wait.result.base_offset)
            else:
                batch.sent_to = None  # sent again, in order
        self.txn_produces = still

    def _forget_produces(self, broker_id: int) -> None:
        super()._forget_produces(broker_id)
        for pending in self.txn_produces:
            if pending.broker_id == broker_id:
                if pending.batch is None:
                    pending.transaction.marker_waiting_at = None
                else:
                    pending.batch.sent_to = None
        self.txn_produces = [p for p in self.txn_produces if p.broker_id != broker_id]

    # --- the end ---------------------------------------------------------------------------------

    def heal(self, rounds: int = 300) -> None:
        """Heal as the base does, a round at a time, and end the open transaction meanwhile
        (commit once every batch is acknowledged; its marker written like any other)."""
        for _ in range(rounds):
            super().heal(rounds=1)
            transaction = self.current()
            if transaction is not None and transaction.committed is not None:
                self._step_txn_marker()
            elif transaction is not None:
                unacknowledged = [b for b in transaction.batches if not b.acknowledged]
                if not unacknowledged:
                    self._decide(transaction, committed=bool(transaction.batches))
                elif any(b.sent_to is None for b in unacknowledged):
                    self._step_txn_send()
            self._settle()
            self.check()
            if self.settled():
                return

    def settled(self) -> bool:
        return super().settled() and self.current() is None and not self.txn_produces
