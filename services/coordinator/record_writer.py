"""The writes of one owned partition of `__consumer_offsets`: fencing identity, order, group commit.

Theory of operation (DESIGN §5, §6). A coordinator that owns a partition of `__consumer_offsets`
writes it as an idempotent producer whose identity came with the assignment: the partition's
producer id, and the assignment epoch as the producer epoch. A new owner's epoch is higher, and its
first write (the writer-epoch record) makes every broker refuse the old owner's writes with
INVALID_PRODUCER_EPOCH: a replaced owner never writes again, even if it has not noticed yet. (A
new producer id, once the epochs run out, starts again at 0; the new owner then fences the retired
id first, with a writer of its own at PRODUCER_EPOCH_MAX: coordinator_partition.py.)

Writes are serialized, one batch in flight at a time, so sequences stay simple: a retry resends the
same batch with the same base sequence, and the broker answers a duplicate with its original
offsets. Writes that arrive while a batch is in flight are queued and leave together in the next
batch (group commit: one acks=all round trip for many heartbeats).

An answer is given only once every write queued before it is acknowledged, even an answer that
wrote nothing itself: it may show state that an earlier, still unacknowledged write produced
(Kafka's coordinator does the same). So an empty write completes with the last write before it.

A retriable failure resends the same batch. A batch the broker refuses as too large
(MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE: the topic's max.message.bytes is below what the writer
merged) wrote nothing and used no sequence: when it merged several writes, they are sent again one
write per batch (`split_in_flight`), so writes that fit are never failed for a neighbour's size.
A single write refused so is the fault of the request that made it (`refused_token`). Any other
failure (fenced, the producer's state lost on the broker, a write refused) fails the batch in
flight and everything queued behind it, and the writer stays failed: the coordinator drops the
partition's state, and reloads it from the log if it still owns the partition. Pure: no I/O; the
adapter sends what `next_batch` hands it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from opentelemetry.trace import SpanContext

from samsa.common import limits
from samsa.common.errors import ErrorCode

Token = TypeVar("Token")

KeyValue = tuple[bytes, bytes | None]

# Kafka's producer epoch is an int16; so is the assignment epoch that serves as one here (the
# controller rotates the partition's producer id before it gets there).
PRODUCER_EPOCH_MAX = limits.producer_epoch_max
# Sequences wrap at int32, as in Kafka.
SEQUENCE_MODULUS = 2**31


@dataclass(frozen=True)
class BatchToSend:
    """One batch for the adapter to encode and produce with acks=all."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    keys: list[bytes]
    values: list[bytes | None]
    # The sampled span the batch's first traced write was queued in (the adapter sends the
    # batch inside it, so the broker's produce span joins that caller's trace); None: untraced.
    trace_parent: SpanContext | None = None


@dataclass
class _Write(Generic[Token]):
    records: list[KeyValue]
    tokens: list[Token] = field(default_factory=list)
    trace_parent: SpanContext | None = None


@dataclass(frozen=True)
class Completed(Generic[Token]):
    """A write that is now durable: its first record landed at `offset` (the offset after the
    last durable record for a write that carried none)."""

    token: Token
    offset: int


