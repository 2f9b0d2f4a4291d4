"""Fetch: whole stored batches up to the high watermark, with Kafka's long-poll.

A fetch answers at once when its partitions hold at least `min_bytes` between them, otherwise it
waits up to `max_wait_ms` for appends, woken by the partitions' `data_arrived` events (never by
polling). Limits: `partition_max_bytes` per partition and `max_bytes` in total, except that the
first batch of the answer is returned whole even if larger (KIP-74), so a consumer always makes
progress. Records travel as the stored bytes; `decode_records` (for clients with only generated
code) decodes them into typed records on the broker.

A fetch may belong to a fetch session (KIP-227, fetch_session.py): then it names only what
changed, is answered with only what is new, and parks until one of the session's partitions
changes, so that its cost follows what changed rather than how many partitions the fetcher
holds. Followers always use one; a fetch without one works as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from typing import NamedTuple

from samsa.common import limits
from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.record.codec import RecordBatch, decode_batch
from samsa.common.record.header import read_header
from samsa.services.broker.fetch_session import (
    FetchSession,
    FetchSessionCache,
    PartitionKey,
    SessionError,
    WantedPartition,
)
from samsa.services.broker.partition_host import HostedPartition, LeadershipError, PartitionHost
from samsa.v1 import broker_pb2, records_pb2

log = logging.getLogger(__name__)

PARTITION_MAX_BYTES_DEFAULT = 1024 * 1024  # Kafka's max.partition.fetch.bytes
MAX_BYTES_DEFAULT = 50 * 1024 * 1024  # Kafka's fetch.max.bytes

FetchPartition = broker_pb2.FetchResponse.PartitionResponse
CLOSE_EPOCH = -1  # a session_epoch that closes the session named


async def fetch(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    sessions: FetchSessionCache | None = None,
) -> broker_pb2.FetchResponse:
    """Answer `request`, waiting for data as its max_wait_ms and min_bytes ask; in its fetch
    session when it names one (see fetch_session.py)."""
    if sessions is None or not request.HasField("session_id"):
        return await _fetch_sessionless(host, request)
    if request.session_epoch == CLOSE_EPOCH:
        _unwatch(host, sessions.close(request.session_id))
        return await _fetch_sessionless(host, request)
    replica_id = _replica_id(request)
    now_ms = int(time.time() * 1000)
    opening = request.session_epoch == 0
    try:
        if opening:
            if request.session_id:  # the fetcher starts over: its old session is done
                _unwatch(host, sessions.close_if_owned(request.session_id, replica_id))
            session = _open_session(host, sessions, request, replica_id, now_ms)
            if session is None:  # no room: a full fetch without a session still works
                return await _fetch_sessionless(host, request)
        else:
            session = sessions.get(request.session_id, request.session_epoch, replica_id)
        _update_session(host, sessions, session, request)
    except SessionError as error:
        response = broker_pb2.FetchResponse(error_message=str(error))
        response.error_code = error.code  # type: ignore[assignment]
        return response
    session.busy = True
    try:
        return await _fetch_in_session(host, request, session, full=opening)
    except BaseException:
        if opening:  # the fetcher never learnt its id: nobody will use it
            _unwatch(host, sessions.close(session.session_id))
        raise
    finally:
        session.busy = False


async def _fetch_sessionless(
    host: PartitionHost, request: broker_pb2.FetchRequest
) -> broker_pb2.FetchResponse:
    wait_s = min(request.max_wait_ms, limits.fetch_wait_ms_max) / 1000
    deadline = time.monotonic() + wait_s
    while True:
        response, size, waits = read_once(host, request)
        remaining = deadline - time.monotonic()
        if size >= max(request.min_bytes, 1) or remaining <= 0 or not waits:
            return response
        await first_of(waits, remaining)


def _open_session(
    host: PartitionHost,
    sessions: FetchSessionCache,
    request: broker_pb2.FetchRequest,
    replica_id: int,
    now_ms: int,
) -> FetchSession | None:
    if not sessions.room_for(sum(len(topic.partitions) for topic in request.topics)):
        return None
    session, evicted = sessions.open(replica_id, now_ms)
    for old in evicted:
        _unwatch(host, old)
    if session is not None:
        log.info(
            "fetch session opened",
            extra={
                "session_id": session.session_id,
                "replica_id": replica_id,
                "partitions": sum(len(topic.partitions) for topic in request.topics),
                "sessions": len(sessions),
            },
        )
    return session


def _update_session(
    host: PartitionHost,
    sessions: FetchSessionCache,
    session: FetchSession,
    request: broker_pb2.FetchRequest,
) -> None:
    """Take the request's added, changed and forgotten partitions into the session."""
    for topic in request.forgotten_topics:
        for partition in topic.partitions:
            if session.forget((topic.name, partition)):
                host.unwatch((topic.name, partition), session.wake)
    added = sum(
        (topic.name, wanted.partition) not in session.partitions
        for topic in request.topics
        for wanted in topic.partitions
    )
    if added and not sessions.room_for(added):
        _unwatch(host, sessions.close(session.session_id))
        raise SessionError(
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            f"fetch session {session.session_id} closed: this broker's sessions hold "
            f"{limits.fetch_session_partitions_total_max} partitions at most; fetch without one",
        )
    for topic in request.topics:
        for wanted in topic.partitions:
            key = (topic.name, wanted.partition)
            if session.update(key, wanted):
                host.watch(key, session.wake)


