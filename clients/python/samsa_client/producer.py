"""The Producer: `send()` appends to the record accumulator; a sender thread ships batches.

Theory of operation. The accumulator (accumulator.py, a pure core) decides everything about
batches: which record goes where, when a batch is sendable, retries, ordering, expiry. This
module is its driver (the loop its docstring describes) plus the futures:

- `send()` runs on the caller's thread: partition choice, one accumulator append under a lock,
  and a `RecordFuture` — a small slotted object sharing its batch's outcome, not a
  `concurrent.futures.Future` per record (that costs a lock and a condition each, which at 300k
  records/s is most of the budget). A waiting event is only made when someone waits.
- The sender thread drains ready batches into one Produce request per broker. Several batches of
  one partition travel concatenated in one PartitionData (the broker appends them together, the
  offsets of the second follow the first's). Requests go over one long-lived ProduceStream per
  broker (produce_stream.py: half the round trip of a unary call), so a slow broker does not hold
  up the others; an answer's callback feeds the outcomes back to the accumulator and settles the
  futures.
- Retriable errors (leader moved, broker unreachable, timeouts) go back to the accumulator, which
  retries with backoff within `delivery.timeout.ms`; NOT_LEADER_OR_FOLLOWER and the like also
  mark the metadata stale, so the retry goes to the new leader.

Why threads and sync gRPC rather than asyncio: the user's code calling `send()` is usually not
async, and a `loop.call_soon_threadsafe` per record would cost more than the append itself.

Departure from Kafka (until the idempotence issue adds InitProducerId): `enable.idempotence`
defaults to false here; setting it to true explicitly raises a clear error.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import grpc

from samsa.client.accumulator import (
    NO_OFFSET,
    AppendRefusal,
    Completed,
    ProducerBatch,
    RecordAccumulator,
)
from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config import ProducerConfig
from samsa.client.errors import KafkaError, ProduceError
from samsa.client.partitioner import Partitioner
from samsa.client.produce_stream import ProduceStream
from samsa.common.errors import ErrorCode, InvalidConfigError, is_retriable
from samsa.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger(__name__)

# Errors after which the leader we used is probably not the leader any more.
_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class RecordMetadata(NamedTuple):
    """Where a record was written."""

    topic: str
    partition: int
    offset: int  # -1 with acks=0
    timestamp: int


class _BatchOutcome:
    """The outcome every record of one batch shares; settled once, by the sender."""

    __slots__ = ("base_offset", "callbacks", "done", "error", "event", "log_append_time")

    def __init__(self) -> None:
        self.done = False
        self.base_offset = NO_OFFSET
        self.log_append_time = -1
        self.error: KafkaError | None = None
        self.event: threading.Event | None = None
        self.callbacks: list[Callable[[], None]] | None = None


class RecordFuture:
    """The future of one sent record: `result()` blocks until its batch is acknowledged."""

    __slots__ = ("_index", "_outcome", "_partition", "_timestamp", "_topic")

    def __init__(
        self, outcome: _BatchOutcome, index: int, topic: str, partition: int, timestamp: int
    ) -> None:
        self._outcome = outcome
        self._index = index
        self._topic = topic
        self._partition = partition
        self._timestamp = timestamp

    def done(self) -> bool:
        return self._outcome.done

    def _wait(self, timeout: float | None) -> None:
        outcome = self._outcome
        if outcome.done:
            return
        if outcome.event is None:
            with _EVENT_LOCK:
                if outcome.event is None:
                    outcome.event = threading.Event()
        if outcome.done:
            return
        if not outcome.event.wait(timeout):
            raise TimeoutError(f"the record was not acknowledged within {timeout} s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        outcome = self._outcome
        if outcome.error is not None:
            raise outcome.error
        offset = (
            NO_OFFSET if outcome.base_offset == NO_OFFSET else outcome.base_offset + self._index
        )
        timestamp = outcome.log_append_time if outcome.log_append_time >= 0 else self._timestamp
        return RecordMetadata(self._topic, self._partition, offset, timestamp)

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        self._wait(timeout)
        return self._outcome.error

    def add_done_callback(self, callback: Callable[[RecordFuture], Any]) -> None:
        """Call `callback(self)` once settled (at once if it is), on the sender's thread."""
        outcome = self._outcome
        with _EVENT_LOCK:
            if not outcome.done:
                if outcome.callbacks is None:
                    outcome.callbacks = []
                outcome.callbacks.append(lambda: callback(self))
                return
        callback(self)


_EVENT_LOCK = threading.Lock()