class WriterFailedError(Exception):
    """The writer failed for good; the partition must be dropped (and maybe reloaded)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class RecordWriter(Generic[Token]):
    """Queued writes of one partition, and the one batch in flight."""

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        max_batch_records: int,
        max_batch_bytes: int,
        first_sequence: int = 0,
    ) -> None:
        assert producer_id >= 0 and 0 <= producer_epoch <= PRODUCER_EPOCH_MAX
        assert max_batch_records > 0 and max_batch_bytes > 0
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.max_batch_records = max_batch_records
        self.max_batch_bytes = max_batch_bytes
        self.next_sequence = first_sequence
        # The offset after the last durable record this writer wrote (-1: none yet).
        self.end_offset = -1
        self.failure: WriterFailedError | None = None
        self._queue: deque[_Write[Token]] = deque()
        # Writes whose records are in the batch in flight (with the tokens waiting on them).
        self._in_flight: list[_Write[Token]] = []
        self._in_flight_batch: BatchToSend | None = None
        # How many writes at the queue's head go one per batch (a refused batch's, split).
        self._alone = 0

    @property
    def idle(self) -> bool:
        return not self._in_flight and not self._queue

    def append(
        self, records: list[KeyValue], token: Token, trace_parent: SpanContext | None = None
    ) -> list[Completed[Token]]:
        """Queue `records` (possibly none) for `token`, written while `trace_parent` (a sampled
        span's context) was current if given. Returns the completions due at once: an empty
        write behind nothing completes immediately."""
        if self.failure is not None:
            raise self.failure
        if records:
            self._queue.append(_Write(list(records), [token], trace_parent))
            return []
        waiting = self._queue or self._in_flight
        if not waiting:
            return [Completed(token, max(self.end_offset, 0))]
        waiting[-1].tokens.append(token)
        return []

    def next_batch(self) -> BatchToSend | None:
        """The batch to send now: the one to resend after a retriable failure, or the queued
        writes that fit, or None (a batch is in flight, nothing is queued, or failed)."""
        if self.failure is not None:
            return None
        if self._in_flight:
            return self._in_flight_batch
        if not self._queue:
            return None
        taken: list[_Write[Token]] = []
        count = size = 0
        while self._queue:
            write = self._queue[0]
            write_size = sum(len(k) + len(v or b"") for k, v in write.records)
            if taken and self._alone:
                break
            if taken and (
                count + len(write.records) > self.max_batch_records
                or size + write_size > self.max_batch_bytes
            ):
                break
            taken.append(self._queue.popleft())
            count += len(write.records)
            size += write_size
        self._alone = max(self._alone - 1, 0)
        self._in_flight = taken
        records = [record for write in taken for record in write.records]
        self._in_flight_batch = BatchToSend(
            self.producer_id,
            self.producer_epoch,
            self.next_sequence,
            [key for key, _ in records],
            [value for _, value in records],
            next((w.trace_parent for w in taken if w.trace_parent is not None), None),
        )
        return self._in_flight_batch

    def on_success(self, base_offset: int) -> list[Completed[Token]]:
        """The batch in flight is durable at `base_offset`."""
        assert self._in_flight_batch is not None, "no batch in flight"
        batch = self._in_flight_batch
        completed: list[Completed[Token]] = []
        offset = base_offset
        for write in self._in_flight:
            completed.extend(Completed(token, offset) for token in write.tokens)
            offset += len(write.records)
        self.next_sequence = (batch.base_sequence + len(batch.keys)) % SEQUENCE_MODULUS
        self.end_offset = offset
        self._in_flight = []
        self._in_flight_batch = None
        return completed

    def split_in_flight(self) -> bool:
        """The broker refused the batch in flight as too large, having written none of it (its
        sequence stays unused). When it merged several writes, they go back to the head of the
        queue, to be sent one write per batch, in order; True. False for a batch of one write,
        which cannot be sent smaller (see `refused_token`)."""
        assert self._in_flight_batch is not None, "no batch in flight"
        if len(self._in_flight) < 2:
            return False
        self._queue.extendleft(reversed(self._in_flight))
        self._alone = len(self._in_flight)
        self._in_flight = []
        self._in_flight_batch = None
        return True

    def refused_token(self) -> Token:
        """The token of the request whose one write is the batch in flight (not the tokens of
        the empty writes that only wait behind it)."""
        assert len(self._in_flight) == 1, "one write in flight"
        return self._in_flight[0].tokens[0]

    def on_fatal(self, code: ErrorCode, message: str) -> list[Token]:
        """The batch in flight failed for good: every waiting token fails, and so does the
        writer (every later append raises)."""
        self.failure = WriterFailedError(code, message)
        tokens = [token for write in (*self._in_flight, *self._queue) for token in write.tokens]
        self._in_flight = []
        self._in_flight_batch = None
        self._queue.clear()
        return tokens