def _unwatch(host: PartitionHost, session: FetchSession | None) -> None:
    if session is not None:
        for key in session.partitions:
            host.unwatch(key, session.wake)


async def _fetch_in_session(
    host: PartitionHost, request: broker_pb2.FetchRequest, session: FetchSession, *, full: bool
) -> broker_pb2.FetchResponse:
    wait_s = min(request.max_wait_ms, limits.fetch_wait_ms_max) / 1000
    deadline = time.monotonic() + wait_s
    named = [
        (topic.name, wanted.partition) for topic in request.topics for wanted in topic.partitions
    ]
    while True:
        keys = list(session.partitions) if full else _incremental_keys(session, named)
        answer = _read_session_pass(host, request, session, keys, full=full)
        remaining = deadline - time.monotonic()
        if answer.size >= max(request.min_bytes, 1) or remaining <= 0 or answer.errors:
            for key, result in answer.told:
                session.partitions[key].remember(result)
            session.dirty.difference_update(answer.examined)
            session.answered(int(time.time() * 1000), opening=full)
            answer.response.session_id = session.session_id
            return answer.response
        woken = asyncio.Event()
        session.on_wake = woken.set
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), remaining)
        finally:
            session.on_wake = None


def _incremental_keys(session: FetchSession, named: list[PartitionKey]) -> list[PartitionKey]:
    """The partitions an incremental pass examines: those the request names, then the dirty."""
    keys = [key for key in named if key in session.partitions]
    named_set = set(named)
    keys.extend(key for key in session.dirty if key not in named_set and key in session.partitions)
    return keys


class _SessionPass(NamedTuple):
    response: broker_pb2.FetchResponse
    size: int
    errors: bool
    examined: list[PartitionKey]  # read (not skipped for a full answer): no longer dirty
    told: list[tuple[PartitionKey, FetchPartition]]  # in the answer: remembered once final


def _read_session_pass(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    session: FetchSession,
    keys: list[PartitionKey],
    *,
    full: bool,
) -> _SessionPass:
    response = broker_pb2.FetchResponse()
    reader = _Reader(host, request)
    topics: dict[str, broker_pb2.FetchResponse.TopicResponse] = {}
    examined: list[PartitionKey] = []
    told: list[tuple[PartitionKey, FetchPartition]] = []
    for key in keys:
        known = session.partitions[key]
        result = FetchPartition(partition=key[1], next_fetch_offset=known.wanted.fetch_offset)
        if reader.read(key[0], known.wanted, result) is _Outcome.SKIPPED:
            continue
        examined.append(key)
        if full or known.has_news(result):
            topic = topics.get(key[0])
            if topic is None:
                topic = topics[key[0]] = response.topics.add(name=key[0])
            topic.partitions.append(result)
            told.append((key, result))
    return _SessionPass(response, reader.total, reader.errors, examined, told)