class Producer:
    """Kafka's producer, with Kafka's configuration keys (see config.py)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        settings = dict(config)
        if settings.get("enable.idempotence") in (True, "true", "True"):
            raise InvalidConfigError(
                "enable.idempotence=true needs producer ids (InitProducerId), which this version "
                "of Samsa does not have yet: leave enable.idempotence unset or false"
            )
        settings["enable.idempotence"] = False
        self.config = ProducerConfig.from_dict(settings)
        self._channels = Channels()
        self._metadata = ClusterMetadata(self.config.bootstrap_servers, self._channels)
        self._accumulator = RecordAccumulator(self.config, random.Random())
        self._partitioner = Partitioner(
            random.Random(), ignore_keys=self.config.partitioner_ignore_keys
        )
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)  # completions free memory / end flushes
        self._outcomes: dict[int, _BatchOutcome] = {}
        self._messages: dict[int, str] = {}  # batch id -> the broker's error message
        self._streams: dict[str, ProduceStream] = {}  # by broker endpoint
        self._streams_lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        # With linger.ms=0 the caller's thread drains and sends itself: one thread hand-off less
        # per record (~0.2 ms here), which is what a caller waiting on each send feels.
        self._send_at_once = self.config.linger_ms == 0
        self._sender = threading.Thread(target=self._run_sender, name="samsa-producer", daemon=True)
        self._sender.start()

    # --- the caller's side ----------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordFuture:
        """Queue one record; the future says where it was written (or why it was not)."""
        if self._closed:
            raise ProduceError("the producer is closed", ErrorCode.INVALID_REQUEST)
        now = _now_ms()
        if timestamp is None:
            timestamp = now
        count = self._metadata.partition_counts.get(topic)
        if count is None:
            count = self._metadata.partition_count(topic, self.config.max_block_ms / 1000)
        if partition is None:
            sticky = key is None or self.config.partitioner_ignore_keys
            partition = self._partitioner.partition(topic, key, count)
        else:
            sticky = False
            if not 0 <= partition < count:
                raise ProduceError(
                    f"partition {partition} of {topic!r} does not exist (it has {count})",
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                )
        with self._lock:
            result = self._accumulator.append(
                topic, partition, key, value, headers, timestamp, now, sticky
            )
            if result.__class__ is not tuple and isinstance(result, AppendRefusal):
                result, partition = self._append_refused(
                    result, topic, partition, key, value, headers, timestamp, count
                )
            batch_id = result[0]
            outcome = self._outcomes.get(batch_id)
            if outcome is None:
                outcome = self._outcomes[batch_id] = _BatchOutcome()
        if self._send_at_once:
            self._send_once()  # linger.ms=0: no hand-off to the sender thread on the hot path
        elif result[2] or result[3]:  # a batch filled up, or a new one may need a send timer
            self._wake.set()
        return RecordFuture(outcome, result[1], topic, partition, timestamp)

    def _append_refused(
        self,
        refusal: AppendRefusal,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        timestamp: int,
        count: int,
    ) -> tuple[Any, int]:
        """Under the lock: switch the sticky partition, or wait for buffer memory."""
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while True:
            if refusal is AppendRefusal.NEW_BATCH_NEEDED:
                self._partitioner.on_batch_closed(topic, partition)
                partition = self._partitioner.partition(topic, key, count)
                self._wake.set()
            else:
                self._wake.set()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ProduceError(
                        f"buffer.memory ({self.config.buffer_memory} bytes) stayed full for "
                        f"max.block.ms ({self.config.max_block_ms} ms): the cluster is slower "
                        "than the producer",
                        ErrorCode.REQUEST_TIMED_OUT,
                    )
                self._space.wait(min(remaining, 0.1))
            result = self._accumulator.append(
                topic, partition, key, value, headers, timestamp, _now_ms(), False
            )
            if not isinstance(result, AppendRefusal):
                return result, partition
            refusal = result

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until every record sent so far is settled."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._accumulator.begin_flush()
            try:
                self._wake.set()
                while not self._accumulator.is_flush_complete(target):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"flush did not complete within {timeout} s")
                    self._space.wait(0.1 if remaining is None else min(remaining, 0.1))
            finally:
                self._accumulator.flush_done()

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the sender. Records still unsettled after `timeout` fail."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            self._wake.set()
            self._sender.join(timeout=5)
            with self._lock:
                completed = self._accumulator.abort_all(
                    ErrorCode.REQUEST_TIMED_OUT, "the producer was closed before delivery"
                )
            self._settle(completed)
            for stream in self._streams.values():
                stream.close()
            self._channels.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the sender thread ------------------------------------------------------------------------

    def _run_sender(self) -> None:
        while not self._closed:
            try:
                wait_s = self._send_once()
            except Exception:
                log.exception("producer sender error")
                wait_s = 0.1
            self._wake.wait(wait_s)
            self._wake.clear()

    def _send_once(self) -> float:
        """One turn of the driver loop (sender thread, or the caller with linger.ms=0); returns
        how long to sleep unless woken."""
        if self._metadata.needs_refresh():
            try:
                self._metadata.refresh()
            except KafkaError as error:
                log.warning("metadata refresh failed: %s", error)
        with self._lock:
            now = _now_ms()
            expired = self._accumulator.expire(now)
            ready = self._accumulator.ready(now, self._metadata.leaders)
            requests = {
                node: self._accumulator.drain(node, self.config.max_request_size, now)
                for node in ready.ready_nodes
            }
        if expired:
            self._settle(expired)
        for stream in list(self._streams.values()):
            stream.expire(self.config.request_timeout_ms / 1000)
        if ready.unknown_leader_topics:
            try:
                self._metadata.refresh(ready.unknown_leader_topics)
            except KafkaError as error:
                log.warning("metadata refresh failed: %s", error)
            return 0.05
        for node, batches in requests.items():
            if batches:
                self._send_request(node, batches)
        if ready.next_check_ms is None:
            return 0.5
        return max(0.0, (ready.next_check_ms - _now_ms()) / 1000)

    def _send_request(self, node: int, batches: list[ProducerBatch]) -> None:
        by_partition: dict[tuple[str, int], list[ProducerBatch]] = {}
        for batch in batches:
            by_partition.setdefault((batch.topic, batch.partition), []).append(batch)
        by_topic: dict[str, list[broker_pb2.ProduceRequest.PartitionData]] = {}
        for (topic, partition), group in by_partition.items():
            records = b"".join(batch.encoded for batch in group)  # type: ignore[misc]
            by_topic.setdefault(topic, []).append(
                broker_pb2.ProduceRequest.PartitionData(partition=partition, records=records)
            )
        request = broker_pb2.ProduceRequest(
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topics=[
                broker_pb2.ProduceRequest.TopicData(name=topic, partitions=partitions)
                for topic, partitions in by_topic.items()
            ],
        )
        endpoint = self._metadata.endpoints.get(node)
        if endpoint is None:
            self._metadata.mark_stale()
            self._fail_batches(by_partition, ErrorCode.BROKER_NOT_AVAILABLE, retriable=True)
            return
        acks_zero = self.config.acks == 0

        def on_answer(response: broker_pb2.ProduceResponse | None, error: Any) -> None:
            if not acks_zero:
                self._on_response(response, error, by_partition)

        while not self._stream(endpoint).send(request, on_answer):
            self._streams.pop(endpoint, None)  # broken: the next call opens a new one
        if acks_zero:
            with self._lock:
                completed = [
                    done
                    for batch in batches
                    for done in self._accumulator.on_batch_acked(batch.batch_id, NO_OFFSET)
                ]
            self._settle(completed)

    def _stream(self, endpoint: str) -> ProduceStream:
        with self._streams_lock:
            stream = self._streams.get(endpoint)
            if stream is None or stream.broken:
                stub = broker_pb2_grpc.BrokerServiceStub(self._channels.get(endpoint))
                stream = self._streams[endpoint] = ProduceStream(stub)
            return stream

    def _on_response(
        self,
        response: broker_pb2.ProduceResponse | None,
        error: grpc.RpcError | None,
        by_partition: dict[tuple[str, int], list[ProducerBatch]],
    ) -> None:
        if error is not None:
            log.warning("produce request failed: %s", error.code())
            self._metadata.mark_stale()
            code = (
                ErrorCode.REQUEST_TIMED_OUT
                if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                else ErrorCode.NETWORK_EXCEPTION
            )
            retriable = error.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.CANCELLED,
            )
            self._fail_batches(by_partition, code, retriable=retriable, detail=error.details())
            return
        assert response is not None
        completed: list[Completed] = []
        now = _now_ms()
        with self._lock:
            for topic in response.topics:
                for result in topic.partitions:
                    group = by_partition.get((topic.name, result.partition), [])
                    if result.error_code == ErrorCode.NONE:
                        base = result.base_offset
                        for batch in group:
                            count = batch.record_count  # before the ack frees the records
                            completed += self._accumulator.on_batch_acked(
                                batch.batch_id, base, result.log_append_time_ms
                            )
                            base += count
                        continue
                    code = ErrorCode(result.error_code)
                    if code in _METADATA_ERRORS:
                        self._metadata.mark_stale()
                    for batch in group:
                        completed += self._accumulator.on_batch_failed(
                            batch.batch_id, code, is_retriable(code), now
                        )
                        self._messages[batch.batch_id] = result.error_message
        self._settle(completed)
        self._wake.set()

    def _fail_batches(
        self,
        by_partition: dict[tuple[str, int], list[ProducerBatch]],
        code: ErrorCode,
        *,
        retriable: bool,
        detail: str = "",
    ) -> None:
        now = _now_ms()
        with self._lock:
            completed = [
                done
                for group in by_partition.values()
                for batch in group
                for done in self._accumulator.on_batch_failed(batch.batch_id, code, retriable, now)
            ]
        self._settle(completed)
        self._wake.set()

    def _settle(self, completed: list[Completed]) -> None:
        """Settle the futures of completed batches, then wake waiters for memory and flushes."""
        callbacks: list[Callable[[], None]] = []
        for done in completed:
            outcome = self._outcomes.pop(done.batch_id, None)
            if outcome is None:
                continue
            if done.error_code != ErrorCode.NONE:
                message = self._messages.pop(done.batch_id, "") or done.error_message
                outcome.error = ProduceError(
                    f"{done.error_message} {message}".strip(), done.error_code
                )
            outcome.base_offset = done.base_offset
            outcome.log_append_time = done.log_append_time_ms
            with _EVENT_LOCK:
                outcome.done = True
                if outcome.event is not None:
                    outcome.event.set()
                if outcome.callbacks:
                    callbacks += outcome.callbacks
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a send() callback raised")
        if completed:
            with self._lock:
                self._space.notify_all()
