"""Produce: append each partition's batches to its log, as bytes, and answer per partition.

The SDK sends record batches already encoded (`records`): the broker validates their headers
(CRC, framing, size) and stamps offsets and the leader epoch, never decoding a record. A client
with only the generated code sends `typed_records` instead; those are encoded here, once per
partition, into one batch. A refused partition stores nothing and says why in its error_message;
the other partitions of the request are unaffected.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import build_batch
from samsa.common.record.header import COMPRESSION_NONE, COMPRESSION_ZSTD
from samsa.services.broker.partition_host import LeadershipError, PartitionHost
from samsa.v1 import broker_pb2, records_pb2

ACKS_ALLOWED = (-1, 0, 1)
_COMPRESSION = {
    records_pb2.COMPRESSION_UNSPECIFIED: COMPRESSION_NONE,
    records_pb2.COMPRESSION_NONE: COMPRESSION_NONE,
    records_pb2.COMPRESSION_ZSTD: COMPRESSION_ZSTD,
}

PartitionResponse = broker_pb2.ProduceResponse.PartitionResponse


def produce(
    host: PartitionHost, request: broker_pb2.ProduceRequest, now_ms: int
) -> tuple[broker_pb2.ProduceResponse, list[tuple[str, int]]]:
    """The response, and the partitions that received data (to wake their fetches)."""
    response = broker_pb2.ProduceResponse()
    acks = request.acks if request.HasField("acks") else -1
    appended: list[tuple[str, int]] = []
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        for data in topic.partitions:
            result = topic_response.partitions.add(partition=data.partition, base_offset=-1)
            if acks not in ACKS_ALLOWED:
                _fail(result, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}: use -1 (all), 0 or 1")
                continue
            if _append(host, topic.name, data, result, now_ms):
                appended.append((topic.name, data.partition))
    return response, appended


def _append(
    host: PartitionHost,
    topic: str,
    data: broker_pb2.ProduceRequest.PartitionData,
    result: PartitionResponse,
    now_ms: int,
) -> bool:
    hosted = host.leader(topic, data.partition)
    if isinstance(hosted, LeadershipError):
        _fail(result, hosted.code, hosted.message)
        result.current_leader.leader_id = hosted.leader_id
        result.current_leader.leader_epoch = hosted.leader_epoch
        return False
    if data.records and data.typed_records:
        _fail(result, ErrorCode.INVALID_REQUEST, "send records or typed_records, not both")
        return False
    try:
        batch = data.records or _encode_typed(data)
        info = hosted.log.append_as_leader(batch, leader_epoch=hosted.leader_epoch, now_ms=now_ms)
    except SamsaError as error:
        _fail(result, error.code, str(error))
        return False
    result.base_offset = info.first_offset
    result.log_append_time_ms = info.log_append_time_ms
    result.log_start_offset = hosted.log.log_start_offset
    return True


def _encode_typed(data: broker_pb2.ProduceRequest.PartitionData) -> bytes:
    if not data.typed_records:
        raise SamsaError("the partition carries no records", ErrorCode.INVALID_REQUEST)
    if data.compression not in _COMPRESSION:
        raise SamsaError(
            f"compression {data.compression} is unknown", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        )
    typed = data.typed_records
    return build_batch(
        [r.value if r.HasField("value") else None for r in typed],
        keys=[r.key if r.HasField("key") else None for r in typed],
        timestamps=[r.timestamp_ms for r in typed],
        headers=[
            [(h.key, h.value if h.HasField("value") else None) for h in r.headers] for r in typed
        ],
        compression=_COMPRESSION[data.compression],
    )


def _fail(result: PartitionResponse, code: int, message: str) -> None:
    result.error_code = code  # type: ignore[assignment]
    result.error_message = message
