"""Fetch: whole stored batches up to the high watermark, with Kafka's long-poll.

A fetch answers at once when its partitions hold at least `min_bytes` between them, otherwise it
waits up to `max_wait_ms` for appends, woken by the partitions' `data_arrived` events (never by
polling). Limits: `partition_max_bytes` per partition and `max_bytes` in total, except that the
first batch of the answer is returned whole even if larger (KIP-74), so a consumer always makes
progress. Records travel as the stored bytes; `decode_records` (for clients with only generated
code) decodes them into typed records on the broker. Reading one partition — the checks, the
read, a follower's progress — is partition_read.py's; this module decides which partitions a
pass reads and when the answer goes.

A fetch may belong to a fetch session (KIP-227, fetch_session.py): then it names only what
changed, is answered with only what is new, and parks until one of the session's partitions
changes, so that its cost follows what changed rather than how many partitions the fetcher
holds. Followers always use one; a fetch without one works as before.

A consumer's answer is read within the room the broker's answer budget leaves it (AnswerGate,
answer_budget.py says why): the answer's bytes are held from the pass that read them until the
caller has written the answer and releases `FetchAnswer.held_bytes`. A pass that could read
nothing for lack of room waits in line for it (within max_wait_ms) instead of for data; at the
deadline it answers what it has, possibly nothing. Followers' fetches (their replica_id proved
by the cluster secret) are exempt: strangers must not be able to stall replication.

With ACLs, a partition of a topic the caller may not READ is answered TOPIC_AUTHORIZATION_FAILED
with no records (`refused`, caller.topic_refusals: one decision per topic and fetch) and the
others are read, as Kafka answers per partition. In a session, a fetch under new ACLs (or from
another caller) also reads the session's partitions of refused topics (session_access.py), so
that a consumer whose READ was deleted is told at its next fetch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.answer_gate import AnswerGate
from samsa.services.broker.requests.fetch_session import (
    CLOSE_EPOCH,
    FetchSession,
    FetchSessionCache,
    PartitionKey,
    SessionError,
)
from samsa.services.broker.requests.fetch_wire import FetchAnswer, with_records
from samsa.services.broker.requests.partition_read import (
    FetchPartition,
    Outcome,
    PartitionReader,
    replica_id_of,
)
from samsa.services.runtime.caller import TopicRefusals
from samsa.services.runtime.session_access import mark_refused
from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)


async def fetch(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    sessions: FetchSessionCache | None = None,
) -> broker_pb2.FetchResponse:
    """`fetch_answer` as one FetchResponse, records inside (tests: no answer budget)."""
    return with_records(await fetch_answer(host, request, sessions))


async def fetch_answer(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    sessions: FetchSessionCache | None = None,
    gate: AnswerGate | None = None,
    refused: TopicRefusals | None = None,
) -> FetchAnswer:
    """Answer `request`, waiting for data as its max_wait_ms and min_bytes ask; in its fetch
    session when it names one (see fetch_session.py). The records travel beside the response
    (fetch_wire.py); with a `gate`, the caller releases the answer's `held_bytes` to it once
    the answer is written. `refused`: why the caller may not READ a topic (None: ACLs off)."""
    replica_id = replica_id_of(request)
    if replica_id >= 0:
        gate = None  # a member's fetch: never held back by strangers' answers
    if sessions is None or not request.HasField("session_id"):
        return await _fetch_sessionless(host, request, gate, refused)
    if request.session_epoch == CLOSE_EPOCH:
        # Only its own fetcher closes a session (as `get` and a restart check): a consumer
        # naming a follower's session id must not make it start over with a full fetch.
        _unwatch(host, sessions.close_if_owned(request.session_id, replica_id))
        return await _fetch_sessionless(host, request, gate, refused)
    now_ms = int(time.time() * 1000)
    opening = request.session_epoch == 0
    try:
        if opening:
            if request.session_id:  # the fetcher starts over: its old session is done
                _unwatch(host, sessions.close_if_owned(request.session_id, replica_id))
            session = _open_session(host, sessions, request, replica_id, now_ms)
            if session is None:  # no room: a full fetch without a session still works
                return await _fetch_sessionless(host, request, gate, refused)
        else:
            session = sessions.get(request.session_id, request.session_epoch, replica_id)
        _update_session(host, sessions, session, request, now_ms)
    except SessionError as error:
        response = broker_pb2.FetchResponse(error_message=str(error))
        response.error_code = error.code  # type: ignore[assignment]
        return FetchAnswer(response, {})
    if refused is not None and session.replica_id < 0:
        mark_refused(session, refused.grant(), refused)
    session.busy = True
    try:
        return await _fetch_in_session(host, request, session, gate, refused, full=opening)
    except BaseException:
        if opening:  # the fetcher never learnt its id: nobody will use it
            _unwatch(host, sessions.close(session.session_id))
        raise
    finally:
        session.busy = False


async def _fetch_sessionless(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    gate: AnswerGate | None,
    refused: TopicRefusals | None = None,
) -> FetchAnswer:
    wait_s = min(request.max_wait_ms, limits.fetch_wait_ms_max) / 1000
    deadline = time.monotonic() + wait_s
    ticket: int | None = None  # its place in line for the answer budget's room
    try:
        while True:
            room = None if gate is None else gate.room_bytes(ticket)
            response, reader, waits = _read_pass(host, request, room, refused)
            remaining = deadline - time.monotonic()
            if _waits_for_room(reader, remaining):
                ticket = await gate.wait(reader.room_needed, ticket, remaining)  # type: ignore[union-attr]
                continue
            if reader.total >= max(request.min_bytes, 1) or remaining <= 0 or not waits:
                held = 0 if gate is None else gate.hold(reader.total, ticket)
                reader.count_answer()
                return FetchAnswer(response, reader.records, held)
            await first_of(waits, remaining)
    finally:
        if gate is not None:
            gate.leave(ticket)


def _waits_for_room(reader: PartitionReader, remaining_s: float) -> bool:
    """Whether the pass read nothing for lack of room (and failed nowhere), and may wait in
    line for it rather than answer empty."""
    return (
        bool(reader.room_needed)
        and not reader.total
        and not reader.answer_now
        and (remaining_s > 0)
    )


def _open_session(
    host: PartitionHost,
    sessions: FetchSessionCache,
    request: broker_pb2.FetchRequest,
    replica_id: int,
    now_ms: int,
) -> FetchSession | None:
    partitions = sum(len(topic.partitions) for topic in request.topics)
    session, evicted = sessions.open(replica_id, now_ms, partitions)
    for old in evicted:
        _unwatch(host, old)
    if session is not None:
        log.info(
            "fetch session opened",
            extra={
                "session_id": session.session_id,
                "replica_id": replica_id,
                "partitions": partitions,
                "sessions": len(sessions),
            },
        )
    return session


def _update_session(
    host: PartitionHost,
    sessions: FetchSessionCache,
    session: FetchSession,
    request: broker_pb2.FetchRequest,
    now_ms: int,
) -> None:
    """Take the request's added, changed and forgotten partitions into the session, making room
    for the added ones (FetchSessionCache.make_room)."""
    for topic in request.forgotten_topics:
        for partition in topic.partitions:
            if session.forget((topic.name, partition)):
                host.unwatch((topic.name, partition), session.wake)
    added = sum(
        (topic.name, wanted.partition) not in session.partitions
        for topic in request.topics
        for wanted in topic.partitions
    )
    evicted = sessions.make_room(session.replica_id, added, now_ms, new_session=False, keep=session)
    if evicted is None:
        _unwatch(host, sessions.close(session.session_id))
        raise SessionError(
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            f"fetch session {session.session_id} closed: this broker's sessions hold "
            f"{limits.fetch_session_partitions_total_max} partitions at most; fetch without one",
        )
    for old in evicted:
        _unwatch(host, old)
    for topic in request.topics:
        topic_id = topic.topic_id
        for wanted in topic.partitions:
            key = (topic.name, wanted.partition)
            if session.update(key, wanted, topic_id):
                host.watch(key, session.wake)


def _unwatch(host: PartitionHost, session: FetchSession | None) -> None:
    if session is not None:
        for key in session.partitions:
            host.unwatch(key, session.wake)


async def _fetch_in_session(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    session: FetchSession,
    gate: AnswerGate | None,
    refused: TopicRefusals | None,
    *,
    full: bool,
) -> FetchAnswer:
    wait_s = min(request.max_wait_ms, limits.fetch_wait_ms_max) / 1000
    deadline = time.monotonic() + wait_s
    named = [
        (topic.name, wanted.partition) for topic in request.topics for wanted in topic.partitions
    ]
    ticket: int | None = None  # its place in line for the answer budget's room
    try:
        while True:
            keys = list(session.partitions) if full else _incremental_keys(session, named)
            room = None if gate is None else gate.room_bytes(ticket)
            answer = _read_session_pass(host, request, session, keys, room, refused, full=full)
            remaining = deadline - time.monotonic()
            if _waits_for_room(answer.reader, remaining):
                ticket = await gate.wait(answer.reader.room_needed, ticket, remaining)  # type: ignore[union-attr]
                continue
            if answer.size >= max(request.min_bytes, 1) or remaining <= 0 or answer.answer_now:
                held = 0 if gate is None else gate.hold(answer.size, ticket)
                return _session_answer(session, answer, held, full=full)
            await _park(session, remaining)
    finally:
        if gate is not None:
            gate.leave(ticket)


def _session_answer(
    session: FetchSession, answer: _SessionPass, held_bytes: int, *, full: bool
) -> FetchAnswer:
    """The pass `answer` as the session's answer: what it told is remembered, and what it
    left out is read first next time."""
    for key, result in answer.told:
        session.partitions[key].remember(result)
    session.dirty.difference_update(answer.examined)
    session.left_out = answer.left_out
    session.answered(int(time.time() * 1000), opening=full)
    answer.reader.count_answer()
    answer.response.session_id = session.session_id
    return FetchAnswer(answer.response, answer.reader.records, held_bytes)


async def _park(session: FetchSession, timeout_s: float) -> None:
    """Wait for the session's next wake, at most `timeout_s`. A bare future resolved by the
    wake or by a timer (not asyncio.wait_for, which wraps the wait in a task of its own under
    Python 3.11; nor asyncio.timeout, which cancels the task and costs twice the timer): the
    parked fetch runs in the very next turn of the event loop after an append, which an
    acks=all write waits for."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    session.on_wake = wake
    timer = loop.call_later(timeout_s, wake)
    try:
        await waiter
    finally:
        timer.cancel()
        session.on_wake = None


