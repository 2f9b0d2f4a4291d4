"""Read one partition from offset A up to B (exclusive), as stored batches or as records.

The Spark source's tasks read their ranges through this, and so can plain Python code that wants
"partition P from A to B" without a consumer's position or group:

    with PartitionRangeReader({"bootstrap.servers": "127.0.0.1:9093"}) as reader:
        for record in reader.records("events", 0, 100, 200):
            ...

Theory of operation. `chunks` fetches from the partition's leader (unary Fetch, no wait) starting
at A and yields what each answer holds: whole stored batches as bytes (a batch may start before A
or end after B: the caller cuts) and, at read_committed, the aborted transactions that overlap
them. It follows the answer's next offset until B, one answer ahead: as soon as an answer is in,
the next is asked for on a thread (gRPC waits without the GIL), so the broker reads and sends
while the caller decodes; at most one fetch is in flight and two answers are held. A leader
change or a coordinator-free retriable error refreshes the metadata and asks again, within
`request.timeout.ms` of no progress. Offsets below the log start (deleted by retention) raise
OFFSET_OUT_OF_RANGE: the caller decides whether that is data loss.

A range is read under one topic id (KIP-516): the caller's (`topic_id`: the id it planned the
range under, as the Spark source does), else the one the reader's metadata shows when the range
starts. Each fetch names it, so a broker hosting another topic of that name answers
UNKNOWN_TOPIC_ID instead of its records; the reader then refreshes its metadata, and when that
shows another id the topic was deleted and created again: the rest of the range's offsets name
records of a topic that is gone, so `chunks` raises KafkaError UNKNOWN_TOPIC_ID (not retried)
rather than read the new topic's records in their place. The same id, or no topic of that name:
a broker behind on metadata, asked again; still no such topic when request.timeout.ms ends, it
was deleted: UNKNOWN_TOPIC_ID (UNKNOWN_TOPIC_OR_PARTITION when the range has no id) instead of
REQUEST_TIMED_OUT. `records` decodes the chunks
(markers and, at read_committed, aborted records left out) and cuts them to [A, B); a batch that
cannot be decoded raises CorruptRecordError once the records before it were yielded.

Each fetch names the reader to the broker by its `client.id` (Kafka's default consumer id,
"consumer-N", when none is set), so client quotas hold the Spark source as any consumer
(client_identity.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from samsa.client.channels import Channels
from samsa.client.client_identity import client_metadata, consumer_client_id
from samsa.client.client_tls import client_security
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config_values import parse_client_id
from samsa.client.consumer import ConsumerRecord
from samsa.client.consumer_records import decode_records
from samsa.client.errors import KafkaError, coded_message
from samsa.client.metadata_topics import METADATA_MAX_IDLE_MS
from samsa.client.refusals import authorization_error
from samsa.common.errors import CorruptRecordError, ErrorCode, is_retriable
from samsa.v1 import broker_pb2, broker_pb2_grpc, records_pb2

ISOLATION = {
    "read_uncommitted": records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED,
    "read_committed": records_pb2.ISOLATION_LEVEL_READ_COMMITTED,
}
# Per answer: big enough to amortise a call over many batches, small enough that a range is
# several answers, so the broker sends one while the caller decodes the one before (and a Spark
# task hands its first rows on sooner). 8 MiB answers made a 6.6 MB partition one serial fetch.
FETCH_BYTES = 2 * 1024 * 1024
REQUEST_TIMEOUT_MS_DEFAULT = 30_000
RETRY_BACKOFF_S = 0.05


@dataclass(frozen=True)
class Chunk:
    """One Fetch answer's batches (bytes, back to back) and the aborted transactions
    ((producer id, first offset)) a read_committed reader must hide among them."""

    data: bytes
    aborted: tuple[tuple[int, int], ...]


class PartitionRangeReader:
    """Reads partition ranges (see the module docstring); safe to use from one thread (a `chunks`
    iterator fetches on a thread of its own, one fetch at a time)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        servers = str(config.get("bootstrap.servers", ""))
        bootstrap = [server.strip() for server in servers.split(",") if server.strip()]
        if not bootstrap:
            raise KafkaError("bootstrap.servers is required", ErrorCode.INVALID_REQUEST)
        timeout_ms = int(config.get("request.timeout.ms", REQUEST_TIMEOUT_MS_DEFAULT))  # type: ignore[call-overload]
        self.timeout_s = timeout_ms / 1000
        configured = parse_client_id("client.id", config.get("client.id", ""))
        self.client_id = consumer_client_id(configured, None)  # one id for all its fetches
        self._identity = client_metadata(self.client_id)
        self._channels = Channels(security=client_security(config))  # files read once
        # The topics it reads stay described while read, as a producer's (metadata_topics.py).
        self._metadata = ClusterMetadata(bootstrap, self._channels, METADATA_MAX_IDLE_MS)

    def close(self) -> None:
        self._channels.close()

    def __enter__(self) -> PartitionRangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chunks(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        isolation: str = "read_uncommitted",
        topic_id: bytes | None = None,
    ) -> Iterator[Chunk]:
        """The batches holding offsets [start, end), answer by answer. The next answer is
        fetched on a thread while the caller works on this one (one fetch in flight at most).
        `topic_id`: the topic's id the range belongs to (None: the one the metadata shows)."""
        level = _isolation(isolation)
        if start < 0:  # the broker refuses it, and the refusal would be retried for a timeout
            raise KafkaError(f"start offset {start} is negative", ErrorCode.INVALID_REQUEST)
        if start >= end:
            return  # an empty range: nothing to fetch (a Spark task may be handed one)
        pinned = self._topic_id(topic) if topic_id is None else topic_id
        with ThreadPoolExecutor(1, thread_name_prefix="samsa-range-fetch") as pool:
            pending: Future[tuple[Chunk, int]] | None = pool.submit(
                self._next_chunk, topic, partition, start, end, level, isolation, pinned
            )
            while pending is not None:
                chunk, position = pending.result()
                pending = None
                if position < end:
                    pending = pool.submit(
                        self._next_chunk,
                        topic,
                        partition,
                        position,
                        end,
                        level,
                        isolation,
                        pinned,
                    )
                yield chunk

    def _next_chunk(
        self,
        topic: str,
        partition: int,
        position: int,
        end: int,
        level: int,
        isolation: str,
        topic_id: bytes,
    ) -> tuple[Chunk, int]:
        """The next answer with batches at `position` (< end), and where the one after starts;
        retried within request.timeout.ms."""
        assert position < end
        deadline = time.monotonic() + self.timeout_s
        while True:
            result, problem = self._fetch_once(topic, partition, position, level, topic_id)
            if result is not None:
                records = result.records  # read once: each read of a bytes field copies it
                if records:
                    aborted = tuple(
                        (a.producer_id, a.first_offset) for a in result.aborted_transactions
                    )
                    return Chunk(records, aborted), max(position + 1, result.next_fetch_offset)
                # Nothing there yet (the end is beyond what is readable).
                readable = (
                    result.last_stable_offset
                    if level == records_pb2.ISOLATION_LEVEL_READ_COMMITTED
                    else result.high_watermark
                )
                problem = (
                    f"offset {position} is not readable yet ({isolation} end {readable}); "
                    f"asked up to {end}"
                )
            if time.monotonic() >= deadline:
                self._raise_if_deleted(topic, partition, position, topic_id)
                raise KafkaError(
                    f"reading {topic}-{partition} up to {end} stopped at {position}: "
                    f"{problem} (for request.timeout.ms, {self.timeout_s * 1000:.0f})",
                    ErrorCode.REQUEST_TIMED_OUT,
                )
            time.sleep(RETRY_BACKOFF_S)

    def records(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        isolation: str = "read_uncommitted",
        topic_id: bytes | None = None,
    ) -> Iterator[ConsumerRecord]:
        """The records of [start, end) in offset order: markers never, and at read_committed
        no record of an aborted transaction (`topic_id` as for `chunks`)."""
        tp = (topic, partition)
        for chunk in self.chunks(topic, partition, start, end, isolation, topic_id):
            records, _, corrupt_at = decode_records(tp, chunk.data, start, chunk.aborted)
            for record in records:
                if record.offset >= end:
                    return
                yield record
            if corrupt_at is not None and corrupt_at < end:
                # The next chunk starts past this one: the records from the batch that cannot
                # be decoded on would be skipped silently. Decoded from there, it comes first
                # and raises, naming its offsets and why.
                decode_records(tp, chunk.data, corrupt_at, chunk.aborted)
                raise CorruptRecordError(f"{topic}-{partition}: batch at {corrupt_at} unreadable")

    def _fetch_once(
        self, topic: str, partition: int, offset: int, level: int, topic_id: bytes = b""
    ) -> tuple[broker_pb2.FetchResponse.PartitionResponse | None, str]:
        """(the partition's answer, "") or (None, why there is none: retried), fetched under
        `topic_id` (empty: unchecked)."""
        leader = self._leader(topic, partition)
        if leader is None:
            return None, f"{topic}-{partition} has no leader now"
        request = broker_pb2.FetchRequest(
            max_wait_ms=0,
            max_bytes=FETCH_BYTES,
            isolation_level=level,  # type: ignore[arg-type]
            topics=[
                broker_pb2.FetchRequest.TopicData(
                    name=topic,
                    topic_id=topic_id,
                    partitions=[
                        broker_pb2.FetchRequest.PartitionData(
                            partition=partition,
                            fetch_offset=offset,
                            partition_max_bytes=FETCH_BYTES,
                        )
                    ],
                )
            ],
        )
        stub = broker_pb2_grpc.BrokerServiceStub(self._channels.get(leader))
        try:
            answer = stub.Fetch(request, timeout=min(self.timeout_s, 10.0), metadata=self._identity)
        except grpc.RpcError as error:
            if refused := authorization_error(error):  # so would every broker
                raise refused from None
            self._refresh(topic)
            return None, f"the leader at {leader}: {error.code().name}"  # type: ignore[attr-defined]
        result = answer.topics[0].partitions[0]
        if result.error_code == ErrorCode.NONE:
            return result, ""
        code, message = coded_message(result.error_code, result.error_message)  # a newer one's
        if code == ErrorCode.OFFSET_OUT_OF_RANGE or not is_retriable(code):
            raise KafkaError(
                f"reading {topic}-{partition} at {offset}: {code.name} {message} "
                f"(log start {result.log_start_offset})",
                code,
            )
        self._refresh(topic)
        if code == ErrorCode.UNKNOWN_TOPIC_ID and topic_id:
            _check_same_topic(topic, partition, offset, topic_id, self._metadata.topic_ids)
        return None, f"{code.name} {result.error_message}"

    def _raise_if_deleted(self, topic: str, partition: int, position: int, topic_id: bytes) -> None:
        """At the end of the retries: raise when the cluster (its metadata, asked now) has no
        topic of that name, with UNKNOWN_TOPIC_ID when the range was read under an id (that
        topic was deleted), else UNKNOWN_TOPIC_OR_PARTITION; return when it has one, or does
        not answer (the timeout stands)."""
        try:
            self._metadata.refresh([topic], min(self.timeout_s, 5.0))
        except (KafkaError, grpc.RpcError):
            return
        if topic in self._metadata.partition_counts:
            return
        if topic_id:
            raise KafkaError(
                f"reading {topic}-{partition} at {position}: the topic was deleted (the cluster "
                f"has no topic of that name, the range's id was {topic_id.hex()}); the range's "
                "offsets from here name records that no longer exist",
                ErrorCode.UNKNOWN_TOPIC_ID,
            )
        raise KafkaError(
            f"reading {topic}-{partition} at {position}: the cluster has no topic of that name",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )

    def _refresh(self, topic: str) -> None:
        with contextlib.suppress(KafkaError, grpc.RpcError):  # asked again on the next try
            self._metadata.refresh([topic], min(self.timeout_s, 5.0))

    def _topic_id(self, topic: str) -> bytes:
        """The topic's id as the metadata shows it (asked when unknown); empty when it shows
        none, and the range is read unchecked (its topic does not exist yet, or its metadata
        came from a server that names no ids)."""
        known = self._metadata.topic_ids.get(topic)
        if not known:
            self._refresh(topic)
            known = self._metadata.topic_ids.get(topic)
        return known or b""

    def _leader(self, topic: str, partition: int) -> str | None:
        leader = self._metadata.leaders.get((topic, partition))
        if leader is None:
            self._refresh(topic)
            leader = self._metadata.leaders.get((topic, partition))
        return None if leader is None else self._metadata.endpoints.get(leader)


def _check_same_topic(
    topic: str, partition: int, offset: int, topic_id: bytes, topic_ids: Mapping[str, bytes]
) -> None:
    """After an UNKNOWN_TOPIC_ID answer and a metadata refresh: raise when the topic now has
    another id than the range's (deleted and created again: not retried), else return (a broker
    or the metadata is behind, or the topic is gone for now: retried)."""
    now = topic_ids.get(topic)
    if now and now != topic_id:
        raise KafkaError(
            f"reading {topic}-{partition} at {offset}: the topic was deleted and created again "
            f"(its id is now {now.hex()}, the range's was {topic_id.hex()}); the range's offsets "
            "from here name records that no longer exist",
            ErrorCode.UNKNOWN_TOPIC_ID,
        )


def _isolation(isolation: str) -> int:
    level = ISOLATION.get(isolation)
    if level is None:
        raise KafkaError(
            f"isolation.level {isolation!r}: use read_uncommitted or read_committed",
            ErrorCode.INVALID_REQUEST,
        )
    return level
