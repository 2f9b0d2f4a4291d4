"""Produce: append each partition's batches to its log, as bytes, and answer per partition.

The SDK sends record batches already encoded (`records`): the broker validates their headers (CRC,
framing, size) and stamps offsets and the leader epoch, never decoding a record. A client with
only the generated code sends `typed_records` instead; those are encoded here, once per partition,
into one batch (with the request's producer id, epoch and base sequence in its header when it
names them: the portable path's idempotence). A refused partition stores nothing and says why in
its error_message; the other partitions of the request are unaffected. Batches of an idempotent
producer are checked against the partition's producer state by the log before a byte is written; a
retried batch the log already holds answers its original offsets and, with acks=all, waits for
them to be replicated like any other append. Transactional batches go only to partitions the
transaction coordinator confirmed (txn_verification.py, KIP-890). With `trace_parent` (a traced
request: record_trace.py), each append gets its span and its batch is remembered for the later
steps.

Internal topics (`INTERNAL_TOPICS`: `__consumer_offsets`, `__transaction_state`) hold the
coordinators' state, so a forged record there is forged group or transaction state: their
partitions are refused (INVALID_REQUEST, nothing written) unless the caller proved it is a member
of the cluster. The adapter checks the proof and passes `internal_write_refusal=None` when it
holds; the default refuses. A proven member may write transactional batches there: the group
coordinator writes offsets committed in a transaction under the producer's id (TxnOffsetCommit).

With ACLs, the partitions of a topic the caller may not WRITE are answered
TOPIC_AUTHORIZATION_FAILED (`refused`: the message per topic, caller.topic_refusals) and the
others written, as Kafka answers per partition: one producer writing several topics loses only
the refused topic's batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from opentelemetry.trace import SpanContext

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import build_batch
from samsa.common.record.header import (
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
)
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.services.broker.hosted_partition import HostedPartition, LeadershipError
from samsa.services.broker.log.producer_state import PRODUCER_EPOCH_MAX
from samsa.services.broker.partition_host import PartitionHost
from samsa.v1 import broker_pb2, records_pb2

# Why the caller may not write a topic (None: it may); None for the whole: ACLs off.
TopicRefusals = Callable[[str], str | None]

log = logging.getLogger(__name__)

ACKS_ALLOWED = (-1, 0, 1)
# PartitionData's idempotence fields for typed_records (proto/samsa/v1/broker.proto).
_PRODUCER_FIELDS = ("producer_id", "producer_epoch", "base_sequence")
_COMPRESSION = {
    records_pb2.COMPRESSION_UNSPECIFIED: COMPRESSION_NONE,
    records_pb2.COMPRESSION_NONE: COMPRESSION_NONE,
    records_pb2.COMPRESSION_ZSTD: COMPRESSION_ZSTD,
}

PartitionResponse = broker_pb2.ProduceResponse.PartitionResponse
TopicPartition = tuple[str, int]
Refusal = tuple[ErrorCode, str]

# Why an internal topic's partition is refused when nobody said otherwise.
INTERNAL_WRITE_UNPROVEN = "the request does not prove it comes from a member of the cluster"


class ReplicationWait(NamedTuple):
    """An acks=all append that is acknowledged once the high watermark reaches `end_offset`,
    under the leadership (`leader_epoch`) that appended it (produce_wait.settled)."""

    hosted: HostedPartition
    end_offset: int
    result: PartitionResponse
    leader_epoch: int


def produce(
    host: PartitionHost,
    request: broker_pb2.ProduceRequest,
    now_ms: int,
    *,
    internal_write_refusal: str | None = INTERNAL_WRITE_UNPROVEN,
    transactional: tuple[set[TopicPartition], dict[TopicPartition, Refusal]] = (set(), {}),
    trace_parent: SpanContext | None = None,
    refused_topics: TopicRefusals | None = None,
) -> tuple[broker_pb2.ProduceResponse, list[ReplicationWait]]:
    """Append every partition's data. The response is final except for the acks=all appends
    returned as waits: those are answered once replicated (see `await_replication`).

    `internal_write_refusal` is why partitions of internal topics are refused, or None when the
    caller proved it is a member of the cluster and may write them. `transactional` is what
    txn_verification.py decided: the partitions that may take transactional batches, and the
    ones refused with their error (the others' transactional batches are refused by the log).
    `trace_parent`: the span the appends' spans are children of, when the request is traced.
    `refused_topics`: why the caller may not WRITE a topic (ACLs), None when they are off."""
    verified, refused = transactional
    response = broker_pb2.ProduceResponse()
    acks = request.acks if request.HasField("acks") else -1
    waits: list[ReplicationWait] = []
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        topic_id = topic.topic_id  # read once: each read of a bytes field copies it
        denied = None if refused_topics is None else refused_topics(topic.name)
        for data in topic.partitions:
            result = topic_response.partitions.add(partition=data.partition, base_offset=-1)
            if denied is not None:
                fail(result, ErrorCode.TOPIC_AUTHORIZATION_FAILED, denied)
                continue
            if acks not in ACKS_ALLOWED:
                fail(result, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}: use -1 (all), 0 or 1")
                continue
            if topic.name in INTERNAL_TOPICS and internal_write_refusal is not None:
                message = internal_write_message(topic.name, internal_write_refusal)
                fail(result, ErrorCode.INVALID_REQUEST, message)
                continue
            key = (topic.name, data.partition)
            if key in refused:
                fail(result, *refused[key])
                continue
            # A coordinator's transactional batch (TxnOffsetCommit): the member proof stands for
            # the coordinator's word that the partition is in the producer's transaction.
            allow = key in verified or topic.name in INTERNAL_TOPICS
            appended = _append(
                host,
                topic.name,
                data,
                result,
                now_ms,
                acks,
                allow_transactional=allow,
                trace_parent=trace_parent,
                topic_id=topic_id,
            )
            if appended is None:
                continue
            hosted, end_offset = appended
            hosted.on_leader_append()
            if acks == -1 and hosted.high_watermark < end_offset:
                waits.append(ReplicationWait(hosted, end_offset, result, hosted.leader_epoch))
    return response, waits


def _append(
    host: PartitionHost,
    topic: str,
    data: broker_pb2.ProduceRequest.PartitionData,
    result: PartitionResponse,
    now_ms: int,
    acks: int,
    *,
    allow_transactional: bool = False,
    trace_parent: SpanContext | None = None,
    topic_id: bytes = b"",
) -> tuple[HostedPartition, int] | None:
    """The partition and the offset the high watermark must reach for the append to count as
    replicated (for a retried idempotent batch the log already holds: its original end). The
    `topic_id`, when the request names one, must be the hosted partition's (KIP-516)."""
    hosted = host.leader(topic, data.partition, topic_id)
    if isinstance(hosted, LeadershipError):
        hosted.refuse(result)
        return None
    records = data.records  # read once: each read of a bytes field copies it
    if records and data.typed_records:
        fail(result, ErrorCode.INVALID_REQUEST, "send records or typed_records, not both")
        return None
    if records and _has_producer_fields(data):
        fail(
            result,
            ErrorCode.INVALID_REQUEST,
            "producer_id, producer_epoch and base_sequence are for typed_records: a batch in "
            "`records` carries them in its own header",
        )
        return None
    if acks == -1 and len(hosted.isr) < hosted.min_insync_replicas:
        fail(
            result,
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"the ISR {list(hosted.isr)} is smaller than min.insync.replicas="
            f"{hosted.min_insync_replicas}: refused with acks=all (nothing was written)",
        )
        return None
    tracer = host.record_tracer if trace_parent is not None else None
    started_ns = tracer.clock() if tracer is not None else 0
    try:
        batch = records or _encode_typed(data, now_ms)
        info = hosted.log.append_as_leader(
            batch,
            leader_epoch=hosted.leader_epoch,
            now_ms=now_ms,
            allow_transactional=allow_transactional,
        )
    except SamsaError as error:
        fail(result, error.code, str(error))
        return None
    if info.record_count == 0:
        log.info(
            "a retried batch is already in the log: answered with its original offsets",
            extra={"partition": f"{topic}-{data.partition}", "base_offset": info.first_offset},
        )
    else:  # one add per batch (broker_metrics.py), never per record
        host.metrics.produced(topic, info.record_count, len(batch))
        if tracer is not None and trace_parent is not None:
            if hosted.traced is None:
                hosted.traced = tracer.partition_traces(topic, data.partition)
            hosted.traced.appended(
                trace_parent,
                info.first_offset,
                info.last_offset + 1,
                len(batch),
                started_ns,
                tracer.clock(),
            )
    result.base_offset = info.first_offset
    result.log_append_time_ms = info.log_append_time_ms
    result.log_start_offset = hosted.log.log_start_offset
    return hosted, info.last_offset + 1


def _has_producer_fields(data: broker_pb2.ProduceRequest.PartitionData) -> bool:
    return any(data.HasField(name) for name in _PRODUCER_FIELDS)


def _typed_producer(data: broker_pb2.ProduceRequest.PartitionData) -> tuple[int, int, int]:
    """(producer id, epoch, base sequence) for the batch built from typed_records: the idempotent
    producer the request names, or none when it names none. All three or none, in range."""
    if not _has_producer_fields(data):
        return NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE
    if not all(data.HasField(name) for name in _PRODUCER_FIELDS):
        raise SamsaError(
            "set producer_id, producer_epoch and base_sequence together, or none of them",
            ErrorCode.INVALID_REQUEST,
        )
    if data.producer_id < 0 or not 0 <= data.producer_epoch <= PRODUCER_EPOCH_MAX:
        raise SamsaError(
            f"producer_id {data.producer_id} / producer_epoch {data.producer_epoch}: use the id "
            f"(>= 0) and epoch (0..{PRODUCER_EPOCH_MAX}) InitProducerId answered",
            ErrorCode.INVALID_REQUEST,
        )
    if data.base_sequence < 0:
        raise SamsaError(
            f"base_sequence {data.base_sequence} is negative: sequences start at 0",
            ErrorCode.INVALID_REQUEST,
        )
    return data.producer_id, data.producer_epoch, data.base_sequence


def _encode_typed(data: broker_pb2.ProduceRequest.PartitionData, now_ms: int) -> bytes:
    """The portable path's records as one batch; a timestamp of 0 (unset) or below means now,
    as the proto says (records.proto, Record.timestamp_ms). With the producer fields, the batch
    is the named idempotent producer's, checked by the log like any other of its batches."""
    if not data.typed_records:
        raise SamsaError("the partition carries no records", ErrorCode.INVALID_REQUEST)
    if data.compression not in _COMPRESSION:
        raise SamsaError(
            f"compression {data.compression} is unknown", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        )
    producer_id, producer_epoch, base_sequence = _typed_producer(data)
    typed = data.typed_records
    return build_batch(
        [r.value if r.HasField("value") else None for r in typed],
        keys=[r.key if r.HasField("key") else None for r in typed],
        timestamps=[r.timestamp_ms if r.timestamp_ms > 0 else now_ms for r in typed],
        headers=[
            [(h.key, h.value if h.HasField("value") else None) for h in r.headers] for r in typed
        ],
        compression=_COMPRESSION[data.compression],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def internal_write_message(topic: str, reason: str) -> str:
    """The error_message of a refused write to internal topic `topic`."""
    return (
        f"{topic} is internal: only the cluster's coordinators write it (with the membership "
        f"proof); {reason}, so nothing was written"
    )


def fail(result: PartitionResponse, code: int, message: str) -> None:
    result.error_code = code  # type: ignore[assignment]
    result.error_message = message
