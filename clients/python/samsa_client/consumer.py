"""The Consumer: manual assignment, positions, and fetches that are always already under way.

Theory of operation. For each assigned partition the consumer keeps a *position* (the next
offset `poll()` returns) and a *fetch offset* (where the next fetch starts: past what is already
buffered). Fetches are pipelined: every broker leading an assigned partition without buffered
data always has one Fetch in flight, sent with gRPC's asynchronous `future()` as soon as the
previous answer arrived — so `poll()` normally returns records that were fetched while the
application processed the last ones. Each broker's fetches run in a fetch session
(fetch_sessions.py): they name only partitions whose fetch offset moved, and answers carry only
partitions with news. Answers land in a queue; `poll()` decodes them a batch at a
time (the codec is column-wise, no per-field Python work) and hands out at most
`max.poll.records`.

A position that is unknown (just assigned, `seek_to_beginning/end`, or out of range with
`auto.offset.reset`) is resolved with ListOffsets before fetching. A `seek()` drops what is
buffered for the partition and any answer still in flight for the old offset. Leader changes
(NOT_LEADER_OR_FOLLOWER, an unreachable broker) mark the metadata stale and the partition is
fetched again from its new leader.

Consumer groups (subscribe, committed offsets) come with the coordinator; `subscribe()` says so.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import NamedTuple

import grpc

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata, TopicPartition
from samsa.client.config import ConsumerConfig
from samsa.client.errors import KafkaError
from samsa.client.fetch_sessions import BrokerFetchSessions
from samsa.common.errors import (
    CorruptRecordError,
    ErrorCode,
    OffsetOutOfRangeError,
    SamsaError,
)
from samsa.common.fetch_session_client import FetchParts
from samsa.common.record.codec import decode_batch
from samsa.common.record.header import unreadable_batch_offsets
from samsa.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger(__name__)

EARLIEST = broker_pb2.OFFSET_SPEC_EARLIEST
LATEST = broker_pb2.OFFSET_SPEC_LATEST


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class _Buffered:
    """Decoded records of one partition waiting to be handed out by poll()."""

    __slots__ = ("epoch", "records", "start")

    def __init__(self, records: list[ConsumerRecord], epoch: int) -> None:
        self.records = records
        self.start = 0
        self.epoch = epoch  # leader epoch of the last batch these records came from


_new_tuple = tuple.__new__


class Consumer:
    """Kafka's consumer with manual assignment (see the module docstring)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = ConsumerConfig.from_dict(config)
        self._channels = Channels()
        self._metadata = ClusterMetadata(self.config.bootstrap_servers, self._channels)
        self._assigned: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._fetch_offsets: dict[TopicPartition, int] = {}
        self._resets: dict[TopicPartition, int] = {}  # partition -> OFFSET_SPEC to resolve
        # Leader epoch of the last batch handed out per partition: sent with fetches so that a
        # leader whose log diverged from what we read (unclean election) says so (KIP-320).
        self._epochs: dict[TopicPartition, int] = {}
        # Replicas the leaders told us to read from (client.rack, KIP-392), per partition.
        self._read_replicas: dict[TopicPartition, int] = {}
        self._buffers: dict[TopicPartition, deque[_Buffered]] = {}
        # node -> the fetch offsets and session parts of its fetch in flight
        self._in_flight: dict[int, tuple[dict[TopicPartition, int], FetchParts]] = {}
        self._fetch_sessions = BrokerFetchSessions(
            partition_max_bytes=self.config.max_partition_fetch_bytes
        )
        self._answers: queue.SimpleQueue[tuple[int, object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False

    # --- assignment and positions -----------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        raise NotImplementedError(
            "consumer groups (subscribe, committed offsets) come with the group coordinator; "
            "use assign([(topic, partition), ...]) for now"
        )

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, starting per `auto.offset.reset`."""
        assigned = [(topic, int(partition)) for topic, partition in partitions]
        self._metadata.refresh({topic for topic, _ in assigned})
        for topic, partition in assigned:
            count = self._metadata.partition_counts.get(topic)
            if count is None or not 0 <= partition < count:
                raise KafkaError(
                    f"{topic}-{partition} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
        self._assigned = assigned
        for tp in list(self._positions):
            if tp not in assigned:
                self._drop(tp)
        for tp in assigned:
            if tp not in self._positions and tp not in self._resets:
                self._resets[tp] = self._default_reset(tp)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assigned)

    def _default_reset(self, tp: TopicPartition) -> int:
        policy = self.config.auto_offset_reset
        if policy == "earliest":
            return EARLIEST
        if policy == "latest":
            return LATEST
        return -1  # "none": an error when the position is needed

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_assigned(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._drop(tp)
        self._resets.pop(tp, None)
        self._positions[tp] = self._fetch_offsets[tp] = offset

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._assigned if partitions is None else partitions:
            self._check_assigned(tp)
            self._drop(tp)
            self._resets[tp] = EARLIEST

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._assigned if partitions is None else partitions:
            self._check_assigned(tp)
            self._drop(tp)
            self._resets[tp] = LATEST

    def position(self, tp: TopicPartition) -> int:
        self._check_assigned(tp)
        self._resolve_resets()
        return self._positions[tp]

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assigned:
            raise KafkaError(
                f"{tp[0]}-{tp[1]} is not assigned to this consumer", ErrorCode.INVALID_REQUEST
            )

    def _drop(self, tp: TopicPartition) -> None:
        """Forget the position, buffered records and in-flight fetch offset of `tp`."""
        self._positions.pop(tp, None)
        self._fetch_offsets.pop(tp, None)
        self._epochs.pop(tp, None)
        self._read_replicas.pop(tp, None)
        self._buffers.pop(tp, None)
        for offsets, _ in self._in_flight.values():
            offsets.pop(tp, None)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset whose timestamp is >= the given one, per partition (None: none)."""
        answers = self._list_offsets(
            {tp: (broker_pb2.OFFSET_SPEC_TIMESTAMP, ts) for tp, ts in timestamps.items()}
        )
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, timestamp)
            for tp, (offset, timestamp) in answers.items()
        }

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: o
            for tp, (o, _) in self._list_offsets({tp: (EARLIEST, 0) for tp in partitions}).items()
        }

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: o
            for tp, (o, _) in self._list_offsets({tp: (LATEST, 0) for tp in partitions}).items()
        }

    def _list_offsets(
        self, wanted: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, tuple[int, int]]:
        results: dict[TopicPartition, tuple[int, int]] = {}
        pending = dict(wanted)
        deadline = time.monotonic() + self.config.session_timeout_ms / 1000
        while pending:
            if self._metadata.needs_refresh() or any(
                tp not in self._metadata.leaders for tp in pending
            ):
                self._metadata.refresh({topic for topic, _ in pending})
            by_node: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
            for tp, spec in pending.items():
                leader = self._metadata.leaders.get(tp)
                if leader is not None:
                    by_node.setdefault(leader, {})[tp] = spec
            for node, specs in by_node.items():
                try:
                    answer = self._broker(node).ListOffsets(
                        _list_offsets_request(specs), timeout=10
                    )
                except grpc.RpcError as error:
                    log.warning("ListOffsets to broker %d failed: %s", node, error.code())
                    self._metadata.mark_stale()
                    continue
                for topic in answer.topics:
                    for result in topic.partitions:
                        tp = (topic.name, result.partition)
                        if result.error_code == ErrorCode.NONE:
                            results[tp] = (result.offset, result.timestamp_ms)
                            pending.pop(tp, None)
                        elif result.error_code in (
                            ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            ErrorCode.LEADER_NOT_AVAILABLE,
                        ):
                            self._metadata.mark_stale()
                        else:
                            raise KafkaError.of(result.error_code, result.error_message)
            if pending:
                if time.monotonic() > deadline:
                    raise KafkaError(
                        f"no leader answered ListOffsets for {sorted(pending)}",
                        ErrorCode.LEADER_NOT_AVAILABLE,
                    )
                time.sleep(0.1)
        return results

    def _resolve_resets(self) -> None:
        resets = {tp: spec for tp, spec in self._resets.items() if tp in self._assigned}
        if not resets:
            return
        undefined = [tp for tp, spec in resets.items() if spec < 0]
        if undefined:
            raise OffsetOutOfRangeError(
                f"no position for {undefined} and auto.offset.reset=none: seek() first"
            )
        for tp, (offset, _) in self._list_offsets({tp: (s, 0) for tp, s in resets.items()}).items():
            self._positions[tp] = self._fetch_offsets[tp] = offset
            self._resets.pop(tp, None)

    # --- fetching -----------------------------------------------------------------------------

    def _broker(self, node: int) -> broker_pb2_grpc.BrokerServiceStub:
        endpoint = self._metadata.endpoints.get(node)
        if endpoint is None:
            self._metadata.refresh()
            endpoint = self._metadata.endpoints[node]
        return broker_pb2_grpc.BrokerServiceStub(self._channels.get(endpoint))

    def _send_fetches(self) -> None:
        """Start a fetch to every leader of an assigned partition that has none in flight."""
        if self._metadata.needs_refresh():
            try:
                self._metadata.refresh({topic for topic, _ in self._assigned})
            except KafkaError as error:
                log.warning("metadata refresh failed: %s", error)
        wanted: dict[int, dict[TopicPartition, int]] = {}
        for tp in self._assigned:
            if tp in self._resets or self._buffers.get(tp):
                continue
            leader = self._read_replicas.get(tp, self._metadata.leaders.get(tp))
            if leader is None:
                self._metadata.mark_stale()
                continue
            if leader in self._in_flight:
                continue
            wanted.setdefault(leader, {})[tp] = self._fetch_offsets[tp]
        for node, offsets in wanted.items():
            try:
                stub = self._broker(node)
            except (KeyError, KafkaError):
                self._metadata.mark_stale()
                continue
            request, parts = self._fetch_sessions.request(
                node,
                offsets,
                self._epochs,
                max_wait_ms=self.config.fetch_max_wait_ms,
                min_bytes=self.config.fetch_min_bytes,
                max_bytes=self.config.fetch_max_bytes,
                rack_id=self.config.client_rack,
            )
            self._in_flight[node] = (offsets, parts)
            call = stub.Fetch.future(request, timeout=self.config.fetch_max_wait_ms / 1000 + 30)
            call.add_done_callback(lambda future, node=node: self._answers.put((node, future)))

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Up to `max.poll.records` records, waiting up to `timeout` seconds for some."""
        deadline = time.monotonic() + timeout
        self._resolve_resets()
        while True:
            records = self._take(self.config.max_poll_records)
            self._send_fetches()  # pipelining: the next answers are on their way
            if records:
                return records
            remaining = deadline - time.monotonic()
            try:
                node, future = self._answers.get(timeout=max(0.0, remaining))
            except queue.Empty:
                return []
            self._on_answer(node, future)
            while True:  # take every other answer that is already there
                try:
                    node, future = self._answers.get_nowait()
                except queue.Empty:
                    break
                self._on_answer(node, future)

    def _on_answer(self, node: int, future: object) -> None:
        in_flight = self._in_flight.pop(node, None)
        if in_flight is None:
            return
        offsets, parts = in_flight
        try:
            response = future.result()  # type: ignore[attr-defined]
        except grpc.RpcError as error:
            log.warning("fetch from broker %d failed: %s", node, error.code())
            self._fetch_sessions.on_failure(node)
            self._metadata.mark_stale()
            time.sleep(0.05)
            return
        if not self._fetch_sessions.on_answer(node, parts, response):
            log.info("fetch session with broker %d: %s", node, response.error_message)
            return
        for topic in response.topics:
            for result in topic.partitions:
                tp = (topic.name, result.partition)
                if offsets.get(tp) is None or self._fetch_offsets.get(tp) != offsets[tp]:
                    continue  # seeked or unassigned since the fetch was sent
                if result.error_code != ErrorCode.NONE:
                    self._on_partition_error(tp, result)
                    continue
                if result.HasField("diverging_epoch"):
                    self._on_truncation(tp, result.diverging_epoch)
                    continue
                if result.HasField("preferred_read_replica"):
                    self._read_replicas[tp] = result.preferred_read_replica
                    continue
                if result.records:
                    decoded, epoch, corrupt_at = self._decode(tp, result.records, offsets[tp])
                    if decoded:
                        self._buffers.setdefault(tp, deque()).append(_Buffered(decoded, epoch))
                        self._fetch_offsets[tp] = (
                            corrupt_at  # fetched again, it fails alone once these are polled
                            if corrupt_at is not None
                            else max(decoded[-1].offset + 1, result.next_fetch_offset)
                        )
                        continue
                if result.next_fetch_offset > self._fetch_offsets[tp]:
                    self._fetch_offsets[tp] = result.next_fetch_offset

    def _on_truncation(self, tp: TopicPartition, diverging: object) -> None:
        """The leader's log no longer holds what we read past `end_offset` (an unclean leader
        election truncated it): go back there rather than silently skipping what replaced it."""
        end_offset = diverging.end_offset  # type: ignore[attr-defined]
        if self.config.auto_offset_reset == "none":
            raise OffsetOutOfRangeError(
                f"log truncation detected on {tp[0]}-{tp[1]}: the leader's log ends epoch "
                f"{diverging.leader_epoch} at {end_offset}, below what this consumer read"  # type: ignore[attr-defined]
            )
        log.warning(
            "log truncation detected on %s-%d: resetting to offset %d", tp[0], tp[1], end_offset
        )
        position = self._positions.get(tp, end_offset)
        self._drop(tp)
        if end_offset < 0:
            self._resets[tp] = self._default_reset(tp)
        else:
            self._positions[tp] = self._fetch_offsets[tp] = min(end_offset, position)

    def _on_partition_error(self, tp: TopicPartition, result: object) -> None:
        code = result.error_code  # type: ignore[attr-defined]
        self._read_replicas.pop(tp, None)  # back to the leader, which may name another
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            spec = self._default_reset(tp)
            if spec < 0:
                raise OffsetOutOfRangeError(
                    f"offset {self._fetch_offsets[tp]} of {tp[0]}-{tp[1]} is out of range and "
                    "auto.offset.reset=none"
                )
            self._drop(tp)
            self._resets[tp] = spec
        elif code in (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.LEADER_NOT_AVAILABLE,
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.UNKNOWN_LEADER_EPOCH,
        ):
            self._metadata.mark_stale()
        else:
            raise KafkaError.of(code, result.error_message)  # type: ignore[attr-defined]

    @staticmethod
    def _decode(
        tp: TopicPartition, data: bytes, from_offset: int
    ) -> tuple[list[ConsumerRecord], int, int | None]:
        """The records at or after `from_offset`, the last batch's leader epoch, and the offset of
        a batch that cannot be decoded (None when all could). Records ahead of such a batch are
        returned; when it comes first, CorruptRecordError says which offsets to seek past."""
        topic, partition = tp
        records: list[ConsumerRecord] = []
        epoch = -1
        position = 0
        while position < len(data):
            try:
                batch = decode_batch(data, position)
            except SamsaError as error:
                corrupt_at = unreadable_batch_offsets(data, position, from_offset)
                if records:
                    return records, epoch, corrupt_at[0]
                raise CorruptRecordError(
                    f"{topic}-{partition}: the stored batch at offsets {corrupt_at[0]}.."
                    f"{corrupt_at[1]} cannot be decoded ({error}); seek to {corrupt_at[1] + 1} "
                    "to skip it"
                ) from None
            position += batch.header.size_bytes
            epoch = batch.header.partition_leader_epoch
            if batch.header.last_offset < from_offset:
                continue
            columns = zip(
                repeat(topic),
                repeat(partition),
                batch.offsets(),
                batch.timestamps(),
                batch.keys,
                batch.values,
                batch.headers,
                strict=False,
            )
            chunk = list(map(_new_tuple, repeat(ConsumerRecord), columns))
            if batch.header.base_offset < from_offset:
                chunk = [r for r in chunk if r.offset >= from_offset]
            records += chunk
        return records, epoch, None

    def _take(self, limit: int) -> list[ConsumerRecord]:
        taken: list[ConsumerRecord] = []
        for tp in self._assigned:
            buffers = self._buffers.get(tp)
            while buffers and len(taken) < limit:
                head = buffers[0]
                end = min(len(head.records), head.start + limit - len(taken))
                chunk = head.records[head.start : end]
                taken += chunk
                head.start = end
                if head.start >= len(head.records):
                    buffers.popleft()
                self._positions[tp] = chunk[-1].offset + 1
                self._epochs[tp] = head.epoch
            if len(taken) >= limit:
                break
        return taken

    def close(self) -> None:
        self._closed = True
        for node, request in self._fetch_sessions.close_requests().items():
            # Best effort: a broker also evicts sessions left idle.
            with contextlib.suppress(grpc.RpcError, KeyError, KafkaError):
                self._broker(node).Fetch(request, timeout=0.5)
        self._channels.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _list_offsets_request(
    specs: Mapping[TopicPartition, tuple[int, int]],
) -> broker_pb2.ListOffsetsRequest:
    by_topic: dict[str, list[broker_pb2.ListOffsetsRequest.PartitionData]] = {}
    for (topic, partition), (spec, timestamp) in specs.items():
        by_topic.setdefault(topic, []).append(
            broker_pb2.ListOffsetsRequest.PartitionData(
                partition=partition,
                offset_spec=spec,
                timestamp_ms=timestamp,  # type: ignore[arg-type]
            )
        )
    return broker_pb2.ListOffsetsRequest(
        topics=[
            broker_pb2.ListOffsetsRequest.TopicData(name=t, partitions=p)
            for t, p in by_topic.items()
        ]
    )