def _incremental_keys(session: FetchSession, named: list[PartitionKey]) -> list[PartitionKey]:
    """The partitions an incremental pass examines: those the last answer left out (first, so
    that a partition with data comes first in turn, KIP-74's whole first batch included), those
    the request names, then the dirty."""
    keys = [key for key in session.left_out if key in session.partitions]
    seen = set(keys)
    keys.extend(key for key in named if key in session.partitions and key not in seen)
    seen.update(named)
    keys.extend(key for key in session.dirty if key not in seen and key in session.partitions)
    return keys


class _SessionPass(NamedTuple):
    response: broker_pb2.FetchResponse
    size: int
    answer_now: bool  # a partition failed or must be answered without waiting
    examined: list[PartitionKey]  # read (not skipped for a full answer): no longer dirty
    told: list[tuple[PartitionKey, FetchPartition]]  # in the answer: remembered once final
    left_out: list[PartitionKey]  # skipped: the answer was full
    reader: PartitionReader  # counts the answer's bytes out once it is final


def _read_session_pass(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    session: FetchSession,
    keys: list[PartitionKey],
    room_bytes: int | None,
    refused: TopicRefusals | None,
    *,
    full: bool,
) -> _SessionPass:
    response = broker_pb2.FetchResponse()
    reader = PartitionReader(host, request, int(time.time() * 1000), room_bytes)
    topics: dict[str, broker_pb2.FetchResponse.TopicResponse] = {}
    examined: list[PartitionKey] = []
    told: list[tuple[PartitionKey, FetchPartition]] = []
    left_out: list[PartitionKey] = []
    for key in keys:
        known = session.partitions[key]
        result = FetchPartition(partition=key[1], next_fetch_offset=known.wanted.fetch_offset)
        outcome = _read(reader, refused, key[0], known.wanted, result, known.topic_id)
        if outcome is Outcome.SKIPPED:
            # No room left in the answer: the next fetch must read it, and it may name it no
            # more (its position did not move) nor change meanwhile.
            session.dirty.add(key)
            left_out.append(key)
            continue
        examined.append(key)
        if full or known.has_news(result, key in reader.records):
            topic = topics.get(key[0])
            if topic is None:
                topic = topics[key[0]] = response.topics.add(name=key[0])
            topic.partitions.append(result)
            told.append((key, result))
    return _SessionPass(response, reader.total, reader.answer_now, examined, told, left_out, reader)


