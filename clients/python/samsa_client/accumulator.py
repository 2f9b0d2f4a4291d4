"""The producer's record accumulator: records in, ready batches out, outcomes back — a pure core.

Theory of operation (Kafka's `RecordAccumulator` and aiokafka's, minus the futures and the clock).
The driver (producer_driver.py) owns the network, the time and the futures. It feeds this core
with calls and reads plain data back:

    append(...)        -> AppendResult(batch_id, record_index, ...)  a record; its future's handle
                          or an AppendRefusal (BUFFER_FULL, NEW_BATCH_NEEDED), nothing changed
    append_many(...)   -> ManyAppended(next_index, segments, refusal, wake)  a column of records
                          for one partition, checked first (check_records); stops where refused
    ready(now, leaders)-> ReadyResult(ready_nodes, next_check_ms, unknown_leader_topics,
                          producer_id_required)
    drain(node, max_request_bytes, now) -> [ProducerBatch]    closed, sequenced, in flight
    encode(batches)                                            their bytes, for the request
    on_batch_acked(...) / on_batch_failed(...) / expire(now) / abort_all(...) -> [Completed]

A `Completed` settles every record of one batch: record `record_index` of batch `batch_id` got
offset `base_offset + record_index` (unknown when NO_OFFSET: acks=0, or a batch proven written
whose own answer was lost, producer_sequences.py), or the batch's error. No future, callback or
task lives in here (STYLE §5), so every path is tested with numbers for time. One turn of the
driver: `ready()`; if `producer_id_required`, a new epoch, then `set_producer_id()`; `drain()`
each ready node into one Produce request and `encode()` it; feed answers back; `expire(now)`;
sleep until `next_check_ms`, an append that filled a batch, or an answer.

The jobs live in their own modules: the batch and its state table (producer_batch.py), batching,
memory, linger and flushes (record_batcher.py), sequencing and producer-id resets
(producer_sequences.py), retries and the delivery timeout (retry_policy.py), outcomes back
(batch_completion.py). This module holds the rules that join them:

Sending. A batch is *sendable* when it is not backing off and one of: linger lets it go (closed,
full, or `linger.ms` old), a flush is in progress, or an append is waiting for buffer memory.
`ready()` reports the leaders of partitions with a sendable head batch; `drain(node)` then takes
from every partition that node leads (sendable or not, as Kafka does: the request is going
anyway) in rotating order for fairness, several batches per partition, until `max_request_bytes`
(estimated sizes; the first batch always goes) or `limits.request_partitions_max` partitions (a
broker refuses a Produce naming more, whatever its bytes; the next drain starts with the first
partition left out). Taking several batches of one partition per
request is a deliberate difference from Kafka: an RPC costs ~0.5 ms here (DESIGN §12), so
requests should carry more than one 16 KiB batch.

Ordering per partition, under retries:
- the queue is kept sorted by batch id (creation order), and a failed batch goes back into it at
  its place, i.e. ahead of every batch created after it;
- at most `max.in.flight.requests.per.connection` batches of one partition are in flight (at most
  5 with idempotence: the broker remembers the last 5 batches per producer and partition);
- a retry is sent only when nothing of its partition is in flight, and nothing newer until its
  outcome: retries go one at a time, in order, alone. A broker refuses a request mixing a
  duplicate batch with new ones; and a newer batch in another request could overtake the retry,
  be written, and leave it to be written again, after it, by a leader that lost our producer
  state (the long seeded simulation found that case);
- a batch the broker found too large goes on in pieces (batch_completion.py), each alone, as a
  retry does;
- no new batch goes while the partition's sequence is unresolved: a batch failed for good after
  it went out, and the sequenced batches after it have not yet said whether it was written
  (producer_sequences.py).

Delivery timeout (retry_policy.py). `expire(now)` fails queued batches past their deadline, and a
failure reported after it is final. In-flight batches are not expired here: the driver gives each
request the earlier of request.timeout.ms and its oldest batch's delivery deadline
(produce_sender.py), so an attempt sent just before the deadline is reported failed at it.

Time is `now_ms` (any monotonic millisecond clock, never decreasing between calls); randomness
(retry jitter) comes from the `random.Random` passed in. Asserts check invariants per batch, never
per record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from samsa.client.batch_completion import BatchCompletion
from samsa.client.config import ProducerConfig
from samsa.client.config_values import IDEMPOTENCE_IN_FLIGHT_MAX
from samsa.client.partitioner import UNAVAILABLE
from samsa.client.producer_batch import (
    BatchState,
    PartitionState,
    ProducerBatch,
    TopicPartition,
    transition,
)
from samsa.client.producer_sequences import ProducerSequences
from samsa.client.record_batcher import RecordBatcher
from samsa.client.retry_policy import RandomSource, RetryBackoff, RetryPolicy
from samsa.common import limits
from samsa.common.record import header


class ReadyResult(NamedTuple):
    # Leaders with at least one sendable batch: call drain() for each.
    ready_nodes: frozenset[int]
    # The earliest time something becomes sendable or expires (linger, backoff, delivery
    # timeout); None when only an outcome or an append can change anything.
    next_check_ms: int | None
    # Topics with batches but no known leader for some partition: refresh metadata.
    unknown_leader_topics: frozenset[str]
    # Idempotence needs a (new) producer id and epoch: a new epoch, then set_producer_id().
    producer_id_required: bool


class RecordAccumulator:
    """Batches records per partition and tracks them until each batch has an outcome."""

    def __init__(self, config: ProducerConfig, random_source: RandomSource) -> None:
        self._retry = RetryPolicy(
            config.retries,
            config.delivery_timeout_ms,
            RetryBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms, random_source),
        )
        self._idempotent = config.enable_idempotence
        self._transactional = config.transactional_id is not None
        self._compression = (
            header.COMPRESSION_ZSTD
            if config.compression_type == "zstd"
            else header.COMPRESSION_NONE
        )
        in_flight_max = config.max_in_flight_requests_per_connection
        if self._idempotent:
            in_flight_max = min(in_flight_max, IDEMPOTENCE_IN_FLIGHT_MAX)
        self._partition_in_flight_max = in_flight_max
        self._linger_ms = config.linger_ms
        self._adaptive_partitioning = config.partitioner_adaptive_partitioning_enable
        self._availability_timeout_ms = config.partitioner_availability_timeout_ms
        self._batcher = RecordBatcher(config)
        self._sequences = ProducerSequences(self._idempotent, self._transactional)
        # The hottest call goes straight to the batcher: no extra Python frame per record. So do
        # the column calls of send_many (check_records outside the driver's lock, then
        # append_many per partition under it).
        self.append = self._batcher.append
        self.check_records = self._batcher.check_records
        self.append_many = self._batcher.append_many
        self.begin_flush = self._batcher.begin_flush
        self.is_flush_complete = self._batcher.is_flush_complete
        self.flush_done = self._batcher.flush_done
        self._in_flight: dict[int, ProducerBatch] = {}
        # From the last ready(): each ready node -> its partitions with queued batches.
        self._node_partitions: dict[int, list[TopicPartition]] = {}
        self._drain_starts: dict[int, int] = {}
        # Each node's first partition its last drain left out for the request limit: by key, as
        # ready() lists a node's partitions anew every turn (emptied ones leave the list).
        self._drain_resumes: dict[int, TopicPartition] = {}
        self.batch_retries = 0  # batches sent again after a failed attempt (Kafka's record-retry)
        # Outcomes back (batch_completion.py), on the same tables; bound, as append is.
        completion = BatchCompletion(
            self._batcher, self._sequences, self._retry, self._in_flight, config.max_request_size
        )
        self._completion = completion
        self.on_batch_acked = completion.on_batch_acked
        self.on_batch_failed = completion.on_batch_failed
        self.expire = completion.expire
        self.abort_all = completion.abort_all
        self.abort_queued = completion.abort_queued

    # --- what the driver reads --------------------------------------------------------------------

    @property
    def buffered_bytes(self) -> int:
        """Estimated bytes of every unfinished batch (bounded by buffer.memory)."""
        return self._batcher.buffered_bytes

    @property
    def batch_splits(self) -> int:
        """Too-large answers that split a batch into smaller pieces (Kafka's batch-split)."""
        return self._completion.batch_splits

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def has_unfinished(self) -> bool:
        return bool(self._batcher.unfinished)

    def unfinished_topics(self) -> set[str]:
        """The topics of every unfinished batch, queued or in flight (under the driver's lock)."""
        return {batch.topic for batch in self._batcher.unfinished.values()}

    def has_queued(self) -> bool:
        """Batches wait to be sent (not in flight): an outcome may let them out."""
        return bool(self._batcher.queued)

    def partition_loads(self, topic: str, partition_count: int, now_ms: int) -> list[int]:
        """Per partition of `topic`, the load the sticky partitioner weighs (partitioner.py,
        KIP-794): its batches not yet sent, the open one included (0 with adaptive partitioning
        off), or UNAVAILABLE when partitioner.availability.timeout.ms is set and a batch of it
        still unsent or unanswered is that much older than its linger: its leader has taken or
        acknowledged nothing since (a partition whose batches are all in flight to a stopped
        broker has an empty queue, so its in-flight batches count too)."""
        adaptive = self._adaptive_partitioning
        stalled_before_ms = (
            now_ms - self._linger_ms - self._availability_timeout_ms
            if self._availability_timeout_ms > 0
            else None
        )
        loads = [0] * partition_count
        # Only partitions with batches waiting are in `queued` (a few, even for a topic of
        # thousands of partitions): one pass over them, not over the topic.
        for (queued_topic, partition), state in self._batcher.queued.items():
            if queued_topic != topic or partition >= partition_count:
                continue
            if stalled_before_ms is not None and state.queue[0].created_ms < stalled_before_ms:
                loads[partition] = UNAVAILABLE
            elif adaptive:
                loads[partition] = len(state.queue)
        if stalled_before_ms is not None:
            for batch in self._in_flight.values():
                if (
                    batch.created_ms < stalled_before_ms
                    and batch.topic == topic
                    and batch.partition < partition_count
                ):
                    loads[batch.partition] = UNAVAILABLE
        return loads

    @property
    def producer_identity(self) -> tuple[int, int]:
        """(producer id, producer epoch); NO_PRODUCER_ID and NO_PRODUCER_EPOCH before the first."""
        return self._sequences.producer_id, self._sequences.producer_epoch

    # --- batches out ------------------------------------------------------------------------------

    def ready(self, now_ms: int, leaders: Mapping[TopicPartition, int]) -> ReadyResult:
        """Which nodes have sendable batches, and when to look again. Remembers the ready nodes'
        partitions (per `leaders`) for the drain() calls that follow."""
        ready_nodes: set[int] = set()
        unknown_leader_topics: set[str] = set()
        next_check_ms: int | None = None
        node_partitions: dict[int, list[TopicPartition]] = {}
        self._sequences.resolve_sequences()
        sending = self._sequences.sending_allowed()
        everything_sendable = self._batcher.flushes_in_progress > 0 or self._batcher.memory_waiting
        for topic_partition, state in self._batcher.queued.items():
            batch = state.queue[0]
            # The head is the oldest queued batch: its deadline is the partition's earliest.
            next_check_ms = _earliest(next_check_ms, self._retry.deadline_ms(batch))
            leader = leaders.get(topic_partition)
            if leader is None:
                unknown_leader_topics.add(topic_partition[0])
                continue
            node_partitions.setdefault(leader, []).append(topic_partition)
            if not sending or leader in ready_nodes:
                continue
            if batch.retry_at_ms > now_ms:
                next_check_ms = _earliest(next_check_ms, batch.retry_at_ms)
                continue
            if not self._can_send_head(state, batch):
                continue  # waits for an outcome of its partition, not for time
            sendable_at_ms = self._batcher.sendable_at_ms(batch)
            if everything_sendable or now_ms >= sendable_at_ms:
                ready_nodes.add(leader)
            else:
                next_check_ms = _earliest(next_check_ms, sendable_at_ms)
        # drain() serves only the nodes reported ready: a lingering node is not drained early.
        self._node_partitions = {
            node: partitions for node, partitions in node_partitions.items() if node in ready_nodes
        }
        return ReadyResult(
            frozenset(ready_nodes),
            next_check_ms,
            frozenset(unknown_leader_topics),
            self._sequences.reset_required and not self._in_flight,
        )

    def drain(self, node_id: int, max_request_bytes: int, now_ms: int) -> list[ProducerBatch]:
        """Close, sequence and encode the batches to send to `node_id` in one request: from every
        partition it leads (per the last ready(), which must have reported it ready), in rotating
        order, oldest first, until `max_request_bytes` (estimated; the first batch always goes)
        or `limits.request_partitions_max` partitions. They are now in flight. Called again for
        the same node, it fills another request."""
        topic_partitions = self._node_partitions.get(node_id)
        if not topic_partitions or not self._sequences.sending_allowed():
            return []
        count = len(topic_partitions)
        start = self._drain_start(node_id, topic_partitions)
        self._drain_starts[node_id] = start + 1
        drained: list[ProducerBatch] = []
        request_bytes = 0
        partitions_named = 0
        for position in range(count):
            topic_partition = topic_partitions[(start + position) % count]
            state = self._batcher.partitions[topic_partition]
            named = False
            while state.queue:
                batch = state.queue[0]
                if batch.retry_at_ms > now_ms or not self._can_send_head(state, batch):
                    break
                if not named:
                    if partitions_named == limits.request_partitions_max:
                        # A broker refuses the whole request past this: the rest go in the
                        # next one, which starts here.
                        self._drain_resumes[node_id] = topic_partition
                        return drained
                    partitions_named += 1
                    named = True
                if drained and request_bytes + batch.size_bytes > max_request_bytes:
                    return drained
                self._batcher.take_head(topic_partition, state)
                self._start_attempt(state, batch, node_id)
                drained.append(batch)
                request_bytes += batch.size_bytes
        return drained

    def _drain_start(self, node_id: int, topic_partitions: list[TopicPartition]) -> int:
        """Where drain() starts in `topic_partitions`: at the first partition the node's last
        drain left out for the request limit, if it still has batches (so every partition goes
        within a few requests, however many the node leads); else one further along than the
        last drain started (rotating, for fairness)."""
        resume = self._drain_resumes.pop(node_id, None)
        if resume is not None:
            try:
                return topic_partitions.index(resume)
            except ValueError:
                pass  # its batches are gone (expired, or aborted)
        return self._drain_starts.get(node_id, 0) % len(topic_partitions)

    def encode(self, batches: list[ProducerBatch]) -> list[tuple[ProducerBatch, Exception]]:
        """Encode drained batches that need it (never encoded, or re-sequenced since; a retry
        re-sends its bytes). Apart from drain() so that the driver encodes outside its lock: the
        caller's `append` then never waits for an encoding, and zstd and the CRC release the GIL,
        so appends go on meanwhile on a second core (zstd produce of 1 KiB records +17 %). Safe:
        a drained batch takes no appends, and only the driver's loop changes batches in flight.
        Returns the batches whose encoding raised, with the error (left unencoded): in flight
        but never to be sent, the driver fails them (on_batch_failed), or they would wait for
        an answer for ever."""
        partitions = self._batcher.partitions
        failed: list[tuple[ProducerBatch, Exception]] = []
        for batch in batches:
            if batch.encoded is None:
                state = partitions[(batch.topic, batch.partition)]
                try:
                    batch.encoded = batch.encode(  # NO_PRODUCER_ID and epoch without idempotence
                        self._compression,
                        state.producer_id,
                        state.producer_epoch,
                        self._transactional,
                    )
                except Exception as error:
                    failed.append((batch, error))
        return failed

    def _can_send_head(self, state: PartitionState, batch: ProducerBatch) -> bool:
        """Ordering rules: a bounded number in flight per partition, and a retry (or a piece
        of a split batch) goes alone."""
        if len(state.in_flight) >= self._partition_in_flight_max:
            return False
        if state.unresolved_batch_id >= 0 and batch.base_sequence == header.NO_SEQUENCE:
            return False  # nothing new while the sequences before it are unknown (Kafka)
        if batch.attempts or batch.split_records:
            return not state.in_flight  # a retry waits for everything of its partition
        return not (state.in_flight and _goes_alone(state.in_flight[0]))  # nothing overtakes it

    def _start_attempt(self, state: PartitionState, batch: ProducerBatch, node_id: int) -> None:
        transition(batch, BatchState.IN_FLIGHT)
        self._sequences.assign(state, batch)
        batch.attempts += 1
        if batch.attempts > 1:
            self.batch_retries += 1
        batch.node_id = node_id
        assert not state.in_flight or state.in_flight[-1].batch_id < batch.batch_id
        state.in_flight.append(batch)
        self._in_flight[batch.batch_id] = batch

    # --- producer id ------------------------------------------------------------------------------

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A new (producer id, epoch), taken by the partitions that need it (producer_sequences.py).
        Only with nothing in flight: the sequences of in-flight batches belong to the old epoch."""
        assert not self._in_flight, "set_producer_id with batches in flight"
        self._sequences.set_producer_id(
            producer_id, producer_epoch, list(self._batcher.partitions.values())
        )

    # --- consistency ------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Assert every invariant (O(batches)): for tests and debugging, never on a hot path.
        The simulation calls it after every step. The batcher checks the queues' structure."""
        self._batcher.check_invariants()
        partitions = self._batcher.partitions.values()
        for state in partitions:
            assert len(state.in_flight) <= self._partition_in_flight_max
            for batch in state.queue:
                written = self._sequences.known_written(state, batch)
                assert not written, "a written batch would be re-sent"
            if state.unresolved_batch_id >= 0:  # waits for its resolution, or for a reset
                unresolved = self._sequences.unresolved
                assert state.reset_required or any(state is other for other in unresolved)
            if any(_goes_alone(batch) for batch in state.in_flight):
                assert len(state.in_flight) == 1, "a retry in flight with other batches"
            for batch in state.in_flight:
                assert self._in_flight[batch.batch_id] is batch
                assert not self._idempotent or batch.base_sequence != header.NO_SEQUENCE
        assert len(self._in_flight) == sum(len(state.in_flight) for state in partitions)


def _goes_alone(batch: ProducerBatch) -> bool:
    """In flight, nothing else of its partition may be: a retry, or a piece of a split batch."""
    return batch.attempts > 1 or batch.split_records > 0


def _earliest(current_ms: int | None, candidate_ms: int) -> int:
    return candidate_ms if current_ms is None or candidate_ms < current_ms else current_ms
