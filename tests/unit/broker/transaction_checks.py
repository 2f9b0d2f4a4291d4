"""The read_committed reader of the transaction simulation (transaction_sim.py), and the
safety checks transactions add to the replication simulation's (replication_checks.py).

A reader consumes read_committed from the leader (`PartitionReader`, and the SDK's own
`decode_records` with the answer's aborted transactions), and `check` adds to the replication
invariants:
- every replica's last stable offset lies within [log start, high watermark];
- a read_committed reader sees a transactional record only once its transaction is decided
  commit, never one of an aborted or open transaction, never one at or above the answer's last
  stable offset, and never the same record at two offsets.
After healing, the caller checks that no transaction hangs (LSO = HW = log end everywhere), every
replica indexed the same aborted transactions, and a read_committed read of the whole log is
exactly the log without markers and without the aborted transactions' records, with each
committed transaction's records once each, in order.

Like `ReplicationChecks`, they are methods of the simulation (which inherits them) and read its
state: the coordinator's decision of each transaction, where the reader is, and what it read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.client.consumer_records import ConsumerRecord, decode_records
from samsa.common.errors import ErrorCode
from samsa.common.fetch_session_client import FetchParts, FetchPosition, fetch_request
from samsa.common.record.batch_decoding import decode_batches
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.v1 import broker_pb2, records_pb2
from tests.unit.broker.replication_checks import ReplicationChecks, SafetyViolation
from tests.unit.broker.replication_cluster import KEY, TOPIC

if TYPE_CHECKING:
    from tests.unit.broker.transaction_sim import Transaction

MARKER_VALUE_PREFIX = b"\x00\x00"  # a control record's value starts with its version, 0


def transaction_of(value: bytes | None) -> int | None:
    """The transaction number of a transactional record's value b"t<txn>.<i>", else None."""
    if not value or not value.startswith(b"t"):
        return None
    return int(value[1:].split(b".")[0])


class TransactionChecks(ReplicationChecks):
    """The reader's step "read_committed", and the invariants: `check()` after every step, then
    `cleanable` and `stored_records` for the checks after healing."""

    # What the checks read, set by the simulation (transaction_sim.py).
    transactions: list[Transaction]
    reader_position: int
    reader_seen: dict[bytes, int]

    def _step_read_committed(self) -> bool:
        leader = self.brokers.get(self.state().leader)
        if leader is None or leader.host is None:
            return False
        records, answer = self.read_committed(leader.broker_id, self.reader_position)
        if answer is None:
            return False
        for record in records:
            self._check_read(record, answer.last_stable_offset)
        if answer.error_code == 0 and answer.next_fetch_offset > self.reader_position:
            self.reader_position = answer.next_fetch_offset
        elif answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            # Deleted under it (DeleteRecords, retention): auto.offset.reset=earliest.
            self.reader_position = max(self.reader_position, answer.log_start_offset)
        self.counts["records read committed"] += len(records)
        return True

    def read_committed(
        self, broker_id: int, offset: int
    ) -> tuple[list[ConsumerRecord], broker_pb2.FetchResponse.PartitionResponse | None]:
        """A consumer's read_committed fetch from `offset` at `broker_id`, decoded as the SDK
        decodes it: (records the application sees, the partition's answer)."""
        host = self.brokers[broker_id].host
        assert host is not None
        request = fetch_request(
            FetchParts(
                session_id=0,
                session_epoch=-1,
                full=True,
                partitions={KEY: FetchPosition(offset, -1, -1, 1 << 20)},
                forgotten=(),
            ),
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=records_pb2.ISOLATION_LEVEL_READ_COMMITTED,
        )
        answer = broker_pb2.FetchResponse.PartitionResponse(partition=0)
        reader = PartitionReader(host, request, self.now_ms)
        reader.read(TOPIC, request.topics[0].partitions[0], answer)
        if answer.error_code:
            self.counts[f"reads refused: {ErrorCode(answer.error_code).name}"] += 1
            return [], answer
        data = reader.records.get(KEY, b"")
        aborted = [(t.producer_id, t.first_offset) for t in answer.aborted_transactions]
        records, _, corrupt = decode_records(KEY, data, offset, aborted)
        assert corrupt is None
        return records, answer

    def _check_read(self, record: ConsumerRecord, last_stable_offset: int) -> None:
        if record.offset >= last_stable_offset:
            raise SafetyViolation(
                f"read_committed returned offset {record.offset} at or above the last stable "
                f"offset {last_stable_offset}"
            )
        number = transaction_of(record.value)
        if number is None:
            return
        assert record.value is not None
        decision = self.transactions[number].committed
        if decision is not True:
            state = "open" if decision is None else "aborted"
            raise SafetyViolation(
                f"read_committed returned {record.value!r} at {record.offset}, a record of "
                f"transaction {number}, which is {state}"
            )
        seen = self.reader_seen.setdefault(record.value, record.offset)
        if seen != record.offset:
            raise SafetyViolation(
                f"read_committed returned {record.value!r} at {record.offset} and at {seen}"
            )

    def check(self) -> None:
        super().check()
        for broker in self._live():
            hosted = broker.hosted()
            if hosted is None:
                continue
            stable = hosted.log.last_stable_offset(hosted.high_watermark)
            if not hosted.log.log_start_offset <= stable <= hosted.high_watermark:
                raise SafetyViolation(
                    f"broker {broker.broker_id}: last stable offset {stable} outside "
                    f"[{hosted.log.log_start_offset}, {hosted.high_watermark}]"
                )

    def cleanable(self, value: bytes) -> bool:
        """An aborted transaction's record (compaction removes it, as Kafka's cleaner does) or a
        marker (a COMMIT marker goes once its transaction is empty: what a reader and a replay
        see then is checked by the read_committed and hanging-transaction checks)."""
        if value.startswith(MARKER_VALUE_PREFIX):
            return True
        number = transaction_of(value)
        return number is not None and self.transactions[number].committed is False

    def stored_records(self, broker_id: int) -> list[tuple[int, bytes | None, bool]]:
        """(offset, value, is a marker) of every record in a replica's log."""
        hosted = self.brokers[broker_id].hosted()
        assert hosted is not None
        log = hosted.log
        out: list[tuple[int, bytes | None, bool]] = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            read = log.read(offset, 1 << 20)
            for batch in decode_batches(read.records):
                control = batch.header.is_control
                out.extend((record.offset, record.value, control) for record in batch)
            offset = read.next_offset
        return out
