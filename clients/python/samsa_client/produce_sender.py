"""The producer driver's requests and answers: one long-lived ProduceStream per broker.

`send(node, batches)` lays out one Produce request (produce_message.py) for batches the driver
drained and encoded, and hands it to that broker's stream (produce_stream.py) without awaiting;
a broken stream is replaced by a new one at the next send. Each answer comes back on the stream's
reader task, on the driver's loop, and goes to the accumulator under the lock:

- success: the batches' offsets, counted from the partition's base offset;
- an error: the accumulator retries or fails the batch (retriable errors, within retries and
  delivery.timeout.ms). NOT_LEADER_OR_FOLLOWER and the like mark the metadata stale (so does
  UNKNOWN_TOPIC_ID: the request names each topic's id, KIP-516), unless the answer names a
  newer leader (KIP-951): then that partition's leader is updated at once and the batch
  retried to it with no backoff. INVALID_PRODUCER_EPOCH asks for a new epoch (`on_fenced`).
  MESSAGE_TOO_LARGE for a batch sent alone in its partition splits it (batch_completion.py); a
  code this client does not know (a newer broker's) is UNKNOWN_SERVER_ERROR, as in Kafka's;
- a stream that failed: every batch of the request, with the stream's error; so does a request
  unanswered within request.timeout.ms, or by its oldest batch's delivery deadline if sooner;
- a partition the request carried and the answer leaves out: its batches fail as retriable
  (NETWORK_EXCEPTION, as a lost answer); a partition the answer names but the request did not
  carry, or names twice, is ignored.

The outcomes are settled by the driver (`settle`), which also wakes its task (`wake_task`) when
something queued may now go. With acks=0 nothing comes back: the batches complete as sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import grpc

from samsa.client.accumulator import RecordAccumulator
from samsa.client.channels import AioChannels, tracing_configured
from samsa.client.client_identity import client_metadata, producer_client_id
from samsa.client.cluster_metadata import (
    NEW_LEADER_ERRORS,
    STALE_METADATA_ERRORS,
    ClusterMetadata,
)
from samsa.client.config import ProducerConfig
from samsa.client.errors import AuthorizationError, coded_message
from samsa.client.produce_message import produce_request
from samsa.client.produce_stream import (
    ByPartition,
    ProduceStream,
    raw_produce_stream,
    stream_error_outcome,
)
from samsa.client.producer_batch import NO_OFFSET, Completed, ProducerBatch
from samsa.client.record_appender import now_ms
from samsa.client.record_future import BatchOutcomes
from samsa.client.record_tracing import sampled_traceparent
from samsa.client.refusals import authorization_error
from samsa.client.transaction_manager import TransactionManager
from samsa.common.errors import ErrorCode, is_retriable
from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)

# Noted on a batch whose partition the broker's answer left out (it failed for good only if
# its retries ran out meanwhile).
MISSING_PARTITION_MESSAGE = "(the broker's produce response did not answer for this partition)"


class ProduceSender:
    """Requests out, answers back, for the driver's loop (see the module docstring)."""

    def __init__(
        self,
        config: ProducerConfig,
        metadata: ClusterMetadata,
        lock: threading.Lock,
        accumulator: RecordAccumulator,
        channels: AioChannels,
        outcomes: BatchOutcomes,
        txn: TransactionManager | None,
        *,
        on_fenced: Callable[[], None],
        settle: Callable[[list[Completed]], None],
        wake_task: Callable[[], None],
    ) -> None:
        self._config = config
        self._metadata = metadata
        self._lock = lock
        self._accumulator = accumulator
        self._channels = channels
        self._outcomes = outcomes
        self._txn = txn
        self._on_fenced = on_fenced
        self._settle = settle
        self._wake_task = wake_task
        self._streams: dict[str, ProduceStream] = {}  # by broker endpoint
        # Names the producer to brokers, for their client quotas (client_identity.py).
        self._identity = client_metadata(producer_client_id(config.client_id))
        self._tracing = tracing_configured()  # read once, as the producer does

    def expire(self) -> None:
        """Fail the requests past their deadline (`send`) without an answer."""
        for stream in list(self._streams.values()):
            stream.expire()

    async def close(self) -> None:
        for stream in list(self._streams.values()):
            await stream.close()  # requests still waiting fail, and go back to the queue
        self._streams.clear()

    def has_room(self, node: int) -> bool:
        endpoint = self._metadata.endpoints.get(node)
        stream = self._streams.get(endpoint) if endpoint is not None else None
        return stream is None or stream.broken or stream.has_room()

    def send(self, node: int, batches: list[ProducerBatch]) -> None:
        by_partition: ByPartition = {}
        for batch in batches:
            by_partition.setdefault((batch.topic, batch.partition), []).append(batch)
        endpoint = self._metadata.endpoints.get(node)
        if endpoint is None:
            self._metadata.mark_stale()
            self._fail_batches(by_partition, ErrorCode.LEADER_NOT_AVAILABLE, retriable=True)
            return
        request = produce_request(
            self._config.acks,
            self._config.request_timeout_ms,
            {tp: [batch.encoded for batch in group] for tp, group in by_partition.items()},  # type: ignore[misc]
            transactional_id=self._config.transactional_id or "",
            add_partitions_to_txn=self._txn is not None,
            topic_ids=self._metadata.topic_ids,
        )
        acks_zero = self._config.acks == 0

        def on_answer(
            response: broker_pb2.ProduceResponse | None, error: grpc.RpcError | None
        ) -> None:
            if not acks_zero:
                self._on_response(response, error, by_partition)

        traceparent = sampled_traceparent(b.headers for b in batches) if self._tracing else ""
        timeout_s, reason, breaks = self._deadline(batches)
        while not self._stream(endpoint).send(
            request, on_answer, timeout_s, traceparent, reason, breaks
        ):
            self._streams.pop(endpoint, None)  # broken: the next call opens a new one
        if acks_zero:
            with self._lock:
                completed = [
                    done
                    for batch in batches
                    for done in self._accumulator.on_batch_acked(batch.batch_id, NO_OFFSET)
                ]
            self._settle(completed)

    def _deadline(self, batches: list[ProducerBatch]) -> tuple[float, str, bool]:
        """How long the request may wait for its answer: request.timeout.ms, or less when a
        batch's delivery deadline comes first. delivery.timeout.ms bounds the time to report
        an outcome after send(), for a batch in flight too (Kafka's Sender expires in-flight
        batches): a retry sent just before its deadline must not wait request.timeout.ms more.
        Its failure then comes back past the deadline, so it is final (retry_policy.py). The
        third value: whether missing the deadline breaks the stream (request.timeout.ms: the
        broker is presumed gone), or fails this request alone (a delivery deadline)."""
        request_ms = self._config.request_timeout_ms
        created_ms = min(batch.created_ms for batch in batches)
        # +1: the failure must reach the accumulator at or after the deadline, never before.
        delivery_ms = created_ms + self._config.delivery_timeout_ms - now_ms() + 1
        if delivery_ms < request_ms:
            reason = (
                f"no answer by the delivery deadline (delivery.timeout.ms "
                f"{self._config.delivery_timeout_ms} ms)"
            )
            return max(delivery_ms, 0) / 1000, reason, False
        return request_ms / 1000, f"no answer within request.timeout.ms ({request_ms} ms)", True

    def _stream(self, endpoint: str) -> ProduceStream:
        """The broker's stream; a new one if it broke, or if it is idle and its SASL ticket
        is due for renewal (produce_stream.py), logged."""
        stream = self._streams.get(endpoint)
        channels = self._channels
        if stream is not None and channels.stream_stale(stream.generation) and stream.retire():
            log.info("produce stream to %s: reopened for a fresh SASL ticket", endpoint)
        if stream is None or stream.broken:
            open_call = raw_produce_stream(channels.get(endpoint, traced=False))
            stream = self._streams[endpoint] = ProduceStream(
                lambda requests: open_call(requests, metadata=self._identity),
                channels.stream_generation(),
            )
        return stream

    def _on_response(
        self,
        response: broker_pb2.ProduceResponse | None,
        error: grpc.RpcError | None,
        by_partition: ByPartition,
    ) -> None:
        if error is not None:
            log.warning("produce request failed: %s %s", error.code(), error.details())
            refused = authorization_error(error)
            if refused is not None:
                self._fail_refused(by_partition, refused)
                return
            self._metadata.mark_stale()
            code, retriable = stream_error_outcome(error)
            self._fail_batches(by_partition, code, retriable=retriable)
            return
        assert response is not None
        completed: list[Completed] = []
        now = now_ms()
        unanswered = dict(by_partition)  # each partition's batches take one answer, once
        failed = False
        with self._lock:
            for topic in response.topics:
                for result in topic.partitions:
                    group = unanswered.pop((topic.name, result.partition), None)
                    if group is None:  # never asked, or answered twice: nothing to settle
                        log.warning(
                            "produce response names %s-%d, which the request did not carry "
                            "(or names it twice): ignored",
                            topic.name,
                            result.partition,
                        )
                        continue
                    completed += self._partition_outcome(topic.name, group, result, now)
                    failed = failed or result.error_code != ErrorCode.NONE
            # Kafka fails a batch its answer leaves out; its outcome is unknown, as after a
            # lost answer, so it is retried in order with its sequence (the broker drops it
            # if it was written).
            for (topic_name, partition), group in unanswered.items():
                log.warning("produce response left out %s-%d: retrying", topic_name, partition)
                for batch in group:
                    completed += self._accumulator.on_batch_failed(
                        batch.batch_id, ErrorCode.NETWORK_EXCEPTION, True, now
                    )
                    self._outcomes.note_message(batch.batch_id, MISSING_PARTITION_MESSAGE)
                failed = True
            queued = self._accumulator.has_queued()
        self._settle(completed)
        if failed or queued:  # a retry, or batches an in-flight slot may now let out
            self._wake_task()

    def _partition_outcome(
        self,
        topic: str,
        group: list[ProducerBatch],
        result: broker_pb2.ProduceResponse.PartitionResponse,
        now: int,
    ) -> list[Completed]:
        """Under the lock: feed one partition's answer back to the accumulator."""
        completed: list[Completed] = []
        if result.error_code == ErrorCode.NONE:
            base = result.base_offset
            for batch in group:
                count = batch.piece_count  # what the attempt carried; before the ack frees it
                completed += self._accumulator.on_batch_acked(
                    batch.batch_id, base, result.log_append_time_ms
                )
                base += count
            return completed
        # A newer broker's code this client does not know reads as UNKNOWN_SERVER_ERROR (not
        # retried), its number kept in the message, as Kafka's clients read it: a ValueError
        # here would leave the request's batches in flight for ever, their futures unsettled.
        code, message = coded_message(result.error_code, result.error_message)
        # KIP-951: the answer names the new leader; go there now, no backoff, no refresh.
        retry_now = (
            code in NEW_LEADER_ERRORS
            and result.HasField("current_leader")
            and self._metadata.update_leader(
                (topic, result.partition),
                result.current_leader.leader_id,
                result.current_leader.leader_epoch,
            )
        )
        if code in STALE_METADATA_ERRORS and not retry_now:
            self._metadata.mark_stale()
        elif code is ErrorCode.INVALID_PRODUCER_EPOCH:
            self._on_fenced()
        alone = len(group) == 1  # a too-large answer is about this batch (it splits)
        for batch in group:
            completed += self._accumulator.on_batch_failed(
                batch.batch_id, code, is_retriable(code), now, retry_now=retry_now, alone=alone
            )
            self._outcomes.note_message(batch.batch_id, message)
        return completed

    def fail_unencodable(self, failed: list[tuple[ProducerBatch, Exception]]) -> None:
        """Drained batches whose encoding raised (accumulator.encode): they fail now
        (INVALID_RECORD, not retried: the same records would fail the same way), or they would
        stay in flight for ever, never sent and never answered."""
        now = now_ms()
        completed: list[Completed] = []
        with self._lock:
            for batch, error in failed:
                log.error(
                    "a batch of %s-%d cannot be encoded: %r", batch.topic, batch.partition, error
                )
                self._outcomes.note_message(batch.batch_id, f"(it cannot be encoded: {error})")
                completed += self._accumulator.on_batch_failed(
                    batch.batch_id, ErrorCode.INVALID_RECORD, False, now
                )
        self._settle(completed)

    def _fail_refused(self, by_partition: ByPartition, refused: AuthorizationError) -> None:
        """The broker's ACLs refused a message of the stream, which ended every request on it:
        the refused topic's batches fail now, not retried (Kafka's TopicAuthorizationException;
        a transactional id or the cluster refused: every batch); the others were not refused and
        are retried on a new stream, as after any stream failure."""
        refused_topic = refused.topic
        now = now_ms()
        completed: list[Completed] = []
        retried: ByPartition = {}
        with self._lock:
            for (topic, partition), group in by_partition.items():
                if refused_topic is not None and topic != refused_topic:
                    retried[(topic, partition)] = group
                    continue
                for batch in group:
                    self._outcomes.note_message(batch.batch_id, str(refused))
                    completed += self._accumulator.on_batch_failed(
                        batch.batch_id, refused.code, False, now
                    )
        self._settle(completed)
        if retried:
            self._fail_batches(retried, ErrorCode.NETWORK_EXCEPTION, retriable=True)
        else:
            self._wake_task()

    def _fail_batches(self, by_partition: ByPartition, code: ErrorCode, *, retriable: bool) -> None:
        now = now_ms()
        with self._lock:
            completed = [
                done
                for group in by_partition.values()
                for batch in group
                for done in self._accumulator.on_batch_failed(batch.batch_id, code, retriable, now)
            ]
        self._settle(completed)
        self._wake_task()