def read_once(
    host: PartitionHost, request: broker_pb2.FetchRequest
) -> tuple[broker_pb2.FetchResponse, int, list[asyncio.Event]]:
    """One pass over the partitions: the answer (records inside), its record bytes, and events
    to wait on."""
    response, reader, waits = _read_pass(host, request, None)
    return with_records(FetchAnswer(response, reader.records)), reader.total, waits


def _read(
    reader: PartitionReader,
    refused: TopicRefusals | None,
    topic: str,
    wanted: broker_pb2.FetchRequest.PartitionData,
    result: FetchPartition,
    topic_id: bytes,
) -> Outcome:
    """`reader.read`, unless the caller may not READ `topic`: TOPIC_AUTHORIZATION_FAILED, no
    records, and the fetch answered at once (as any failed partition)."""
    denied = None if refused is None else refused(topic)
    if denied is None:
        return reader.read(topic, wanted, result, topic_id)
    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # type: ignore[assignment]
    result.error_message = denied
    reader.answer_now = True
    return Outcome.FAILED


def _read_pass(
    host: PartitionHost,
    request: broker_pb2.FetchRequest,
    room_bytes: int | None,
    refused: TopicRefusals | None = None,
) -> tuple[broker_pb2.FetchResponse, PartitionReader, list[asyncio.Event]]:
    """`read_once`, with the pass's reader (its size and the bytes to count once answered),
    within `room_bytes` of the answer budget (None: unbounded)."""
    response = broker_pb2.FetchResponse()
    reader = PartitionReader(host, request, int(time.time() * 1000), room_bytes)
    waits: list[asyncio.Event] = []
    for topic in request.topics:
        topic_response = response.topics.add(name=topic.name)
        topic_id = topic.topic_id  # read once: each read of a bytes field copies it
        for wanted in topic.partitions:
            result = topic_response.partitions.add(
                partition=wanted.partition, next_fetch_offset=wanted.fetch_offset
            )
            if _read(reader, refused, topic.name, wanted, result, topic_id) is Outcome.READ:
                hosted = host.get(topic.name, wanted.partition)
                if hosted is not None:
                    waits.append(hosted.data_arrived)
    return response, reader, [] if reader.answer_now else waits


async def first_of(events: list[asyncio.Event], timeout_s: float) -> None:
    """Return when any of `events` is set, or after `timeout_s`."""
    tasks = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