def read_once(
    host: PartitionHost, request: broker_pb2.FetchRequest
) -> tuple[broker_pb2.FetchResponse, int, list[asyncio.Event]]:
    """One pass over the partitions: the answer, its record bytes, and events to wait on."""
    response = broker_pb2.FetchResponse()
    reader = _Reader(host, request)
    waits: list[asyncio.Event] = []
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        for wanted in topic.partitions:
            result = topic_response.partitions.add(
                partition=wanted.partition, next_fetch_offset=wanted.fetch_offset
            )
            if reader.read(topic.name, wanted, result) is _Outcome.READ:
                hosted = host.get(topic.name, wanted.partition)
                if hosted is not None:
                    waits.append(hosted.data_arrived)
    return response, reader.total, [] if reader.errors else waits


class _Outcome(enum.Enum):
    READ = "read"  # the result holds the partition's state and any records
    FAILED = "failed"  # the result holds an error
    SKIPPED = "skipped"  # the answer is full: the client asks again from here
    ANSWERED = "answered"  # a diverging epoch or a preferred replica, no records


class _Reader:
    """One pass's reads of single partitions, sharing the answer's byte budget."""

    def __init__(self, host: PartitionHost, request: broker_pb2.FetchRequest) -> None:
        self.host = host
        self.request = request
        self.replica_id = _replica_id(request)
        self.now_ms = int(time.time() * 1000)
        self.budget = min(request.max_bytes or MAX_BYTES_DEFAULT, limits.fetch_response_bytes_max)
        self.total = 0
        self.errors = False
        if self.replica_id >= 0:
            host.replica_fetch_ms[self.replica_id] = self.now_ms

    def read(self, topic: str, wanted: WantedPartition, result: FetchPartition) -> _Outcome:
        outcome = self._read(topic, wanted, result)
        if outcome is _Outcome.FAILED:
            self.errors = True
        return outcome

    def _read(self, topic: str, wanted: WantedPartition, result: FetchPartition) -> _Outcome:
        host, request, replica_id = self.host, self.request, self.replica_id
        hosted = host.leader(topic, wanted.partition)
        if isinstance(hosted, LeadershipError) and replica_id < 0:
            # Any replica serves consumers up to its own high watermark (KIP-392): a consumer
            # sent here by its leader's preferred_read_replica, or one whose metadata is a
            # little stale. Committed data only, so it is never wrong.
            hosted = host.get(topic, wanted.partition) or hosted
        if isinstance(hosted, LeadershipError):
            _fail(result, hosted.code, hosted.message)
            result.current_leader.leader_id = hosted.leader_id
            result.current_leader.leader_epoch = hosted.leader_epoch
            return _Outcome.FAILED
        if replica_id >= 0 and not _is_replica(hosted, replica_id, result):
            return _Outcome.FAILED
        if _diverged(hosted, wanted, result):
            return _Outcome.ANSWERED
        if request.rack_id and replica_id < 0 and hosted.is_leader:
            preferred = _replica_in_rack(host, hosted, request.rack_id)
            if preferred is not None:
                result.preferred_read_replica = preferred
                result.high_watermark = hosted.high_watermark
                return _Outcome.ANSWERED
        high_watermark = hosted.high_watermark
        result.high_watermark = high_watermark
        result.last_stable_offset = high_watermark
        result.log_start_offset = hosted.log.log_start_offset
        if wanted.HasField("current_leader_epoch") and (
            wanted.current_leader_epoch != hosted.leader_epoch
        ):
            code = (
                ErrorCode.FENCED_LEADER_EPOCH
                if wanted.current_leader_epoch < hosted.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
            _fail(result, code, f"leader epoch is {hosted.leader_epoch}: refresh metadata")
            return _Outcome.FAILED
        partition_budget = min(
            wanted.partition_max_bytes or PARTITION_MAX_BYTES_DEFAULT,
            limits.fetch_partition_bytes_max,
            max(self.budget - self.total, 0),
        )
        if self.total and partition_budget <= 0:
            return _Outcome.SKIPPED
        # Followers read up to the log end (that is how the high watermark advances);
        # consumers only up to the high watermark.
        upper = None if replica_id >= 0 else high_watermark
        try:
            read = hosted.log.read(wanted.fetch_offset, max(partition_budget, 1), max_offset=upper)
        except SamsaError as error:
            _fail(result, error.code, str(error))
            return _Outcome.FAILED
        if replica_id >= 0 and hosted.replication is not None:
            hosted.replication.on_follower_fetch(
                replica_id, wanted.fetch_offset, hosted.log.log_end_offset, self.now_ms
            )
            if replica_id not in hosted.isr:
                host.isr_candidates.add((topic, wanted.partition))
            if hosted.advance_high_watermark():
                result.high_watermark = hosted.high_watermark
                result.last_stable_offset = hosted.high_watermark
        result.next_fetch_offset = read.next_offset
        if read.records:
            if request.decode_records:
                _decode_into(result, read.records, wanted.fetch_offset)
            else:
                result.records = read.records
            self.total += len(read.records)
        return _Outcome.READ


def _replica_id(request: broker_pb2.FetchRequest) -> int:
    return request.replica_id if request.HasField("replica_id") else -1


def _replica_in_rack(host: PartitionHost, hosted: HostedPartition, rack: str) -> int | None:
    """An in-sync follower in the consumer's rack, when the leader is not in it (KIP-392)."""
    brokers = host.image.brokers
    me = brokers.get(host.broker_id)
    if me is None or me.rack == rack:
        return None
    for replica in hosted.isr:
        broker = brokers.get(replica)
        usable = replica != host.broker_id and broker is not None and not broker.fenced
        if usable and broker.rack == rack:  # type: ignore[union-attr]
            return replica
    return None


def _is_replica(hosted: HostedPartition, replica_id: int, result: FetchPartition) -> bool:
    if hosted.state is not None and replica_id in hosted.state.replicas:
        return True
    _fail(
        result,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        f"broker {replica_id} is not a replica of {hosted.topic}-{hosted.partition}",
    )
    return False


def _diverged(
    hosted: HostedPartition, wanted: broker_pb2.FetchRequest.PartitionData, result: FetchPartition
) -> bool:
    """KIP-320: does the fetcher's log (its last fetched epoch) disagree with ours? If so the
    answer carries the epoch and end offset to truncate (a follower) or reset (a consumer) to."""
    if not wanted.HasField("last_fetched_epoch") or wanted.last_fetched_epoch < 0:
        return False
    epoch, end_offset = hosted.log.end_offset_for_epoch(wanted.last_fetched_epoch)
    if epoch == wanted.last_fetched_epoch and end_offset >= wanted.fetch_offset:
        return False
    result.diverging_epoch.leader_epoch = epoch
    result.diverging_epoch.end_offset = end_offset
    result.high_watermark = hosted.high_watermark
    result.log_start_offset = hosted.log.log_start_offset
    return True


def _decode_into(result: FetchPartition, records: bytes, from_offset: int) -> None:
    """Typed records for clients with only the generated code. A stored batch that cannot be
    decoded (written by an older version, or damaged on disk) ends the answer before it, so the
    records ahead of it are still served; when it comes first, the partition answers
    CORRUPT_MESSAGE naming its offset, and the client can seek past it."""
    position = 0
    while position < len(records):
        try:
            batch = decode_batch(records, position)
        except SamsaError as error:
            bad_offset = _base_offset_at(records, position, from_offset)
            if position == 0:
                _fail(
                    result,
                    ErrorCode.CORRUPT_MESSAGE,
                    f"the stored batch at offset {bad_offset} cannot be decoded ({error}); "
                    f"seek past it to read on",
                )
            else:
                result.next_fetch_offset = bad_offset
            return
        _add_typed(result, batch, from_offset)
        position += batch.header.size_bytes


def _base_offset_at(records: bytes, position: int, default: int) -> int:
    try:
        return max(default, read_header(records, position).base_offset)
    except SamsaError:
        return default


def _add_typed(result: FetchPartition, batch: RecordBatch, from_offset: int) -> None:
    for record in batch:
        if record.offset < from_offset:
            continue
        typed = result.decoded_records.add(offset=record.offset, timestamp_ms=record.timestamp)
        if record.key is not None:
            typed.key = record.key
        if record.value is not None:
            typed.value = record.value
        for key, value in record.headers:
            header = records_pb2.RecordHeader(key=key)
            if value is not None:
                header.value = value
            typed.headers.append(header)


async def first_of(events: list[asyncio.Event], timeout_s: float) -> None:
    """Return when any of `events` is set, or after `timeout_s`."""
    tasks = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _fail(result: FetchPartition, code: int, message: str) -> None:
    result.error_code = code  # type: ignore[assignment]
    result.error_message = message
